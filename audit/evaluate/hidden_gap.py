"""The hidden size read from the outputs (Finlayson, Ren & Swayamdipta 2024; Carlini et al. 2024).

Stack log-P rows (m contexts x V words) and remove row and column means: B = C A R with C, R the
centring projectors. For a softmax head with bias, A = H W^T + 1 b^T - lse 1^T: the bias is a
column constant and the normaliser a row constant, so rank(B) <= d. The estimate is

    d_hat = argmax_i  s_i / s_{i+1}      (s descending, i = 1, 2, ...),

the number of singular values above the largest ratio of consecutive ones (Carlini et al.,
Algorithm 1). On the other heads it is a second rank estimate beside the Press rank.

On a softmax head it is also a positive control (``control``), one that can fail: the rank the
body implies, r (d for the AWD-LSTM, whose outputs span d dimensions; d - 1 for the
Transformer, whose final LayerNorm outputs gamma z + beta with z summing to zero, beta W^T + b
a column constant that the centring removes: ``output_rank`` of ``audit.model.bodies``), must be
the estimate *and* the spectrum must end there: s_{r+1} <= ``RESIDUAL_TOL`` x s_1. The estimate
alone could not fail on a rank <= r matrix but for numerical breakdown (its largest gap is s_r
over the floor), and it still reads r when the rows are not rank r at all (a log-P perturbed by
1e-3 keeps its largest gap at r: tests/evaluate/test_hidden_gap.py); the residual catches that.

Values below ``FLOOR`` x s_1, where the float64 Gram behind the streamed spectrum
(``audit.evaluate.spectrum``) stops resolving them, count as ``FLOOR`` x s_1 when the ratios are
compared; a winning gap into such a value is reported as infinite.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import torch

from audit.errors import AuditError

FLOOR = 1e-7   # relative; the float64 Gram resolves about sqrt(eps64) ~ 1.5e-8 of s_1
# s_{r+1} / s_1 above this: the log-P rows are not rank r. float32 rows leave 1e-7 .. 2e-7 after
# the d values of a trained d = 64 softmax (largest_gap's comment) and 1.8e-6 after those of the
# sharpened d = 8, V = 10,000 softmax of tests/evaluate/test_run.py (300 contexts): 5x below
# this; a perturbation of 1e-3 of the log-probs leaves about 1e-4 (tests/evaluate/test_hidden_gap.py)
RESIDUAL_TOL = 1e-5


def largest_gap(sv, centred: bool = True) -> tuple[int, float]:
    """(d_hat, s_{d_hat} / s_{d_hat + 1}) of a descending spectrum; ratio inf when the largest
    gap is the drop to a value below the floor (values below it compare as the floor).

    Args:
        sv: singular values, shape (k,) with k = min(m, n), k >= 3 when ``centred``.
        centred: the spectrum is of a double-centred m x n matrix, whose rank is at most
            min(m, n) - 1 (R and C each remove one direction): its last value is a structural
            zero and is left out.
    """
    sv = np.sort(np.asarray(sv, dtype=np.float64))[::-1]
    sv = sv[:-1] if centred else sv
    if sv.size < 2 or sv[0] <= 0.0:
        raise AuditError(f"hidden gap: needs at least two singular values and a nonzero spectrum, got {sv.size}")
    # values below the floor are raised to it, not set to zero: float32 log-P rows leave a noise
    # floor of a few 1e-7 x s_1 (measured: 1.8e-7 .. 9.9e-8 after the 64 values of a d = 64
    # softmax), and counting the noise values that happen to lie above FLOOR as the dimension
    # would read d + 2 there; with the clamp the gap into the noise wins by three decades
    floor = FLOOR * sv[0]
    clamped = np.maximum(sv, floor)
    ratios = clamped[:-1] / clamped[1:]
    i = int(np.argmax(ratios))
    return i + 1, float("inf") if sv[i + 1] < floor else float(ratios[i])


def control(sv, rank: int) -> tuple[bool, float]:
    """(ok, residual): the positive control of a head whose double-centred log-P has rank
    ``rank`` by construction (module docstring). ok when ``largest_gap`` reads ``rank`` and the
    residual s_{rank+1} / s_1 is at most ``RESIDUAL_TOL``; residual 0.0 when the spectrum has no
    value past ``rank``.

    Args:
        sv: singular values of the double-centred m x n matrix (its structural last zero included).
        rank: the rank the body implies (>= 1).
    """
    if rank < 1:
        raise AuditError(f"hidden gap: the expected rank must be >= 1, got {rank}")
    dim, _ = largest_gap(sv)
    sv = np.sort(np.asarray(sv, dtype=np.float64))[::-1][:-1]     # the structural zero left out
    residual = float(sv[rank] / sv[0]) if sv.size > rank else 0.0
    return dim == rank and residual <= RESIDUAL_TOL, residual


class ColumnMean:
    """Streaming observer (kind ``"log_p"``): column means of the first ``limit`` rows. Torch
    blocks are summed on their device and read back once, in ``mean()``."""

    def __init__(self, limit: int | None):
        self.limit, self._seen, self._sum = limit, 0, None

    def add(self, block) -> None:
        take = block.shape[0] if self.limit is None else max(0, min(block.shape[0], self.limit - self._seen))
        if take:
            rows = block[:take]
            rows = rows.detach().double().sum(0) if hasattr(rows, "detach") else np.asarray(rows, np.float64).sum(0)
            self._sum = rows if self._sum is None else self._sum + rows
        self._seen += take

    def mean(self) -> np.ndarray:
        if self._sum is None:
            raise AuditError("hidden gap: no rows were streamed")
        total = self._sum.cpu().numpy() if hasattr(self._sum, "cpu") else self._sum
        return total / self._seen


def double_centred(rows: Iterable, column_mean: np.ndarray) -> Iterator:
    """Row blocks of B = C A R: b_i = (a_i - mean(a_i)) - (abar - mean(abar)), abar the column
    means of the whole stack (``ColumnMean`` over the same rows). Blocks come back float64: torch
    tensors on the block's device for torch blocks (no host copy per block: a sync per chunk on
    a GPU), numpy arrays for numpy blocks."""
    centre = column_mean - column_mean.mean()
    centre_on = {}
    for block in rows:
        if hasattr(block, "detach"):
            if block.device not in centre_on:   # one copy to the device
                centre_on[block.device] = torch.as_tensor(centre, dtype=torch.float64, device=block.device)
            a = block.detach().double()
            yield a - a.mean(dim=1, keepdim=True) - centre_on[block.device]
        else:
            a = np.asarray(block, np.float64)
            yield a - a.mean(axis=1, keepdims=True) - centre
