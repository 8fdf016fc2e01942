"""The interval each verdict rests on, and the rule that ties the two.

A verdict and the interval printed beside it must tell the same story. The rule, per kind of row
(``interval_breaks`` checks it; the property test in ``tests/stats/test_intervals.py`` asserts it
on every row of every table over random studies):

- a comparison decided by Welch's test (``a_better`` / ``b_better``; a comparison claim
  ``supported`` or ``contradicted`` on a significant difference): the 1 - alpha Welch interval of
  mean_a - mean_b excludes 0, on the side of the verdict. Holm only raises a p-value, so an
  adjusted p below alpha implies an unadjusted one below alpha, which is the interval excluding 0;
- an equivalence (``equivalent``; a claim ``supported`` through TOST): the 1 - 2 alpha interval
  (``tost_ci_low``, ``tost_ci_high``) lies inside (-margin, margin). TOST at alpha is exactly that
  interval inside the margin, so the 1 - alpha interval is the wrong one to show: it can cross the
  margin beside a valid "equivalent";
- a one-sample claim (``below`` / ``above`` a bound; estimate = mean or rate - bound, at 1 - 2
  alpha): ``supported`` below means ci_high < 0, above means ci_low > 0, and ``contradicted`` the
  other way round. With undecided tokens counted both ways, the interval shown is the union of the
  two accountings' intervals, so it holds whenever both accountings agree.

Rows without a decisive verdict (inconclusive, not informative) carry no constraint.
"""

from __future__ import annotations

import math

import numpy as np

EQUIVALENCE_NAME = "diff = mean_a - mean_b (welch CI at 1 - 2 alpha: the interval TOST at alpha corresponds to)"


def _sig(row: dict, alpha: float) -> bool:
    p = row.get("p_adj", math.nan)
    return p is not None and np.isfinite(p) and p < alpha


def rests_on_equivalence(expect: str, verdict: str, row: dict, alpha: float) -> bool:
    """Whether a comparison claim's verdict on comparisons row ``row`` was reached by TOST rather
    than by Welch's test (``audit.stats.claims.judge_comparison``)."""
    if verdict == "equivalent":
        return True
    if verdict != "supported":
        return False
    if expect == "equivalent":
        return True
    if expect in ("not_lower", "not_higher"):   # supported by a significant good side, or by TOST
        good = row["diff"] > 0 if expect == "not_lower" else row["diff"] < 0
        return not (_sig(row, alpha) and good)
    return False


def claim_interval(expect: str, verdict: str, row: dict, alpha: float) -> dict:
    """The estimate name and interval a comparison claim shows: the TOST interval (level 1 - 2
    alpha) when its verdict rests on equivalence, else the row's own (Welch) interval."""
    if rests_on_equivalence(expect, verdict, row, alpha) and np.isfinite(row.get("tost_ci_low", math.nan)):
        return dict(estimate_name=EQUIVALENCE_NAME, ci_low=row["tost_ci_low"], ci_high=row["tost_ci_high"],
                    ci_level=row["tost_ci_level"])
    return dict(ci_low=row["diff_ci_low"], ci_high=row["diff_ci_high"], ci_level=row["ci_level"])


def interval_breaks(verdict: str, low: float, high: float, expect: str = "", margin: float = math.nan,
                    kind: str = "comparison") -> str:
    """Why a decisive verdict contradicts the interval shown beside it ('' when it does not).

    Args:
        verdict: a comparisons verdict (a_better, b_better, equivalent, ...) or a claim's.
        low, high: the interval shown (for a one-sample claim, of estimate = value - bound).
        expect: the claim's expect ('' for a comparisons row; ``lower`` orients a comparison
            verdict of a_better / b_better by the sign of the difference, see below).
        margin: the equivalence margin (equivalence verdicts).
        kind: ``comparison`` (a difference, mean_a - mean_b) or ``one_sample``.
    """
    if kind == "one_sample":
        below = (verdict == "supported") == (expect == "below")
        if verdict in ("supported", "contradicted"):
            ok = high < 0 if below else low > 0
            return "" if ok else f"{verdict} ({expect}) beside [{low:.4g}, {high:.4g}]"
        return ""
    if verdict == "equivalent" or (verdict == "supported" and expect == "equivalent"):
        ok = -margin < low and high < margin
        return "" if ok else f"{verdict} beside [{low:.4g}, {high:.4g}] for margin {margin:g}"
    if verdict in ("a_better", "b_better") or (verdict in ("supported", "contradicted") and expect in ("lower", "higher")):
        ok = high < 0 or low > 0
        return "" if ok else f"{verdict} beside [{low:.4g}, {high:.4g}], which holds 0"
    if verdict in ("supported", "contradicted") and expect in ("not_lower", "not_higher"):
        ok = high < 0 or low > 0 or (-margin < low and high < margin)
        return "" if ok else f"{verdict} beside [{low:.4g}, {high:.4g}], neither a difference nor inside {margin:g}"
    return ""
