"""Output heads: map the last LSTM layer's output to log-probabilities over the vocabulary.

Every head is registered by name in ``HEADS`` and built through ``build_head``. A head takes
``h`` of shape (T, B, d_in) and returns log-probabilities of shape (T, B, V) that normalise
over the last axis. The decoder weight is the input embedding's (weight tying), so a head
never owns a V x d matrix of its own. Sources and deviations from the reference code are in
shared/reference/protocol.md, section 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from audit.errors import AuditError
from audit.model.gss import gss_log_softmax, gss_map
from audit.model.options import HEAD_OPTIONS
from audit.model.mixtures import locked_dropout, mixture_log_probs, sigmoid_tree
from audit.model.plif import plif_apply, plif_init, plif_log_softmax


@dataclass
class HeadSpec:
    """What a head needs to know about the model it sits on."""

    d_in: int                      # size of the last LSTM layer's output (d')
    embedding: nn.Embedding        # tied input/output embedding, V x d
    options: dict = field(default_factory=dict)  # head-specific options from the config
    decoder_bias: bool = True      # the decoder bias adds one to the softmax log-P rank


class Head(nn.Module):
    """Base class: a tied decoder ``l = W h + b`` plus a head-specific map to log-probs."""

    name = "base"
    projects_input = False  # True for heads that map d_in to the embedding size themselves
    defaults: dict = {}     # the options a head accepts, with their defaults (audit.model.options)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.name in HEAD_OPTIONS:  # one table of options, readable without torch
            cls.defaults = HEAD_OPTIONS[cls.name]

    def __init__(self, spec: HeadSpec):
        super().__init__()
        self.embedding = spec.embedding  # shared module: its weight is counted once
        vocab, emb = spec.embedding.weight.shape
        if spec.d_in != emb and not self.projects_input:
            raise AuditError(f"head {self.name!r} needs d_in == embedding size, got {spec.d_in} != {emb}")
        unknown = sorted(set(spec.options) - set(self.defaults))
        if unknown:
            known = ", ".join(sorted(self.defaults)) or "none"
            raise AuditError(f"head {self.name!r}: unknown option {unknown[0]!r}; known options: {known}")
        self.options = {**self.defaults, **spec.options}
        self.vocab_size, self.emb_size, self.d_in = vocab, emb, spec.d_in
        self.bias = nn.Parameter(torch.zeros(vocab)) if spec.decoder_bias else None

    def option(self, key: str, kind=float, low=None, high=None):
        """An option converted to ``kind`` and range-checked (inclusive bounds)."""
        value = self.options[key]
        try:
            value = kind(value)
        except (TypeError, ValueError):
            raise AuditError(f"head {self.name!r}: option {key} must be {kind.__name__}, got {value!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise AuditError(f"head {self.name!r}: option {key}={value} outside [{low}, {high}]")
        return value

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Tied decoder logits, shape (..., V)."""
        return F.linear(h, self.embedding.weight, self.bias)

    def transformed_logits(self, h: torch.Tensor) -> torch.Tensor | None:
        """f(l), the logits after the head's element-wise map, or None if it has none."""
        return None

    def from_logits(self, logits: torch.Tensor) -> torch.Tensor | None:
        """log-P from the tied decoder logits l = W h + b, for heads whose log-P is a function of
        l alone (the softmax family: an element-wise map, then log_softmax); None otherwise
        (mixtures). ``audit.evaluate.gradient_share`` differentiates through it."""
        return None

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def extra_param_groups(self) -> list[dict]:
        """Optimiser groups with their own settings (e.g. PLIF's learning rate).

        The trainer puts every other trainable parameter in the main group.
        """
        return []


class Softmax(Head):
    """The plain softmax: log_softmax(W h + b). Log-P rank is at most d + 2."""

    name = "softmax"

    def transformed_logits(self, h):
        return self.logits(h)

    def from_logits(self, logits):
        return F.log_softmax(logits, dim=-1)

    def forward(self, h):
        return self.from_logits(self.logits(h))


class SoftmaxMatched(Softmax):
    """A softmax whose embedding size is solved so that the model's parameter count matches
    another arm's (``options.match``); see ``audit.params.solve_matched_size``. The head itself
    is the plain softmax: only the model sizes differ."""

    name = "softmax_matched"


class SigSoftmax(Head):
    """SigSoftmax (Kanai et al. 2018): p_i proportional to exp(l_i) * sigmoid(l_i).

    Computed as log_softmax(l + log sigmoid(l)) = GSS(0, 2), which equals log(exp(l) sigmoid(l))
    up to the normaliser and is stable for any logit (the reference code exponentiated naively).
    """

    name = "sigsoftmax"

    def from_logits(self, logits):
        return gss_log_softmax(logits, 0.0, 2.0)

    def forward(self, h):
        return self.from_logits(self.logits(h))


