"""Seeded resampling: two-sample bootstrap, percentile CIs and permutation p-values.

Every function takes an explicit ``numpy.random.Generator``; nothing touches the global RNG,
so a table row is reproduced by re-running it with ``default_rng(bootstrap_seed)``. Work is
chunked over resamples so memory stays bounded (a few million elements per chunk).
"""

from __future__ import annotations

import math
from itertools import islice, permutations, product
from typing import Callable, Iterator

import numpy as np

_CHUNK_ELEMENTS = 4_000_000


def chunk_sizes(total: int, per_resample: int):
    """Split ``total`` resamples into chunks of about ``_CHUNK_ELEMENTS / per_resample``."""
    step = max(1, _CHUNK_ELEMENTS // max(1, per_resample))
    for start in range(0, total, step):
        yield min(step, total - start)


def bootstrap_two_sample(a: np.ndarray, b: np.ndarray,
                         statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
                         n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap distribution of a two-sample statistic, resampling each arm separately.

    Resampling within arms (stratified by head) keeps the arm sizes fixed, as in rliable's
    stratified bootstrap over runs.

    Args:
        a: shape (n_a,). b: shape (n_b,).
        statistic: maps (R, n_a) and (R, n_b) resampled arrays to shape (R,) or (R, k)
            (several statistics from the same resamples).
        n_resamples: R.
        rng: seeded Generator.

    Returns:
        shape (R,) or (R, k), the statistic on each resample (NaN where undefined).
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    out = []
    for r in chunk_sizes(n_resamples, len(a) * len(b) + len(a) + len(b)):
        ia = rng.integers(0, len(a), size=(r, len(a)))
        ib = rng.integers(0, len(b), size=(r, len(b)))
        out.append(np.asarray(statistic(a[ia], b[ib]), float))
    return np.concatenate(out) if out else np.empty(0)


def percentile_ci(samples: np.ndarray, level: float) -> tuple[float, float]:
    """Percentile interval of a bootstrap distribution, ignoring NaN resamples.

    Percentile rather than BCa: BCa's jackknife acceleration is undefined for bounded
    statistics that sit at their bound (P(A>B) = 1 under complete separation, common with 10
    seeds). At n around 10 any bootstrap CI is approximate (Colas et al. 2018).

    Returns:
        (low, high); NaN if fewer than half of the resamples are finite.
    """
    finite = samples[np.isfinite(samples)]
    if len(finite) < max(1, len(samples) // 2):
        return math.nan, math.nan
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def permute_within(strata: np.ndarray | None, n: int, n_resamples: int,
                   rng: np.random.Generator) -> np.ndarray:
    """Index arrays that permute positions 0..n-1, only within equal ``strata`` labels.

    Args:
        strata: shape (n,) labels, or None for one stratum.
        n: number of observations.
        n_resamples: R.

    Returns:
        int array of shape (R, n); row r maps position i to position out[r, i].
    """
    base = np.tile(np.arange(n), (n_resamples, 1))
    if strata is None:
        return rng.permuted(base, axis=1)
    out = base.copy()
    for label in np.unique(strata):
        pos = np.flatnonzero(strata == label)
        out[:, pos] = rng.permuted(np.tile(pos, (n_resamples, 1)), axis=1)
    return out


def n_orderings(strata: np.ndarray | None, n: int) -> int:
    """How many distinct within-strata permutations of n positions exist: n!, or the product
    of the factorials of the stratum sizes."""
    if strata is None:
        return math.factorial(n)
    return math.prod(math.factorial(int(c)) for c in np.unique(strata, return_counts=True)[1])


def all_orderings(strata: np.ndarray | None, n: int, chunk: int) -> Iterator[np.ndarray]:
    """Every within-strata permutation of positions 0..n-1 exactly once, in chunks.

    Yields int arrays of shape (<= chunk, n), as ``permute_within`` (row r maps position i to
    position out[r, i]); the identity comes first.
    """
    if strata is None:
        groups = [np.arange(n)]
    else:
        groups = [np.flatnonzero(strata == label) for label in np.unique(strata)]
    combos = product(*(permutations(g.tolist()) for g in groups))
    while block := list(islice(combos, chunk)):
        out = np.empty((len(block), n), dtype=np.int64)
        for g, pos in enumerate(groups):
            out[:, pos] = [c[g] for c in block]
        yield out


def exact_permutation_p(x: np.ndarray, y: np.ndarray,
                        statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
                        strata: np.ndarray | None = None) -> float:
    """Exact two-sided permutation p: the share of all (within-strata) orderings of y with
    |T*| >= |T|, the observed ordering included. NaN if T is undefined.

    Cost grows as ``n_orderings``: 9! = 362,880 orderings of 9 points take about 3 s on one core.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    observed = float(np.asarray(statistic(x, y[None, :]))[0])
    if not np.isfinite(observed):
        return math.nan
    tol = _tolerance(observed)
    hits = total = 0
    for idx in all_orderings(strata, len(x), max(1, _CHUNK_ELEMENTS // max(1, len(x)))):
        t = np.asarray(statistic(x, y[idx]))
        hits += int(np.sum(np.abs(t) >= abs(observed) - tol))
        total += len(idx)
    return hits / total


def _tolerance(observed: float) -> float:
    # permutations reproducing the observed value (up to rounding) count as "as extreme"
    return 1e-12 * max(1.0, abs(observed))


def permutation_p(x: np.ndarray, y: np.ndarray,
                  statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
                  n_resamples: int, rng: np.random.Generator,
                  strata: np.ndarray | None = None) -> float:
    """Two-sided permutation p-value for association between x and y.

    H0: y is exchangeable with respect to x (within each stratum when ``strata`` is given,
    which tests association after removing stratum effects). Monte Carlo: each of R draws
    shuffles y independently within every stratum (``Generator.permuted``), and p = (1 +
    #{|T*| >= |T|}) / (1 + R), never 0 and valid for any R. When the number of distinct
    orderings (n!, or the product of the stratum sizes' factorials) is <= R (n <= 7 for
    R = 10000, e.g. a handful of head means) every ordering is enumerated instead and
    p = #{|T*| >= |T|} / #orderings, the exact p-value (``exact_permutation_p``). (Two-sided
    means |T*| >= |T| here; SciPy's ``permutation_test`` doubles the smaller tail instead.)

    Args:
        x, y: shape (n,).
        statistic: maps x of shape (n,) and y of shape (R, n) to shape (R,).
        n_resamples: R.
        strata: optional shape (n,) labels.

    Returns:
        The p-value, or NaN if the observed statistic is undefined.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if n_orderings(strata, len(x)) <= n_resamples:
        return exact_permutation_p(x, y, statistic, strata)
    observed = float(np.asarray(statistic(x, y[None, :]))[0])
    if not np.isfinite(observed):
        return math.nan
    tol = _tolerance(observed)
    hits = 0
    for r in chunk_sizes(n_resamples, len(x)):
        idx = permute_within(strata, len(x), r, rng)
        t = np.asarray(statistic(x, y[idx]))
        hits += int(np.sum(np.abs(t) >= abs(observed) - tol))
    return (1 + hits) / (1 + n_resamples)


def rowwise_corr(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r of ``x`` (shape (n,) or (R, n)) with each row of ``y`` (shape (R, n)).

    Returns:
        shape (R,); NaN where a row has zero variance.
    """
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean(axis=-1, keepdims=True)
    num = (xc * yc).sum(axis=-1)
    den = np.sqrt((xc ** 2).sum(axis=-1) * (yc ** 2).sum(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / den, np.nan)
