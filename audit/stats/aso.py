"""Almost stochastic order (ASO): epsilon_min of "A is almost stochastically better than B".

Del Barrio, Cuesta-Albertos and Matrán (2018) measure how far two score distributions F (head
A) and G (head B) are from the stochastic order "A >= B" by the violation ratio

    eps_W2(F, G) = int_{t: F^-1(t) < G^-1(t)} (F^-1(t) - G^-1(t))^2 dt  /  W2(F, G)^2,

where W2^2 = int_0^1 (F^-1(t) - G^-1(t))^2 dt is the squared 2-Wasserstein distance: 0 when
A's quantile function lies everywhere above B's (A stochastically dominates B), 1 when it lies
everywhere below, 0.5 when the two cross evenly. Dror, Shlomov and Reichart (2019, "Deep
Dominance") turn it into a test across seeds: with the empirical quantile functions of the two
arms, a bootstrap estimate sigma_hat of the spread of sqrt(n_a n_b / (n_a + n_b)) (eps* - eps),

    eps_min = eps + z_{confidence} * sigma_hat / sqrt(n_a n_b / (n_a + n_b)),   clipped to [0, 1],

is an upper confidence bound on the violation ratio; H0 "A is not almost stochastically better
than B" is rejected at the confidence level when eps_min < 0.5 (deep-significance's README
suggests 0.2 for a stricter reading). eps_min is NOT a p-value and has no multiplicity
correction here.

Differences from ``deepsig.aso`` (the reference implementation; GPL-3, so it is a test-only
dependency, never imported here): the integrals are exact sums over the intervals on which both
empirical quantile functions are constant, instead of a Riemann sum over a grid of step dt
(deepsig's dt = 0.005 also drops the first grid point from the numerator); resampling uses a
seeded ``numpy.random.Generator``; and a resample with W2 = 0 (identical resampled arms) is
left out of sigma_hat rather than set to 0.5. ``tests/stats/test_aso.py`` checks agreement
with deepsig within its Monte Carlo error.

At tiny n the bootstrap cannot see the spread it is meant to measure: one run against five
gives eps_min of about 0.09 in deepsig (Kaleidophon/deep-significance#16). The comparisons table
therefore leaves eps_min empty below ``min_seeds`` runs per arm.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from audit.stats.resample import chunk_sizes


def _grid(n_a: int, n_b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intervals of (0, 1) on which both empirical quantile functions are constant.

    Returns:
        (idx_a, idx_b, width): for each interval, the order-statistic index of arm A and of arm
        B that the quantile functions take there (F^-1(t) = x_(ceil(n t))), and its length.
    """
    cuts = np.union1d(np.arange(n_a + 1) / n_a, np.arange(n_b + 1) / n_b)
    mid = (cuts[:-1] + cuts[1:]) / 2
    idx_a = np.minimum(np.ceil(mid * n_a).astype(int) - 1, n_a - 1)
    idx_b = np.minimum(np.ceil(mid * n_b).astype(int) - 1, n_b - 1)
    return idx_a, idx_b, np.diff(cuts)


def violation_ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """eps_W2 of "A >= B" (higher is better) for one or many pairs of samples.

    Args:
        a: shape (..., n_a) scores of A. b: shape (..., n_b) scores of B, same leading shape.

    Returns:
        shape (...); NaN where W2 = 0 (the two empirical distributions are identical).
    """
    a, b = np.sort(np.asarray(a, float), axis=-1), np.sort(np.asarray(b, float), axis=-1)
    idx_a, idx_b, width = _grid(a.shape[-1], b.shape[-1])
    diff = b[..., idx_b] - a[..., idx_a]          # G^-1 - F^-1 on each interval
    sq = diff ** 2 * width
    total = sq.sum(axis=-1)
    violated = np.where(diff > 0, sq, 0.0).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, violated / total, np.nan)


def eps_min(a: np.ndarray, b: np.ndarray, lower_is_better: bool, confidence: float,
            n_resamples: int, rng: np.random.Generator) -> float:
    """epsilon_min of "A is almost stochastically better than B" (Dror et al. 2019).

    Args:
        a: shape (n_a,) per-seed values of A. b: shape (n_b,) of B; each n >= 2.
        lower_is_better: orientation (perplexity: True); the scores are negated so that
            "better" is "larger", as the violation ratio is defined.
        confidence: confidence level of the upper bound (e.g. 0.95).
        n_resamples: bootstrap resamples of each arm for sigma_hat.
        rng: seeded Generator.

    Returns:
        eps_min in [0, 1] (< 0.5: A almost stochastically dominates B at ``confidence``); NaN
        when an arm has fewer than 2 values, the two samples are identical, or fewer than half
        of the resamples give a defined violation ratio.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or len(b) < 2:
        return math.nan
    if lower_is_better:
        a, b = -a, -b
    eps = float(violation_ratio(a, b))
    if not np.isfinite(eps):
        return math.nan
    boot = []
    for r in chunk_sizes(n_resamples, len(a) + len(b)):
        ra = a[rng.integers(0, len(a), size=(r, len(a)))]
        rb = b[rng.integers(0, len(b), size=(r, len(b)))]
        boot.append(violation_ratio(ra, rb))
    boot = np.concatenate(boot)
    finite = boot[np.isfinite(boot)]
    if len(finite) < max(2, n_resamples // 2):
        return math.nan
    const = math.sqrt(len(a) * len(b) / (len(a) + len(b)))
    sigma = float(np.std(const * (finite - eps)))   # ddof = 0, as deepsig
    bound = eps + float(stats.norm.ppf(confidence)) * sigma / const
    return float(min(max(bound, 0.0), 1.0))
