"""Qualitative top-k predictions at named test contexts, for the report's grid.

The study config names some test positions (fixed ones plus a seeded random sample); for each run
the log-prob rows at those positions are collected from the evaluation stream and reduced to the
true token's rank, whether it is in the top k, and the top-k token ids (the caller maps ids to
words). Ties in log-probability are broken by the lower token id, so the table is deterministic
and the "in top k" flag always agrees with the listed ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from audit.errors import AuditError


def _is_torch(array) -> bool:
    return any(c.__module__.startswith("torch") for c in type(array).__mro__)  # subclasses too


def _as_numpy(array) -> np.ndarray:
    if _is_torch(array):
        array = array.detach().cpu().numpy()
    return np.asarray(array)


def select_positions(n_positions: int, fixed: Sequence[int], n_random: int,
                     rng: np.random.Generator) -> np.ndarray:
    """Fixed positions followed by a seeded random sample of the others.

    Args:
        n_positions: number of predicted positions in the split (rows of its log-P).
        fixed: positions named in the config, kept in the given order (repeats dropped).
        n_random: how many further positions to draw without replacement from the rest.
        rng: the caller's seeded numpy Generator.

    Returns:
        int64 array of shape (len(unique fixed) + n_random,): fixed ones first, then the random
        ones sorted ascending.

    Raises:
        AuditError: a fixed position outside [0, n_positions), or more random positions asked
            for than remain.
    """
    fixed_unique = list(dict.fromkeys(int(p) for p in fixed))
    bad = [p for p in fixed_unique if not 0 <= p < n_positions]
    if bad:
        raise AuditError(f"top-k: position {bad[0]} is outside 0..{n_positions - 1}")
    remaining = np.setdiff1d(np.arange(n_positions), fixed_unique)
    if not 0 <= n_random <= len(remaining):
        raise AuditError(f"top-k: cannot draw {n_random} random positions from {len(remaining)} left")
    drawn = np.sort(rng.choice(remaining, size=n_random, replace=False)) if n_random else []
    return np.concatenate([np.array(fixed_unique, dtype=np.int64),
                           np.asarray(drawn, dtype=np.int64)])


class RowCollector:
    """Keeps the rows at chosen global positions while a stream of row blocks goes by.

    Feed it the same blocks as the spectrum (``add(block)`` in order); memory is
    len(positions) x V, never the whole matrix. Torch blocks stay where they are (the rows are
    sliced and kept on their device): only the kept rows come back to the host, once, in
    ``rows()``, instead of every block (about 33 GB over WikiText-2's test set on a GPU).
    """

    def __init__(self, positions: Sequence[int]):
        self.positions = np.asarray(positions, dtype=np.int64)
        self._rows: dict[int, np.ndarray] = {}
        self._seen = 0

    def add(self, block) -> None:
        """Take the wanted rows of the next (rows_i, V) block."""
        start, stop = self._seen, self._seen + block.shape[0]
        for p in self.positions[(self.positions >= start) & (self.positions < stop)]:
            row = block[int(p) - start]
            self._rows[int(p)] = row.detach().clone() if _is_torch(row) else np.array(row, copy=True)
        self._seen = stop

    def rows(self) -> np.ndarray:
        """(len(positions), V) rows in the order of ``positions``."""
        missing = [int(p) for p in self.positions if int(p) not in self._rows]
        if missing:
            raise AuditError(f"top-k: position {missing[0]} is beyond the {self._seen} rows streamed")
        rows = [self._rows[int(p)] for p in self.positions]
        if rows and _is_torch(rows[0]):
            import torch

            return _as_numpy(torch.stack(rows))  # one device-to-host copy
        return np.stack(rows)


def collect_rows(chunks: Iterable, positions: Sequence[int]) -> np.ndarray:
    """The rows at ``positions`` of the vertical stack of ``chunks``, shape (len(positions), V)."""
    collector = RowCollector(positions)
    for chunk in chunks:
        collector.add(chunk)
    return collector.rows()


def top_k(log_probs, targets, positions, k: int = 5) -> pd.DataFrame:
    """True token's rank and the top-k token ids at each named position.

    Args:
        log_probs: (N, V) log-probability rows (numpy or torch).
        targets: (N,) true next-token ids.
        positions: (N,) position labels of the rows (e.g. from ``select_positions``).
        k: how many top tokens to list.

    Returns:
        DataFrame[position, target, target_rank, in_top_k, top_1 .. top_k]: target_rank is
        1-based in the order (log-prob descending, token id ascending); in_top_k is
        target_rank <= k; top_j the j-th token id in that order.
    """
    logp = _as_numpy(log_probs)
    targets = _as_numpy(targets).astype(np.int64).reshape(-1)
    positions = _as_numpy(positions).reshape(-1)
    if logp.ndim != 2 or len(targets) != logp.shape[0] or len(positions) != logp.shape[0]:
        raise AuditError(f"top-k: need (N, V) rows with N targets and N positions, got "
                         f"{logp.shape}, {len(targets)} targets, {len(positions)} positions")
    n, vocab = logp.shape
    if not 1 <= k <= vocab:
        raise AuditError(f"top-k: k must lie in 1..{vocab}, got {k}")
    if n and (targets.min() < 0 or targets.max() >= vocab):
        raise AuditError(f"top-k: a target id is outside 0..{vocab - 1}")
    # a stable sort of -logp keeps equal values in id order: the deterministic tie-break
    order = np.argsort(-logp, axis=1, kind="stable")
    rank = np.argmax(order == targets[:, None], axis=1) + 1 if n else np.zeros(0, np.int64)
    table = pd.DataFrame({"position": positions, "target": targets,
                          "target_rank": rank.astype(np.int64), "in_top_k": rank <= k})
    for j in range(k):
        table[f"top_{j + 1}"] = order[:, j].astype(np.int64)
    return table
