"""Statistics from summary rows (mean, SD, n per arm) when the per-seed values are not known.

A summary table has one row per (corpus, head, metric) arm with columns ``corpus, head,
metric, mean, sd, n, source`` (``sd`` is the sample SD with n - 1; further columns are kept).
From these three numbers per arm the following are exact under the t-test's normal model:
Welch's t, df, p and CI of the difference; Student's pooled p; TOST at a margin (two one-sided
Welch tests); power at the margin and the seeds needed (``audit.stats.power``); Hedges' g with a
confidence interval by inverting the noncentral t (Steiger and Fouladi 1997), the bounds for
Cohen's delta multiplied by Hedges' approximate small-sample factor 1 - 3 / (4 (n_a + n_b) - 9).

What needs the values themselves is NOT computed and never from invented samples: the rank
test, P(A better than B), every bootstrap interval, permutation p-values and almost stochastic
order. Those columns are NaN and the row says ``NEEDS_RAW``.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
from scipy import optimize, stats

from audit.errors import AuditError
from audit.stats.power import nct_tail, seeds_needed, welch_power
from audit.stats.io import numeric_column
from audit.stats.tests import hedges_factor, welch_from_summaries
from audit.stats.decision import Gate

REQUIRED = ("corpus", "head", "metric", "mean", "sd", "n", "source")
NEEDS_RAW = ("needs per-seed values: rank test, P(A better), bootstrap intervals, permutation p "
             "and almost stochastic order are not computed from summaries")
CI_METHOD = ("diff: welch-t from mean, SD, n; g: noncentral-t inversion (Steiger & Fouladi 1997) "
             "times Hedges' factor")


def load_summaries(path: str | os.PathLike) -> pd.DataFrame:
    """Read and validate a summary table.

    A table without ``source`` but with ``paper`` and ``table`` (``audit/data/published.csv``)
    gets ``source = "<paper>, <table>, <row>"``. ``sd`` and ``n`` may be empty (a single run,
    or an unstated n): such rows can be listed but not tested.

    Returns:
        DataFrame with str ``corpus, head, metric, source`` and float ``mean, sd, n``.
    """
    name = str(path)
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise AuditError(f"{name}: summary table not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise AuditError(f"{name}: unreadable CSV ({str(err).splitlines()[0]})") from None
    if "source" not in df.columns and {"paper", "table"} <= set(df.columns):
        row = df["row"] if "row" in df.columns else ""
        df["source"] = df["paper"] + ", " + df["table"] + ", " + row
    for col in REQUIRED:
        if col not in df.columns:
            raise AuditError(f"{name}: missing required column {col!r}")
    for col in ("corpus", "head", "metric", "source"):
        df[col] = df[col].str.strip()
    for col in ("head", "metric", "mean"):
        empty = df[col] == ""
        if empty.any():
            raise AuditError(f"{name}: column {col!r} has an empty cell (row {int(np.argmax(empty.to_numpy())) + 2})")
    for col in ("mean", "sd", "n"):
        df[col] = numeric_column(df[col], name, col)
    if (df["sd"] < 0).any():
        raise AuditError(f"{name}: column 'sd' has a negative value {df['sd'][df['sd'] < 0].iloc[0]!r}")
    n = df["n"].dropna()
    if ((n < 1) | (n != np.round(n))).any():
        raise AuditError(f"{name}: column 'n' must hold whole numbers >= 1, got {n[(n < 1) | (n != np.round(n))].iloc[0]!r}")
    return df


def welch_from_stats(mean_a, sd_a, n_a, mean_b, sd_b, n_b, level: float = 0.95) -> dict:
    """Welch's two-sided t-test and CI of mean_a - mean_b from summaries.

    H0: E[a] = E[b]. Returns dict ``t, df, p, ci_low, ci_high``; all NaN when undefined (an arm
    with n < 2, or both SDs zero).
    """
    nan = dict(t=math.nan, df=math.nan, p=math.nan, ci_low=math.nan, ci_high=math.nan)
    w = welch_from_summaries(mean_a, sd_a ** 2, n_a, mean_b, sd_b ** 2, n_b)
    se, df = float(w["se"]), float(w["df"])
    if not math.isfinite(se):
        return nan
    diff = mean_a - mean_b
    crit = float(stats.t.ppf(0.5 + level / 2, df))
    return dict(t=diff / se, df=df, p=float(w["p"]), ci_low=diff - crit * se, ci_high=diff + crit * se)


def student_p_from_stats(mean_a, sd_a, n_a, mean_b, sd_b, n_b) -> float:
    """Student's pooled-variance two-sided p (the test the audited papers used), or NaN."""
    if not (n_a >= 2 and n_b >= 2) or not (sd_a > 0 or sd_b > 0):
        return math.nan
    return float(stats.ttest_ind_from_stats(mean_a, sd_a, n_a, mean_b, sd_b, n_b, equal_var=True).pvalue)