class GSS(Head):
    """Generalised SigSoftmax (Parthiban et al. 2021) with fixed (c, k).

    f(x) = k (x - c) + c - (k - 1) softplus(x - c), a smooth two-piece linear map with slope k
    below c and 1 above; log-P = log_softmax(f(l)). gss(0, 2) is sigsoftmax, gss(c, 1) softmax.
    Computed as x + (k - 1) log sigmoid(x - c) in one fused function (``audit.model.gss``), which
    never overflows (the reference computed log(exp(x - c) + 1)).
    """

    name = "gss"

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


class PLIF(Head):
    """LMS-PLIF (Ganea et al. 2019): log_softmax(f(l)) with a learned increasing
    piecewise-linear f shared by all words and contexts (K slopes; ``audit.model.plif``).

    Options: knots K, bound T, w_scale (std of the init noise), lr (own optimiser group, kept
    after the ASGD switch), seed (of the init draw; default torch.initial_seed(), i.e. the run
    seed once the trainer has called torch.manual_seed).
    """

    name = "plif"
    trainable = True

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


class PLIFFrozen(PLIF):
    """Control for PLIF: the slopes stay at their random initialisation (not trained)."""

    name = "plif_frozen"
    trainable = False


class MoS(Head):
    """Mixture of Softmaxes (Yang et al. 2018).

    latent = tanh(Linear(d_in -> K d)(h)) with locked dropout ``dropoutl`` (one mask per
    sequence); expert k has logits W latent_k + b; the prior pi = softmax(Linear(d_in -> K, no
    bias)(h)) reads the dropped LSTM output. log p = logsumexp_k(log pi_k + log_softmax(l_k)).
    """

    name = "mos"
    projects_input = True
    uses_prior = True

    def __init__(self, spec):
        super().__init__(spec)
        self.experts = self.option("experts", int, low=1)
        self.dropoutl = self.option("dropoutl", low=0.0, high=0.999)
        self.latent = nn.Linear(spec.d_in, self.experts * self.emb_size)
        # mos_uniform has no prior layer at all: an unused layer would count as trainable
        self.prior = nn.Linear(spec.d_in, self.experts, bias=False) if self.uses_prior else None

    def contexts(self, h):
        """The K dropped latent contexts, shape (T, B, K, d)."""
        latent = locked_dropout(torch.tanh(self.latent(h)), self.dropoutl, self.training)
        return latent.view(*h.shape[:-1], self.experts, self.emb_size)

    def log_prior(self, h):
        """log pi, shape (T, B, K)."""
        return F.log_softmax(self.prior(h), dim=-1)

    def forward(self, h):
        return mixture_log_probs(self.logits(self.contexts(h)), self.log_prior(h))


class MoSUniform(MoS):
    """MoS ablation with constant equal gates pi_k = 1/K: no prior layer (K d_in fewer
    parameters than MoS), so any gain over MoS cannot come from input-dependent gating."""

    name = "mos_uniform"
    uses_prior = False

    def log_prior(self, h):
        return h.new_full((*h.shape[:-1], self.experts), -math.log(self.experts))


class MoC(MoS):
    """Mixture of contexts: the K latent contexts averaged with pi, then one softmax.
    Same parameters as MoS; the log-P rank stays <= d + 2."""

    name = "moc"

    def transformed_logits(self, h):
        prior = torch.softmax(self.prior(h), dim=-1).unsqueeze(-1)  # (T, B, K, 1)
        return self.logits((prior * self.contexts(h)).sum(dim=-2))

    def forward(self, h):
        return F.log_softmax(self.transformed_logits(h), dim=-1)


