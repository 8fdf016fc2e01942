"""Mixture heads: MoS and its uniform-gate ablation, MoC (mixture of contexts) and Mixtape.

Parameter-free building blocks (locked dropout, the sigmoid tree, the log-space mixture) are in
``audit.model.kernels.mixtures``.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from audit.model.heads.base import Head
from audit.model.kernels.dropout import locked_dropout
from audit.model.kernels.mixtures import mixture_log_probs, mixture_target_log_probs, sigmoid_tree
from audit.model.heads.traits import MixtapeTraits, MoCTraits, MoSTraits, MoSUniformTraits


class MoS(MoSTraits, Head):
    """Mixture of Softmaxes (Yang et al. 2018).

    latent = tanh(Linear(d_in -> K d)(h)) with locked dropout ``dropoutl`` (one mask per
    sequence); expert k has logits W latent_k + b; the prior pi = softmax(Linear(d_in -> K, no
    bias)(h)) reads the dropped LSTM output. log p = logsumexp_k(log pi_k + log_softmax(l_k)).
    """

    projects_input = True

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

    def layer_logits(self, h):
        """The K component logits W x_k + b, (..., K, V), and log-P from them with the prior
        fixed: each l_k reaches the parameters only through col([W, 1]) (the gradient share)."""
        log_prior = self.log_prior(h).detach()
        return self.logits(self.contexts(h)), lambda l: mixture_log_probs(l, log_prior)

    def target_log_probs(self, h, targets):
        # the training loss: the mixture formed at the targets alone (audit.model.kernels.mixtures), a
        # MoS step at K = 2 (V = 2,000) about 40% less CPU than the full mixture's
        return mixture_target_log_probs(self.logits(self.contexts(h)), self.log_prior(h), targets)


class MoSUniform(MoSUniformTraits, MoS):
    """MoS ablation with constant equal gates pi_k = 1/K: no prior layer (K d_in fewer
    parameters than MoS), so any gain over MoS cannot come from input-dependent gating."""


    def log_prior(self, h):
        return h.new_full((*h.shape[:-1], self.experts), -math.log(self.experts))


class MoC(MoCTraits, MoS):
    """Mixture of contexts: the K latent contexts averaged with pi, then one softmax.
    Same parameters as MoS; the log-P rank stays <= d + 2."""

    # evaluation traits
    argmax_box = 1.0          # xbar, a convex combination of tanh contexts, lies in [-1, 1]^d on any body

    def transformed_logits(self, h):
        prior = torch.softmax(self.prior(h), dim=-1).unsqueeze(-1)  # (T, B, K, 1)
        return self.logits((prior * self.contexts(h)).sum(dim=-2))

    def forward(self, h):
        return F.log_softmax(self.transformed_logits(h), dim=-1)

    def layer_logits(self, h):
        """The logits of its one softmax, W xbar + b, (..., 1, V), and that softmax."""
        return self.transformed_logits(h).unsqueeze(-2), lambda l: F.log_softmax(l[..., 0, :], dim=-1)

    def target_log_probs(self, h, targets):
        return None   # one softmax, not MoS's mixture: the trainer takes forward's log-P


class Mixtape(MixtapeTraits, Head):
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
