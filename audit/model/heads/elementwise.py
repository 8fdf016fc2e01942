"""Heads with an increasing element-wise map f before the softmax: log_softmax(f(W h + b)).

SigSoftmax and GSS (fixed maps, ``audit.model.kernels.gss``) and LMS-PLIF (a learned piecewise-linear
map, ``audit.model.kernels.plif``) with its frozen control.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from audit.model.kernels.gss import gss_log_softmax, gss_map
from audit.model.heads.base import Head
from audit.model.kernels.plif import plif_apply, plif_init, plif_log_softmax
from audit.model.heads.traits import GSSTraits, PLIFFrozenTraits, PLIFTraits, SigSoftmaxTraits


class SigSoftmax(SigSoftmaxTraits, Head):
    """SigSoftmax (Kanai et al. 2018): p_i proportional to exp(l_i) * sigmoid(l_i).

    Computed as log_softmax(l + log sigmoid(l)) = GSS(0, 2), which equals log(exp(l) sigmoid(l))
    up to the normaliser and is stable for any logit (the reference code exponentiated naively).
    """

    def from_logits(self, logits):
        return gss_log_softmax(logits, 0.0, 2.0)

    def forward(self, h):
        return self.from_logits(self.logits(h))


class GSS(GSSTraits, Head):
    """Generalised SigSoftmax (Parthiban et al. 2021) with fixed (c, k).

    f(x) = k (x - c) + c - (k - 1) softplus(x - c), a smooth two-piece linear map with slope k
    below c and 1 above; log-P = log_softmax(f(l)). gss(0, 2) is sigsoftmax, gss(c, 1) softmax.
    Computed as x + (k - 1) log sigmoid(x - c) in one fused function (``audit.model.kernels.gss``), which
    never overflows (the reference computed log(exp(x - c) + 1)).
    """

    def __init__(self, spec):
        super().__init__(spec)
        self.c = self.option("c")
        self.k = self.option("k", low=1e-6)  # f is increasing for every k > 0

    def transformed_logits(self, h):
        return gss_map(self.logits(h), self.c, self.k)

    def from_logits(self, logits):
        return gss_log_softmax(logits, self.c, self.k)

    def forward(self, h):
        # log_softmax(f(l)) = log_softmax(f(l) - c) and f(l) - c = g(l - c) with g = gss(0, k):
        # the shift by c joins the decoder's bias add, sparing two passes over the logits
        if self.bias is None:
            shifted = F.linear(h, self.embedding.weight).sub_(self.c)
        else:
            shifted = F.linear(h, self.embedding.weight, self.bias - self.c)
        return gss_log_softmax(shifted, 0.0, self.k)


class PLIF(PLIFTraits, Head):
    """LMS-PLIF (Ganea et al. 2019): log_softmax(f(l)) with a learned increasing
    piecewise-linear f shared by all words and contexts (K slopes; ``audit.model.kernels.plif``).

    Options: knots K, bound T, w_scale (std of the init noise), lr (own optimiser group, kept
    after the ASGD switch), seed (of the init draw; default torch.initial_seed(), i.e. the run
    seed once the trainer has called torch.manual_seed).
    """

    def __init__(self, spec):
        super().__init__(spec)
        self.knots = self.option("knots", int, low=1)
        self.bound = self.option("bound", low=1e-6)
        self.lr = self.option("lr", low=0.0)
        seed = self.options["seed"]
        seed = torch.initial_seed() if seed is None else int(seed)
        w = plif_init(self.knots, self.option("w_scale", low=0.0), seed, spec.embedding.weight.dtype)
        # frozen: requires_grad False keeps w in the state dict but out of the optimiser and
        # out of the trainable-parameter count, as in the reference's --plif_smax_freeze
        self.w = nn.Parameter(w, requires_grad=self.trainable)

    def transformed_logits(self, h):
        return plif_apply(self.logits(h), self.w, self.bound)

    def from_logits(self, logits):
        return plif_log_softmax(logits, self.w, self.bound)

    def forward(self, h):
        return self.from_logits(self.logits(h))

    def extra_param_groups(self):
        return [{"params": [self.w], "lr": self.lr, "name": "plif"}] if self.w.requires_grad else []


class PLIFFrozen(PLIFFrozenTraits, PLIF):
    """Control for PLIF: the slopes stay at their random initialisation (not trained)."""

