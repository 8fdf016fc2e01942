"""Two-sample tests, effect sizes, equivalence and power for comparing two heads.

Convention everywhere: ``a`` is the candidate head, ``b`` the reference (e.g. softmax);
``diff = mean(a) - mean(b)`` in the metric's units. Samples are 1-D arrays of per-seed values
(shape (n_a,) and (n_b,)); the vectorised effect sizes also accept a leading resample axis
(shape (R, n_a) and (R, n_b)) so the bootstrap can evaluate them in one call.

Thin wrappers over SciPy and statsmodels; Welch has to be requested explicitly in both
(SciPy's ``equal_var`` and statsmodels' ``usevar`` default to the pooled test).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats
from statsmodels.stats.power import TTestIndPower
from statsmodels.stats.weightstats import ttost_ind

RANK_TEST = "mann-whitney-u"  # name written into every row that carries rank_test_p


def welch(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> dict:
    """Welch's unequal-variance t-test, two-sided.

    H0: E[a] = E[b]; H1: E[a] != E[b]. The CI is for E[a] - E[b] at ``level`` and excludes 0
    exactly when p < 1 - level, so it agrees with the test that drives the verdicts.

    Args:
        a: shape (n_a,), n_a >= 2.
        b: shape (n_b,), n_b >= 2.
        level: confidence level of the difference CI.

    Returns:
        dict with ``t, df, p, ci_low, ci_high``; NaN where undefined (both SDs zero).
    """
    nan = dict(t=math.nan, df=math.nan, p=math.nan, ci_low=math.nan, ci_high=math.nan)
    if len(a) < 2 or len(b) < 2:
        return nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # zero variance: NaN is the answer
        res = stats.ttest_ind(a, b, equal_var=False)
        if not np.isfinite(res.pvalue):
            return nan
        ci = res.confidence_interval(level)
    return dict(t=float(res.statistic), df=float(res.df), p=float(res.pvalue),
                ci_low=float(ci.low), ci_high=float(ci.high))


def student_p(a: np.ndarray, b: np.ndarray) -> float:
    """Student's pooled-variance t-test, two-sided p (H0: E[a] = E[b]).

    Reported only because the audited papers used it (LK Table 2 p-values are Student's with
    df = n_a + n_b - 2); decisions use Welch.
    """
    if len(a) < 2 or len(b) < 2:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_ind(a, b, equal_var=True).pvalue)


def rank_test_p(a: np.ndarray, b: np.ndarray) -> float:
    """Mann-Whitney U, two-sided p (H0: P(a > b) = P(a < b)).

    Exact null distribution when there are no ties (SciPy's ``auto`` switches to the normal
    approximation above n = 8, which overstates p for 10 completely separated seeds:
    1.8e-4 instead of the exact 1.1e-5); with ties, the tie-corrected normal approximation.
    Preferred to Brunner-Munzel here because with 10 seeds heads are often completely
    separated, where Brunner-Munzel's variance estimate is zero and its p collapses to 0.
    """
    if len(a) < 1 or len(b) < 1:
        return math.nan
    ties = len(np.unique(np.concatenate([a, b]))) < len(a) + len(b)
    method = "asymptotic" if ties or len(a) + len(b) > 400 else "exact"
    return float(stats.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)


def hedges_g(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hedges' g of ``a - b``: Cohen's d with pooled SD times 1 - 3 / (4 (n_a + n_b) - 9).

    The small-sample factor is the usual approximation (also statsmodels' ``effectsize_smd``).

    Args:
        a: shape (..., n_a); b: shape (..., n_b), same leading shape.

    Returns:
        shape (...); NaN where the pooled SD is zero.
    """
    n_a, n_b = a.shape[-1], b.shape[-1]
    pooled = ((n_a - 1) * a.var(axis=-1, ddof=1) + (n_b - 1) * b.var(axis=-1, ddof=1)) / (n_a + n_b - 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = (a.mean(axis=-1) - b.mean(axis=-1)) / np.sqrt(pooled)
    d = np.where(pooled > 0, d, np.nan)
    return d * (1 - 3 / (4 * (n_a + n_b) - 9))


def prob_superiority(a: np.ndarray, b: np.ndarray, lower_is_better: bool) -> np.ndarray:
    """P(a run of A beats a run of B), ties counted one half (common-language effect size).

    Equals U / (n_a n_b) of the Mann-Whitney test oriented by ``lower_is_better``.

    Args:
        a: shape (..., n_a); b: shape (..., n_b), same leading shape.

    Returns:
        shape (...), values in [0, 1]; 0.5 means no tendency either way.
    """
    da = a[..., :, None] - b[..., None, :]
    wins = (da < 0) if lower_is_better else (da > 0)
    return (wins + 0.5 * (da == 0)).mean(axis=(-2, -1))


def tost_p(a: np.ndarray, b: np.ndarray, margin: float) -> float:
    """Two one-sided Welch tests for equivalence within +/- ``margin``.

    H0: |E[a] - E[b]| >= margin; H1: |E[a] - E[b]| < margin. A small p supports equivalence;
    a large one says nothing (it is not evidence of a difference).
    """
    if len(a) < 2 or len(b) < 2 or not margin > 0:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        p = ttost_ind(a, b, -margin, margin, usevar="unequal")[0]
    return float(p) if np.isfinite(p) else math.nan


def _effect(sd_a: float, sd_b: float, margin: float) -> float:
    # Standardise the margin by the root mean variance of the two arms: with equal n this is
    # the pooled SD, and it stays defined when one arm has (near) zero spread.
    sd = math.sqrt((sd_a ** 2 + sd_b ** 2) / 2)
    return margin / sd if sd > 0 else math.inf


def power_at_margin(sd_a: float, sd_b: float, n_a: int, n_b: int, margin: float, alpha: float) -> float:
    """Power of the two-sided two-sample t-test at alpha to detect a true difference = margin.

    Uses statsmodels' pooled-t power (no Welch power exists there; with equal n the two are
    close). This is prospective power at a declared effect, not "observed power".
    """
    if not (margin > 0 and n_a >= 2 and n_b >= 2 and np.isfinite(sd_a) and np.isfinite(sd_b)):
        return math.nan
    es = _effect(sd_a, sd_b, margin)
    if math.isinf(es):
        return 1.0
    return float(TTestIndPower().power(effect_size=es, nobs1=n_a, alpha=alpha, ratio=n_b / n_a))


def seeds_needed(sd_a: float, sd_b: float, margin: float, alpha: float, target: float) -> float:
    """Seeds per arm (equal n) for the t-test to reach ``target`` power at a difference = margin.

    Returns:
        The smallest integer n >= 2 per arm, or NaN when the inputs do not define it.
    """
    if not (margin > 0 and np.isfinite(sd_a) and np.isfinite(sd_b)):
        return math.nan
    es = _effect(sd_a, sd_b, margin)
    power = TTestIndPower()
    if math.isinf(es) or power.power(effect_size=es, nobs1=2, alpha=alpha) >= target:
        return 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n = power.solve_power(effect_size=es, power=target, alpha=alpha, ratio=1.0)
    n = float(np.squeeze(n))
    return float(math.ceil(n - 1e-9)) if np.isfinite(n) else math.nan
