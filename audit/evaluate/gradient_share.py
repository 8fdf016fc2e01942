"""The gradient bottleneck (Godey & Artzi, arXiv 2603.10145): how much of the logit gradient
a rank-d head passes back.

Per test token with target y, g in R^V is the gradient of the token's loss -log p_y with respect
to the head's *pre-map* logits l = W h + b: g = p - e_y for softmax, and f'(l) * (p - e_y) with
p = softmax(f(l)) for the heads with an increasing element-wise map f (sigsoftmax, GSS, PLIF),
obtained by autograd through the head's ``layer_logits`` (``HeadProtocol``; for the softmax
family, ``from_logits`` applied to W h + b). Only col([W, 1]) (W: V x d, 1: the all-ones
bias direction) reaches the body's and the embedding's parameters through l, so the measure is

    share = mean over tokens of ||P g||^2 / ||g||^2,    P the orthogonal projector onto col([W, 1]),

the share of the *squared* norm (the share of the norm itself, mean ||P g|| / ||g||, is reported
beside it as ``gradient_norm_share``). 1 means nothing is lost.

Mixtures: MoC has one softmax over W xbar + b (xbar the prior-weighted context), so g = p - e_y
with respect to those logits. MoS and its uniform-gate ablation have K component logit vectors
l_k = W x_k + b, each reaching the parameters only through col([W, 1]); the gradient of -log p_y
with respect to l_k is g_k = r_k (p_k - e_y), r_k the posterior weight of component k given y.
Their share is that of the whole gradient, sum_k ||P g_k||^2 / sum_k ||g_k||^2: the components
weighted by the mixture's own share of the gradient (a prior-weighted mean of per-component
ratios would be undefined where r_k underflows to 0, and reduces to the same thing for K = 1).
Mixtape's final logit of word x gates the components with per-word weights, so its gradient
does not factor through one W: it is not computed (its ``layer_logits`` is None, and so is
``pre_map``). A head from outside gets the measurement by declaring ``output_layer()`` and
``layer_logits`` (or ``from_logits``), like the built-in heads (docs/heads.md).

Bounded (issue 49): one column-pivoted Householder QR of the V x (d + 1) matrix (direct, no
iteration) and one projection per block of the first ``evaluate.gradient_share.contexts`` scored
positions.
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


def pre_map(head, d_in: int | None = None):
    """A function h -> (l, log_p_of) for the heads whose gradient factors through col([W, 1]):
    ``l`` the logits of the output layer as a leaf tensor of shape (n, K, V) (K = 1 but for a
    mixture of K softmaxes), and ``log_p_of(l)`` the (n, V) log-probabilities from them; None for
    a head without ``output_layer()`` or whose ``layer_logits`` is None (Mixtape, see the module
    docstring). Built-in and outside heads answer through the same protocol member
    (``HeadProtocol.layer_logits``), asked once of one zero input of size ``d_in`` (default
    ``head.d_in``: the body's ``d_out``)."""
    layer = head.output_layer()   # the head interface: (W, b), or None (no linear output layer)
    if layer is None:
        return None
    probe = layer[0]
    d_in = getattr(head, "d_in", None) if d_in is None else d_in
    if d_in is None:
        raise AuditError(f"gradient share: head {getattr(head, 'name', type(head).__name__)!r}: the size of its "
                         "input is unknown (no d_in)")
    with torch.no_grad():
        if head.layer_logits(torch.zeros(1, d_in, dtype=probe.dtype, device=probe.device)) is None:
            return None

    def leaf(h):
        logits, log_p_of = head.layer_logits(h)
        return logits.detach().requires_grad_(True), log_p_of
    return leaf


class GradientShare:
    """Streaming observer (``audit.evaluate.run.stream_rows``, kind ``"h"``): the head's input
    blocks go by in order; the first ``limit`` positions are scored against ``targets``.

    Args:
        head: a head for which ``pre_map`` is not None (all built-in heads but Mixtape).
        targets: (N,) the next token of every streamed position.
        limit: positions scored (None: all).
        d_in: the size of the head's input (the body's ``d_out``; default ``head.d_in``).
    """

    def __init__(self, head, targets: torch.Tensor, limit: int | None = None, d_in: int | None = None):
        self.pre_map = pre_map(head, d_in)
        if self.pre_map is None:
            raise AuditError(f"gradient share: head {getattr(head, 'name', type(head).__name__)!r} has no pre-map "
                             "logits through one output layer W (per-word gates, or no output_layer() or "
                             "layer_logits())")
        w = head.output_layer()[0]
        self.head, self.limit = head, limit
        # the basis and the targets go to the head's device once; every chunk's shares stay
        # there and are read back once in summary() (a read per chunk would be a host sync
        # per evaluation chunk on a GPU)
        self.Q = torch.from_numpy(basis(w.detach().cpu().numpy())).to(w.device)
        self.targets = targets.to(w.device)
        self._seen, self._sq = 0, []

    def add(self, h: torch.Tensor) -> None:
        stop = self._seen + h.shape[0] if self.limit is None else min(self._seen + h.shape[0], self.limit)
        take = stop - self._seen
        if take > 0:
            with torch.enable_grad():
                logits, log_p_of = self.pre_map(h[:take].detach())
                log_p = log_p_of(logits)
                y = self.targets[self._seen:stop]
                g, = torch.autograd.grad(-log_p.gather(-1, y[:, None]).sum(), logits)
            # the whole gradient's share, sum_k ||P g_k||^2 / sum_k ||g_k||^2 (K = 1 but for
            # MoS): float64, as the QR basis; a zero gradient gives NaN, refused in summary()
            g = g.double()                                           # (n, K, V)
            kept = g @ self.Q
            self._sq.append((kept * kept).sum(dim=(1, 2)) / (g * g).sum(dim=(1, 2)))
        self._seen += h.shape[0]

    def summary(self) -> dict:
        """eval.json fields: ``gradient_share`` (squared norm), ``gradient_norm_share``, ``gradient_share_tokens``."""
        sq = torch.cat(self._sq).cpu().numpy() if self._sq else np.zeros(0)
        if sq.size == 0:
            raise AuditError("gradient share: no token was scored")
        if not np.all(np.isfinite(sq)):
            raise AuditError("gradient share: a token with a zero logit gradient (p = e_y exactly)")
        return {"gradient_share": float(sq.mean()), "gradient_norm_share": float(np.sqrt(sq).mean()),
                "gradient_share_tokens": int(sq.size)}