def tost_from_stats(mean_a, sd_a, n_a, mean_b, sd_b, n_b, margin: float) -> float:
    """Two one-sided Welch tests for |E[a] - E[b]| < margin; p = the larger of the two.

    H0: |E[a] - E[b]| >= margin. NaN when Welch is undefined or no margin is given.
    """
    if not margin > 0:
        return math.nan
    return float(welch_from_summaries(mean_a, sd_a ** 2, n_a, mean_b, sd_b ** 2, n_b, margin)["p_tost"])


def delta_ci(t: float, n_a: int, n_b: int, level: float) -> tuple[float, float]:
    """CI of the standardised mean difference delta from Student's t (pooled SD).

    t ~ noncentral t(df = n_a + n_b - 2, nc = delta / sqrt(1/n_a + 1/n_b)); the bounds are the
    nc at which the observed t sits at the upper and lower (1 - level) / 2 tail.
    """
    df, scale = n_a + n_b - 2, math.sqrt(1 / n_a + 1 / n_b)
    tail = (1 - level) / 2

    def bound(target):   # nc with P(T <= t | nc) = target; P is decreasing in nc
        def f(nc):
            return nct_tail(t, df, nc, upper=False) - target
        lo, hi = t - 10.0, t + 10.0
        while f(lo) < 0:
            lo -= 10.0 + abs(lo)
        while f(hi) > 0:
            hi += 10.0 + abs(hi)
        return optimize.brentq(f, lo, hi, xtol=1e-10)

    return bound(1 - tail) * scale, bound(tail) * scale


def hedges_g_from_stats(mean_a, sd_a, n_a, mean_b, sd_b, n_b, level: float) -> tuple[float, float, float]:
    """Hedges' g of a - b with its noncentral-t CI; NaN triple when the pooled SD is zero."""
    if not (n_a >= 2 and n_b >= 2):
        return math.nan, math.nan, math.nan
    pooled = math.sqrt(((n_a - 1) * sd_a ** 2 + (n_b - 1) * sd_b ** 2) / (n_a + n_b - 2))
    if not pooled > 0:
        return math.nan, math.nan, math.nan
    d = (mean_a - mean_b) / pooled
    j = hedges_factor(n_a, n_b)
    low, high = delta_ci(d / math.sqrt(1 / n_a + 1 / n_b), int(n_a), int(n_b), level)
    return d * j, low * j, high * j


def compare_summary(a: dict, b: dict, lower_is_better: bool, margin: float | None, settings) -> dict:
    """The statistics of ``audit.stats.comparisons.compare`` that summaries determine.

    Args:
        a, b: {mean, sd, n} of the candidate head and of the reference.
        lower_is_better: kept in the row (orients nothing here: P(A better) needs raw values).
        margin: equivalence margin in metric units, or None.
        settings: ``audit.stats.io.Settings``.

    Returns:
        dict with the columns of the comparisons table; the raw-sample ones NaN.
    """
    level = 1 - settings.alpha
    ma, sa, na = float(a["mean"]), float(a["sd"]), int(a["n"])
    mb, sb, nb = float(b["mean"]), float(b["sd"]), int(b["n"])
    margin = float(margin) if margin is not None else math.nan
    w = welch_from_stats(ma, sa, na, mb, sb, nb, level)
    undefined = "" if np.isfinite(w["p"]) else (
        Gate.UNDEFINED.because(f"an arm has fewer than 2 values (n_a={na}, n_b={nb})") if min(na, nb) < 2 else
        Gate.UNDEFINED.because(f"both arms have SD 0 (A = {ma:.6g}, B = {mb:.6g}); Welch's t needs a non-zero SD"))
    g, g_low, g_high = hedges_g_from_stats(ma, sa, na, mb, sb, nb, level)
    row = dict(
        n_a=na, n_b=nb, ci_level=level, test="welch-t (from summaries)", sidedness="two-sided",
        rank_test="", ci_method=CI_METHOD, bootstrap_seed=math.nan, bootstrap_resamples=math.nan,
        equivalence_margin=margin, power_target=settings.power_target, alpha=settings.alpha,
        min_seeds=settings.min_seeds, mean_a=ma, mean_b=mb, sd_a=sa, sd_b=sb, diff=ma - mb,
        diff_ci_low=w["ci_low"], diff_ci_high=w["ci_high"], welch_t=w["t"], welch_df=w["df"],
        welch_p=w["p"], student_p=student_p_from_stats(ma, sa, na, mb, sb, nb), rank_test_p=math.nan,
        tost_p=tost_from_stats(ma, sa, na, mb, sb, nb, margin), hedges_g=g, hedges_g_ci_low=g_low,
        hedges_g_ci_high=g_high, prob_superiority=math.nan, prob_superiority_ci_low=math.nan,
        prob_superiority_ci_high=math.nan, aso_eps_min=math.nan, aso_confidence=math.nan,
        lower_is_better=bool(lower_is_better), undefined=undefined, not_computed=NEEDS_RAW,
        n_failed_a=0, n_failed_b=0, n_missing_a=0, n_missing_b=0, not_run="")
    row["power"] = welch_power(sa, sb, na, nb, margin, settings.alpha)
    row["seeds_needed"] = seeds_needed(sa, sb, margin, settings.alpha, settings.power_target)
    return row
