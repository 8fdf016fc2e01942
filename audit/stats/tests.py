"""Two-sample tests, effect sizes and equivalence for comparing two heads.

Convention everywhere: ``a`` is the candidate head, ``b`` the reference (e.g. softmax);
``diff = mean(a) - mean(b)`` in the metric's units. Samples are 1-D arrays of per-seed values
(shape (n_a,) and (n_b,)); the vectorised effect sizes also accept a leading resample axis
(shape (R, n_a) and (R, n_b)) so the bootstrap can evaluate them in one call.

Thin wrappers over SciPy and statsmodels; Welch has to be requested explicitly in both
(SciPy's ``equal_var`` and statsmodels' ``usevar`` default to the pooled test). Power and the
seeds needed are in ``audit.stats.power``.

Undefined tests stay undefined: when both arms are constant every statistic divided by a
standard deviation (Welch's and Student's t, TOST, Hedges' g) is 0/0 or c/0, and SciPy's
fallback (t = inf, df = 1, p = 0) would read as a certain difference. Here they are NaN, and
``undefined_reason`` says why, so the row leaves its Holm family with that reason.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats
from statsmodels.stats.weightstats import ttost_ind

from audit.stats.decision import Gate

RANK_TEST = "mann-whitney-u"  # name written into every row that carries rank_test_p


def is_constant(x: np.ndarray) -> np.ndarray:
    """True where all values along the last axis are identical (shape (...,)).

    Tested on the range, not on the variance: the mean of ten copies of 0.1 is not exactly 0.1
    in floating point, so ``var`` of a constant arm can come out as 1e-34 instead of 0, and a
    t statistic of 1e16 would replace the undefined one.
    """
    x = np.asarray(x, float)
    return np.ptp(x, axis=-1) == 0 if x.shape[-1] else np.zeros(x.shape[:-1], bool)


def undefined_reason(a: np.ndarray, b: np.ndarray) -> str:
    """Why Welch's t (and TOST, Hedges' g, power) is undefined for these arms; '' if defined."""
    if len(a) < 2 or len(b) < 2:
        return Gate.UNDEFINED.because(f"an arm has fewer than 2 values (n_a={len(a)}, n_b={len(b)})")
    if is_constant(a) and is_constant(b):
        same = "equal" if a[0] == b[0] else "different"
        return Gate.UNDEFINED.because(f"both arms constant at {same} values (A = {a[0]:.6g}, B = {b[0]:.6g}); "
                                      "Welch's t, TOST, Hedges' g and power need a non-zero SD, so the row is "
                                      "left out of the Holm family")
    return ""


def welch(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> dict:
    """Welch's unequal-variance t-test, two-sided.

    H0: E[a] = E[b]; H1: E[a] != E[b]. The CI is for E[a] - E[b] at ``level`` and excludes 0
    exactly when p < 1 - level, so it agrees with the test that drives the verdicts.

    Args:
        a: shape (n_a,), n_a >= 2.
        b: shape (n_b,), n_b >= 2.
        level: confidence level of the difference CI.

    Returns:
        dict with ``t, df, p, ci_low, ci_high``; all NaN where undefined (an arm with fewer
        than 2 values, or both arms constant: SciPy would return t = +-inf, df = 1, p = 0).
    """
    nan = dict(t=math.nan, df=math.nan, p=math.nan, ci_low=math.nan, ci_high=math.nan)
    if undefined_reason(a, b):
        return nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # SciPy's precision-loss note for a constant arm
        res = stats.ttest_ind(a, b, equal_var=False)
        if not np.isfinite(res.statistic):
            return nan
        ci = res.confidence_interval(level)
    return dict(t=float(res.statistic), df=float(res.df), p=float(res.pvalue),
                ci_low=float(ci.low), ci_high=float(ci.high))


def student_p(a: np.ndarray, b: np.ndarray) -> float:
    """Student's pooled-variance t-test, two-sided p (H0: E[a] = E[b]).

    Reported only because the audited papers used it (LK Table 2 p-values are Student's with
    df = n_a + n_b - 2); decisions use Welch. NaN where Welch is undefined (the pooled SD is
    then zero too).
    """
    if undefined_reason(a, b):
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_ind(a, b, equal_var=True).pvalue)


def rank_test_p(a: np.ndarray, b: np.ndarray) -> float:
    """Mann-Whitney U, two-sided p (H0: P(a > b) = P(a < b)).

    Exact null distribution when there are no ties (SciPy's ``auto`` switches to the normal
    approximation above n = 8, which overstates p for 10 completely separated seeds:
    1.8e-4 instead of the exact 1.1e-5); with ties, the tie-corrected normal approximation
    with a continuity correction (|U - n_a n_b / 2| reduced by 1/2; SciPy's default, and R's
    ``wilcox.test``). Defined when both arms are constant at different values (complete
    separation); NaN when every value is tied, where the tie-corrected variance is zero.
    Preferred to Brunner-Munzel here because with 10 seeds heads are often completely
    separated, where Brunner-Munzel's variance estimate is zero and its p collapses to 0.
    """
    if len(a) < 1 or len(b) < 1 or is_constant(np.concatenate([a, b])):
        return math.nan
    ties = len(np.unique(np.concatenate([a, b]))) < len(a) + len(b)
    method = "asymptotic" if ties or len(a) + len(b) > 400 else "exact"
    return float(stats.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)


def hedges_factor(n_a, n_b):
    """Hedges' approximate small-sample factor J = 1 - 3 / (4 (n_a + n_b) - 9), g = J d.

    The usual approximation of the exact Gamma-function ratio (also statsmodels'
    ``effectsize_smd``); above the exact one by 0.27 % at n_a + n_b = 6, 0.06 % at 10 and
    0.01 % at 20. Used by ``hedges_g`` and by the published record's g from summaries.
    """
    return 1 - 3 / (4 * (n_a + n_b) - 9)


def hedges_g(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hedges' g of ``a - b``: Cohen's d with pooled SD times 1 - 3 / (4 (n_a + n_b) - 9).

    The small-sample factor is the usual approximation (also statsmodels' ``effectsize_smd``).

    Args:
        a: shape (..., n_a); b: shape (..., n_b), same leading shape.

    Returns:
        shape (...); NaN where the pooled SD is zero (both arms constant).
    """
    n_a, n_b = a.shape[-1], b.shape[-1]
    pooled = ((n_a - 1) * a.var(axis=-1, ddof=1) + (n_b - 1) * b.var(axis=-1, ddof=1)) / (n_a + n_b - 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = (a.mean(axis=-1) - b.mean(axis=-1)) / np.sqrt(pooled)
    # both constant: the pooled variance may be rounding noise (1e-34), not 0, so test the range
    d = np.where((pooled > 0) & ~(is_constant(a) & is_constant(b)), d, np.nan)
    return d * hedges_factor(n_a, n_b)


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
    a large one says nothing (it is not evidence of a difference). NaN without a positive margin
    or where Welch is undefined (both arms constant).
    """
    if undefined_reason(a, b) or not margin > 0:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        p = ttost_ind(a, b, -margin, margin, usevar="unequal")[0]
    return float(p) if np.isfinite(p) else math.nan


def welch_se_df(var_a, n_a, var_b, n_b):
    """Standard error of mean_a - mean_b and the Welch-Satterthwaite df, element-wise.

    Args:
        var_a, var_b: sample variances (ddof = 1); n_a, n_b: sizes (any broadcast shape).

    Returns:
        (se, df); df is meaningless where se is 0 or an n is below 2 (callers mask those).
    """
    n_a, n_b = np.asarray(n_a, float), np.asarray(n_b, float)
    with np.errstate(invalid="ignore", divide="ignore"):  # n = 1 or both variances 0: NaN/inf, no error
        qa, qb = np.asarray(var_a, float) / n_a, np.asarray(var_b, float) / n_b
        se, df = np.sqrt(qa + qb), (qa + qb) ** 2 / (qa ** 2 / (n_a - 1) + qb ** 2 / (n_b - 1))
    return se[()], df[()]  # numpy scalars for scalar input


def welch_from_summaries(mean_a, var_a, n_a, mean_b, var_b, n_b, margin=np.nan) -> dict:
    """Welch's test and TOST from summary statistics, element-wise (any broadcast shape).

    H0: E[a] = E[b] (two-sided p, Welch-Satterthwaite df); TOST H0: |E[a] - E[b]| >= margin
    (p = the larger of the two one-sided Welch p-values, as statsmodels ``ttost_ind`` with
    ``usevar='unequal'``). NaN where a variance estimate is missing, an n is below 2 or both
    variances are zero. The one implementation behind the published record's summary rows and
    the sequential design's looks.

    Returns:
        dict of arrays: diff, se, df, p (two-sided), p_tost.
    """
    n_a, n_b = np.asarray(n_a, float), np.asarray(n_b, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        se, df = welch_se_df(var_a, n_a, var_b, n_b)
        se = np.where((n_a >= 2) & (n_b >= 2) & (se > 0), se, np.nan)
        diff = mean_a - mean_b
        p = 2 * stats.t.sf(np.abs(diff / se), df)
        p_tost = np.maximum(stats.t.sf((diff + margin) / se, df), stats.t.cdf((diff - margin) / se, df))
        p_tost = np.where(np.asarray(margin) > 0, p_tost, np.nan)
    return dict(diff=diff, se=se, df=df, p=p, p_tost=p_tost)


def welch_interval(mean_a, sd_a, n_a, mean_b, sd_b, n_b, level):
    """The two-sided Welch interval of E[a] - E[b] at ``level``, element-wise (any broadcast shape,
    ``level`` too): diff +- t_{df}(1 - (1 - level) / 2) se with the Welch-Satterthwaite df of
    ``welch_from_summaries``. At ``level`` = 1 - a it excludes 0 exactly when Welch's two-sided p
    is below a (SciPy's ``ttest_ind(...).confidence_interval`` is the same interval); at 1 - 2 a
    it lies inside (-margin, margin) exactly when TOST's p is below a.

    Returns:
        (low, high), NaN where Welch is undefined (an n below 2, both SDs zero or missing) or the
        level is.
    """
    n_a, n_b = np.asarray(n_a, float), np.asarray(n_b, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        se, df = welch_se_df(np.asarray(sd_a, float) ** 2, n_a, np.asarray(sd_b, float) ** 2, n_b)
        se = np.where((n_a >= 2) & (n_b >= 2) & (se > 0), se, np.nan)
        half = stats.t.ppf(1 - (1 - np.asarray(level, float)) / 2, df) * se
        diff = np.asarray(mean_a, float) - np.asarray(mean_b, float)
    return diff - half, diff + half


def tost_interval(mean_a, sd_a, n_a, mean_b, sd_b, n_b, alpha):
    """The 1 - 2 alpha Welch interval of E[a] - E[b], element-wise: the interval TOST at ``alpha``
    corresponds to (its p is below alpha exactly when this interval lies inside (-margin, margin),
    with the Welch-Satterthwaite df of ``welch_from_summaries``). ``alpha`` may be per element
    (a Holm step's level).

    Returns:
        (low, high), NaN where Welch is undefined (an n below 2, both SDs zero or missing).
    """
    return welch_interval(mean_a, sd_a, n_a, mean_b, sd_b, n_b, 1 - 2 * np.asarray(alpha, float))
