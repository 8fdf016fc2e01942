"""One-sample tests of a claim about one arm: its metric against a declared bound.

A one-sample claim says where one head's metric lies relative to a number: "the share of the
logit gradient a softmax head passes back is below 0.05" (Godey & Artzi 2026), "trained softmax
models rarely have unargmaxable tokens" (Grivas et al. 2022). ``expect`` is ``below`` or
``above``; the claim is the alternative hypothesis, the other side of the bound (bound included)
the null. Two tests, chosen by the claim's ``test``:

- ``t`` (default): one-sample t on the per-seed values (shape (n,)) against the bound. The
  arm's seeds are its replicates, as in the two-sample comparisons. Undefined (NaN, with a
  reason) when n < 2 or every seed gives the same value: a constant sample has SD 0 and SciPy's
  t = +-inf would read as certainty. That is the usual case of a count that is zero in every
  run, hence the second test.
- ``binomial``: the runs whose value exceeds ``threshold`` (default 0: "has at least one
  unargmaxable token") are counted, k of n, and the exact binomial test asks whether the rate
  of such runs lies below (or above) the bound. It stays defined when every run has a count of
  zero (0 of 10 against 0.5: p = 0.5^10), needs no normality of a skewed count, and answers the
  question as Grivas et al. put it: how many models have any such token (13 of 150). A Poisson
  bound on the mean count would answer "how many tokens per model", which is not their claim.

Both give two one-sided p-values: ``p`` toward the claim and ``p_opposite`` toward its negation
(for the t test they sum to 1; for the exact binomial test to at least 1, so at most one is
below alpha < 0.5). The interval is two-sided at 1 - 2 alpha, so each end is the one-sided
1 - alpha bound that agrees with one of the two tests: the claim ``below`` holds at level alpha
(before Holm) exactly when ``ci_high`` < bound, its negation exactly when ``ci_low`` > bound. For
``binomial`` the interval is Clopper-Pearson (exact), of the rate k / n. The effect is
``estimate`` = mean - bound (``t``) or rate - bound (``binomial``), in the metric's units, with
the interval shifted by the bound.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from audit.stats import tests
from audit.stats.decision import Gate

TESTS = ("t", "binomial")
EXPECTS = ("below", "above")


def undefined_reason(x: np.ndarray, test: str) -> str:
    """Why the test cannot be computed on sample ``x`` (shape (n,)); '' when it can."""
    if len(x) == 0:
        return Gate.UNDEFINED.because("no values")
    if test == "t":
        if len(x) < 2:
            return Gate.UNDEFINED.because(f"the one-sample t needs 2 values, n={len(x)}")
        if tests.is_constant(x):
            return Gate.UNDEFINED.because(f"every run gives {x[0]:.6g}, so the SD is 0 and the one-sample t is "
                                          "undefined (a count that is always zero: use test: binomial)")
    return ""


def one_sample(x: np.ndarray, bound: float, expect: str, test: str = "t", threshold: float = 0.0,
               alpha: float = 0.05) -> dict:
    """The one-sample statistics of one arm against ``bound``.

    Args:
        x: shape (n,), finite per-seed values of the arm.
        bound: the declared bound (metric units for ``t``; a rate in (0, 1) for ``binomial``).
        expect: ``below`` or ``above``: the side of the bound the claim puts the arm on.
        test: ``t`` or ``binomial`` (module docstring).
        threshold: ``binomial`` only: a run counts when its value is above this.
        alpha: the test level; the interval is at 1 - 2 alpha (each end one-sided 1 - alpha).

    Returns:
        dict with ``n, stat`` (mean, or rate k / n), ``k`` (binomial; NaN for t), ``sd``,
        ``statistic`` (t or k), ``df``, ``p`` (one-sided toward the claim), ``p_opposite``,
        ``ci_low, ci_high`` (of the mean or rate, level ``ci_level`` = 1 - 2 alpha),
        ``estimate`` = stat - bound and ``undefined`` (why NaN, or ''). NaN where undefined.
    """
    if expect not in EXPECTS or test not in TESTS:
        raise ValueError(f"expect {expect!r} / test {test!r}: expected one of {EXPECTS} / {TESTS}")
    x = np.asarray(x, float)
    n, level = len(x), 1 - 2 * alpha
    out = dict(n=n, k=math.nan, stat=math.nan, sd=math.nan, statistic=math.nan, df=math.nan, p=math.nan,
               p_opposite=math.nan, ci_low=math.nan, ci_high=math.nan, ci_level=level, estimate=math.nan,
               undefined=undefined_reason(x, test))
    # H1 of the claim: "below" -> alternative "less" (mean < bound)
    toward, away = ("less", "greater") if expect == "below" else ("greater", "less")
    if test == "binomial":
        if n == 0:
            return out
        k = int(np.sum(x > threshold))
        res = stats.binomtest(k, n, bound, alternative=toward)
        ci = stats.binomtest(k, n, bound).proportion_ci(confidence_level=level, method="exact")
        out.update(k=k, stat=k / n, statistic=k, p=float(res.pvalue),
                   p_opposite=float(stats.binomtest(k, n, bound, alternative=away).pvalue),
                   ci_low=float(ci.low), ci_high=float(ci.high))
    else:
        out["stat"] = float(np.mean(x)) if n else math.nan
        out["sd"] = float(np.std(x, ddof=1)) if n >= 2 else math.nan
        if out["undefined"]:
            out["estimate"] = out["stat"] - bound
            return out
        res = stats.ttest_1samp(x, bound, alternative=toward)
        ci = stats.ttest_1samp(x, bound).confidence_interval(level)
        out.update(statistic=float(res.statistic), df=float(res.df), p=float(res.pvalue),
                   p_opposite=float(stats.ttest_1samp(x, bound, alternative=away).pvalue),
                   ci_low=float(ci.low), ci_high=float(ci.high))
    out["estimate"] = out["stat"] - bound
    return out


def bounds(x: np.ndarray, test: str = "t", threshold: float = 0.0, alpha_low: float = 0.05,
           alpha_high: float = 0.05) -> tuple[float, float]:
    """One-sided confidence bounds of the arm's mean (``t``) or rate (``binomial``), each at its own
    level: the lower bound at 1 - ``alpha_low``, the upper at 1 - ``alpha_high``.

    Each bound inverts the one-sided test of ``one_sample`` at its level: "below the bound" at
    level a holds exactly when the upper bound at 1 - a lies below it (t: mean + t_{n-1}(1 - a)
    SE; binomial: the exact Clopper-Pearson bound, the a-quantile of Beta), "above" exactly when
    the lower bound lies above it. With a Holm step's level per side (``audit.stats.multiplicity
    .step_alphas``), the interval [low, high] is the one a Holm decision on each side follows from
    (two-sided coverage 1 - alpha_low - alpha_high).

    Returns:
        (low, high); NaN where the test is undefined (``undefined_reason``) or a level is NaN.
    """
    x = np.asarray(x, float)
    n = len(x)
    if undefined_reason(x, test) or not (np.isfinite(alpha_low) and np.isfinite(alpha_high)):
        return math.nan, math.nan
    if test == "binomial":
        k = int(np.sum(x > threshold))
        low = 0.0 if k == 0 else float(stats.beta.ppf(alpha_low, k, n - k + 1))
        high = 1.0 if k == n else float(stats.beta.ppf(1 - alpha_high, k + 1, n - k))
        return low, high
    mean, se = float(np.mean(x)), float(np.std(x, ddof=1)) / math.sqrt(n)
    return (mean - float(stats.t.ppf(1 - alpha_low, n - 1)) * se,
            mean + float(stats.t.ppf(1 - alpha_high, n - 1)) * se)
