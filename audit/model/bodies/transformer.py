"""A decoder-only Transformer body (``model.body: transformer``).

Pre-LayerNorm blocks x + Attn(LN(x)), x + MLP(LN(x)) with causal multi-head self-attention
through ``torch.nn.functional.scaled_dot_product_attention`` (PyTorch picks the fused kernel the
device has), a GELU MLP, dropout on the attention weights and on each residual branch, and a
final LayerNorm. Positions are learned (one vector per window position, ``model.context_size``
of them) or rotary (RoFormer, Su et al. 2021: q and k rotated by position-dependent angles, no
parameters). The input embedding is the model's, tied to the head's decoder as for AWD-LSTM.

Sizes from the ``model`` section: d = emb_size (model width, = the head's d_in), hidden_size
(MLP width), n_layers (blocks), n_heads, context_size (longest window), dropout.

Streaming (evaluation): the hidden state is the last context_size - 1 token ids seen. A chunk
is read in pieces of ``model.eval_stride`` tokens (default context_size / 2); each piece runs one
window, the kept ids then the piece, cut to the last context_size tokens, and keeps the features
of the piece's positions only. A sliding window with a stated stride: each predicted position
sees at least context_size - eval_stride earlier tokens (fewer only at the start of the stream)
and at most context_size - 1, and every position is predicted exactly once, whatever the chunk
length the caller streams with. In training each chunk is its own window (a fixed context of
``train.bptt`` <= context_size tokens): no state crosses chunks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from audit.errors import AuditError
from audit.model.bodies.traits import TransformerTraits
from audit.schema import schema_defaults

POSITIONS = ("learned", "rotary")
ROTARY_BASE = 10_000.0  # RoFormer's theta
_MODEL = schema_defaults("model", unfilled=True)   # the `model` section of configs/schema.yaml: its one home


def rotary_tables(length: int, head_size: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles, each (length, head_size / 2): angle(p, i) = p base^(-2i/dh)."""
    inverse = ROTARY_BASE ** (-torch.arange(0, head_size, 2, device=device, dtype=torch.float32) / head_size)
    angles = torch.outer(torch.arange(length, device=device, dtype=torch.float32), inverse)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x[2i], x[2i+1]) of the last axis of x (B, H, T, dh) by angle(t, i)."""
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    """One pre-LN block: causal self-attention, then a GELU MLP, each on a residual branch."""

    def __init__(self, d: int, n_heads: int, ff: int, dropout: float):
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.ln_attn, self.ln_mlp = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc_in, self.fc_out = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x: torch.Tensor, rotary: tuple | None) -> torch.Tensor:
        """x: (B, T, d) -> (B, T, d)."""
        batch, length, d = x.shape
        q, k, v = self.qkv(self.ln_attn(x)).view(batch, length, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        if rotary is not None:
            q, k = rotate(q, *rotary), rotate(k, *rotary)
        drop = self.dropout if self.training else 0.0
        attended = F.scaled_dot_product_attention(q, k, v, dropout_p=drop, is_causal=True)
        x = x + F.dropout(self.proj(attended.transpose(1, 2).reshape(batch, length, d)), drop, self.training)
        mlp = self.fc_out(F.gelu(self.fc_in(self.ln_mlp(x))))
        return x + F.dropout(mlp, drop, self.training)


@dataclass(frozen=True)
class TransformerConfig:
    """The Transformer's settings: its keys of the ``model`` section; every default is the schema's."""

    emb_size: int = _MODEL["emb_size"]             # d: the model width, the head's d_in
    hidden_size: int = _MODEL["hidden_size"]       # ff: the MLP width
    n_layers: int = _MODEL["n_layers"]             # blocks
    n_heads: int = _MODEL["n_heads"]               # attention heads; must divide d
    positions: str = _MODEL["positions"]           # learned | rotary
    context_size: int = _MODEL["context_size"]     # longest window, in tokens
    eval_stride: int | None = _MODEL["eval_stride"]  # new positions per evaluation window; None: context_size // 2
    dropouti: float = _MODEL["dropouti"]           # dropout on the embedded input (and positions)
    dropout: float = _MODEL["dropout"]             # attention weights, each residual branch, the output
    last_size: int | None = _MODEL["last_size"]    # read only to refuse it: the body outputs d


class TransformerBody(TransformerTraits, nn.Module):
    """Decoder-only Transformer over the model's embedding; see the module docstring."""

    Config = TransformerConfig

    def __init__(self, cfg: TransformerConfig, embedding: nn.Embedding):
        super().__init__()
        d = cfg.emb_size
        if cfg.positions not in POSITIONS:
            raise AuditError(f"model.positions must be one of {', '.join(POSITIONS)}, got {cfg.positions!r}")
        if d % cfg.n_heads or (cfg.positions == "rotary" and (d // cfg.n_heads) % 2):
            raise AuditError(f"model.n_heads={cfg.n_heads} must divide emb_size={d} (into an even head "
                             f"size for rotary positions)")
        if cfg.last_size not in (None, d):
            raise AuditError(f"model.last_size={cfg.last_size}: the transformer body outputs emb_size={d}")
        self.cfg, self.d_out = cfg, d
        self.__dict__["embedding"] = embedding  # the model's (see AWDLSTMBody)
        self.positions = nn.Embedding(cfg.context_size, d) if cfg.positions == "learned" else None
        self.blocks = nn.ModuleList(Block(d, cfg.n_heads, cfg.hidden_size, cfg.dropout) for _ in range(cfg.n_layers))
        self.ln_out = nn.LayerNorm(d)
        for name, p in self.named_parameters():
            if p.dim() == 2:  # GPT-2's init: N(0, 0.02), the residual projections scaled by 1/sqrt(2L)
                scale = 1 / math.sqrt(2 * cfg.n_layers) if name.endswith(("proj.weight", "fc_out.weight")) else 1.0
                nn.init.normal_(p, 0.0, 0.02 * scale)

    @property
    def output_box(self) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi), each (d,): a box holding every output of the final LayerNorm, for
        ``audit.evaluate.argmax``. y = gamma z + beta with z = (x - mean) / sqrt(var + eps): z sums
        to zero and ||z||^2 = d var / (var + eps) <= d, and a zero-sum vector with ||z||^2 <= d has
        |z_i| <= sqrt(d - 1) (z_i^2 <= (d - 1) / d ||z||^2 by Cauchy-Schwarz on the other d - 1
        entries), so y_i lies in beta_i -/+ |gamma_i| sqrt(d - 1). A superset of the reachable
        outputs (the bound is met only where one coordinate carries all the variance), read from
        the trained parameters."""
        gamma = self.ln_out.weight.detach().double().cpu().numpy()
        beta = self.ln_out.bias.detach().double().cpu().numpy()
        reach = np.abs(gamma) * math.sqrt(self.d_out - 1)
        return beta - reach, beta + reach

    @property
    def output_rank(self) -> int:
        """d - 1: the final LayerNorm's y = gamma z + beta has z summing to zero, so y - beta lies
        in a (d - 1)-dimensional subspace (beta's own share, W beta + b, is one constant vector
        of logits, which the hidden gap's column centring removes)."""
        return self.d_out - 1

    def init_embedding(self, weight: torch.Tensor) -> None:
        nn.init.normal_(weight, 0.0, 0.02)

    def init_hidden(self, batch_size: int) -> torch.Tensor:
        """No token seen yet: an empty (0, B) id tensor."""
        return torch.zeros(0, batch_size, dtype=torch.long, device=self.embedding.weight.device)

    @property
    def stride(self) -> int:
        """New positions per evaluation window (``model.eval_stride``)."""
        return self.cfg.eval_stride or max(1, self.cfg.context_size // 2)

    def features(self, window: torch.Tensor) -> torch.Tensor:
        """Final-LayerNorm features of a window of ids (W, B) -> (W, B, d), each position
        attending to itself and the positions before it in the window."""
        x = F.embedding(window.t(), self.embedding.weight)                          # (B, W, d)
        rotary = None
        if self.positions is not None:
            x = x + self.positions.weight[: window.size(0)]
        else:
            rotary = rotary_tables(window.size(0), self.d_out // self.cfg.n_heads, x.device, x.dtype)
        x = F.dropout(x, self.cfg.dropouti, self.training)
        for block in self.blocks:
            x = block(x, rotary)
        return self.ln_out(x).transpose(0, 1)

    def forward(self, words: torch.Tensor, hidden: torch.Tensor):
        """words: (T, B) ids; hidden: (M, B) earlier ids (M < context_size; unused in training).

        Returns:
            (dropped, raw, hidden): the features of the T new positions after and before the
            output dropout, both (T, B, d), and the last context_size - 1 ids seen.
        """
        context = self.cfg.context_size
        if self.training:
            if words.size(0) > context:
                raise AuditError(f"a training chunk of {words.size(0)} tokens is longer than "
                                 f"model.context_size={context}")
            raw = self.features(words)
            return F.dropout(raw, self.cfg.dropout, True), raw, hidden
        pieces = []
        for start in range(0, words.size(0), self.stride):
            piece = words[start:start + self.stride]
            window = torch.cat((hidden, piece))[-context:]
            pieces.append(self.features(window)[-piece.size(0):])
            hidden = window[-(context - 1):]
        raw = torch.cat(pieces)
        return raw, raw, hidden