class Mixtape(Head):
    """Mixtape (Yang et al. 2019), after Mesh-TensorFlow's ``Mixtape`` (protocol.md 1.7).

    Four contexts h_k = tanh(H_k g + b_k) give component logits z_k = W h_k; the final logit of
    word x is sum_k pi_{x,k} z_{k,x} + b_x (logit-space gating, then one softmax), pi from a
    sigmoid tree over three pre-activations. Frequent words (ids < frequent_token_fraction * V:
    ids are in descending training frequency) get a_{x,j} = v_x . tanh(U_j g + c_j) + u_j . g +
    beta_{x,j}; rare words share a_j = u_j . g, so their logits are W (sum_k pi_k h_k): one
    d-vector per position instead of four V-sized tensors, which is where Mixtape saves time.

    g is not scaled by d^-1/2 as in MTF: MTF scales because its weights start N(0, 1); the maps
    reading g here use PyTorch's fan-in-scaled init, which has the same effect. v and beta
    start N(0, 1) as in MTF. Options: gate_embedding_size (LK's dormant ``mt_ngate=160``),
    frequent_token_fraction, dropoutc / dropoutg (locked dropout on the component logits / on
    the gate embedding, MTF's dropout_rate split in two as LK's hooks do), noise_std (Gaussian
    noise on the gate pre-activations in training).
    """

    name = "mixtape"
    projects_input = True

    def __init__(self, spec):
        super().__init__(spec)
        self.option("experts", int, low=4, high=4)  # the sigmoid tree has exactly four leaves
        gates = self.option("gate_embedding_size", int, low=1)
        self.n_frequent = int(self.option("frequent_token_fraction", low=0.0, high=1.0) * self.vocab_size)
        self.dropoutc = self.option("dropoutc", low=0.0, high=0.999)
        self.dropoutg = self.option("dropoutg", low=0.0, high=0.999)
        self.noise_std = self.option("noise_std", low=0.0)
        self.context = nn.Linear(spec.d_in, 4 * self.emb_size)        # H_k, b_k
        self.gate_proj = nn.Linear(spec.d_in, 3 * gates)              # U_j, c_j
        self.gate_shared = nn.Linear(spec.d_in, 3, bias=False)        # u_j
        self.gate_vocab = nn.Parameter(torch.randn(self.n_frequent, gates))  # v_x
        self.gate_bias = nn.Parameter(torch.randn(self.n_frequent, 3))       # beta_{x,j}

    def _noisy(self, pre):
        if self.training and self.noise_std > 0:
            return pre + self.noise_std * torch.randn_like(pre)
        return pre

    def transformed_logits(self, h):
        """The gated logits (before the softmax), shape (T, B, V)."""
        nf, weight = self.n_frequent, self.embedding.weight
        ctx = torch.tanh(self.context(h)).view(*h.shape[:-1], 4, self.emb_size)   # (T, B, 4, d)
        shared = self.gate_shared(h)                                               # (T, B, 3)
        gate_tanh = torch.tanh(self.gate_proj(h)).view(*h.shape[:-1], 3, -1)       # (T, B, 3, g)
        gate_tanh = locked_dropout(gate_tanh, self.dropoutg, self.training)
        # frequent words: per-word gates; the word axis stays last so every product is a
        # plain matrix product or a contiguous element-wise op
        pre = gate_tanh @ self.gate_vocab.t() + shared.unsqueeze(-1) + self.gate_bias.t()  # (T, B, 3, Vf)
        pi_freq = sigmoid_tree(self._noisy(pre), dim=-2)                           # (T, B, 4, Vf)
        z_freq = locked_dropout(F.linear(ctx, weight[:nf]), self.dropoutc, self.training)  # (T, B, 4, Vf)
        freq = (pi_freq * z_freq).sum(dim=-2)
        # rare words share the gates u_j . g: their logits are W_rare (sum_k pi_k h_k)
        pi_rare = sigmoid_tree(self._noisy(shared)).unsqueeze(-1)                  # (T, B, 4, 1)
        if self.training and self.dropoutc > 0:  # dropped logits break the shared-gate shortcut
            z_rare = locked_dropout(F.linear(ctx, weight[nf:]), self.dropoutc, True)
            rare = (pi_rare * z_rare).sum(dim=-2)
        else:
            rare = F.linear((pi_rare * ctx).sum(dim=-2), weight[nf:])
        logits = torch.cat((freq, rare), dim=-1)
        return logits if self.bias is None else logits + self.bias  # sum_k pi_k = 1: b once

    def forward(self, h):
        return F.log_softmax(self.transformed_logits(h), dim=-1)


HEADS: dict[str, type[Head]] = {
    cls.name: cls
    for cls in (Softmax, SigSoftmax, GSS, PLIF, PLIFFrozen, MoS, MoC, MoSUniform, Mixtape, SoftmaxMatched)
}
assert set(HEADS) == set(HEAD_OPTIONS), "audit.model.options and the head classes disagree"


def build_head(name: str, spec: HeadSpec) -> Head:
    """Build the head registered as ``name``; unknown names fail with the list of known ones."""
    if name not in HEADS:
        raise AuditError(f"unknown head {name!r}; known heads: {', '.join(sorted(HEADS))}")
    return HEADS[name](spec)
