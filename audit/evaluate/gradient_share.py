"""The gradient bottleneck (Godey & Artzi, arXiv 2603.10145): how much of the logit gradient
a rank-d head passes back.

Per test token with target y, g in R^V is the gradient of the token's loss -log p_y with respect
to the head's *pre-map* logits l = W h + b: g = p - e_y for softmax, and f'(l) * (p - e_y) with
p = softmax(f(l)) for the heads with an increasing element-wise map f (sigsoftmax, GSS, PLIF),
obtained by autograd through ``Head.from_logits``. Only col([W, 1]) (W: V x d, 1: the all-ones
bias direction) reaches the body's and the embedding's parameters through l, so the measure is

    share = mean over tokens of ||P g||^2 / ||g||^2,    P the orthogonal projector onto col([W, 1]),

the share of the *squared* norm (the share of the norm itself, mean ||P g|| / ||g||, is reported
beside it as ``gradient_norm_share``). 1 means nothing is lost. Mixtures (MoS, MoC, Mixtape)
have no single pre-map logit vector; they are not computed here.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import torch

from audit.errors import AuditError


def basis(W: np.ndarray) -> np.ndarray:
    """Orthonormal basis of col([W, 1]) from a column-pivoted QR, rank-truncated.

    Args:
        W: (V, d) output matrix.

    Returns:
        (V, r) float64 with orthonormal columns, r = numerical rank of [W, 1] (<= d + 1):
        diagonal entries of R below max(V, d + 1) * eps64 * |R_11| count as zero.
    """
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2:
        raise AuditError(f"gradient share: W must be (V, d), got shape {W.shape}")
    A = np.hstack([W, np.ones((W.shape[0], 1))])
    Q, R, _ = scipy.linalg.qr(A, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    rank = int(np.count_nonzero(diag > max(A.shape) * np.finfo(np.float64).eps * diag[0]))
    return Q[:, :rank]


def shares(g: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Per-row ||Q Q^T g||^2 / ||g||^2 for g (n, V) and an orthonormal Q (V, r); shape (n,)."""
    g = np.asarray(g, dtype=np.float64)
    total = (g * g).sum(axis=1)
    if np.any(total == 0.0):
        raise AuditError("gradient share: a token with a zero logit gradient (p = e_y exactly)")
    kept = g @ Q
    return (kept * kept).sum(axis=1) / total


class GradientShare:
    """Streaming observer (``audit.evaluate.run.stream_rows``, kind ``"h"``): the head's input
    blocks go by in order; the first ``limit`` positions are scored against ``targets``.

    Args:
        head: a head whose ``from_logits`` is not None.
        targets: (N,) the next token of every streamed position.
        limit: positions scored (None: all).
    """

    def __init__(self, head, targets: torch.Tensor, limit: int | None = None):
        w = head.embedding.weight
        if head.from_logits(torch.zeros(1, head.vocab_size, dtype=w.dtype, device=w.device)) is None:
            raise AuditError(f"gradient share: head {head.name!r} has no pre-map logits (a mixture)")
        self.head, self.targets, self.limit = head, targets, limit
        self.Q = basis(w.detach().cpu().numpy())
        self._seen, self._sq, self._norm = 0, [], []

    def add(self, h: torch.Tensor) -> None:
        stop = self._seen + h.shape[0] if self.limit is None else min(self._seen + h.shape[0], self.limit)
        take = stop - self._seen
        if take > 0:
            with torch.enable_grad():
                logits = self.head.logits(h[:take].detach()).detach().requires_grad_(True)
                log_p = self.head.from_logits(logits)
                y = self.targets[self._seen:stop].to(logits.device)
                g, = torch.autograd.grad(-log_p.gather(-1, y[:, None]).sum(), logits)
            s = shares(g.double().cpu().numpy(), self.Q)
            self._sq.append(s)
            self._norm.append(np.sqrt(s))
        self._seen += h.shape[0]

    def summary(self) -> dict:
        """eval.json fields: ``gradient_share`` (squared norm), ``gradient_norm_share``, ``gradient_share_tokens``."""
        sq = np.concatenate(self._sq) if self._sq else np.zeros(0)
        if sq.size == 0:
            raise AuditError("gradient share: no token was scored")
        return {"gradient_share": float(sq.mean()), "gradient_norm_share": float(np.concatenate(self._norm).mean()),
                "gradient_share_tokens": int(sq.size)}
