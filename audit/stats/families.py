"""One Holm family of comparisons: adjusted p-values and the intervals those decisions follow from.

A family holds m defined tests: each row's Welch test and, where the multi-bootstrap ran, its
test too (``audit.stats.multiboot``; a claim may take either). Two passes over the same m:

1. the primary pass: every Welch and multi-bootstrap p, Holm-adjusted together (``p_adj``,
   ``mb_p_adj``); each test's interval at the level Holm's step-down tested it
   (``audit.stats.multiplicity.step_alphas``): the Welch interval (``diff_ci_*``, ``ci_level``)
   and the multi-bootstrap t interval (``mb_ci_*``, ``mb_ci_level``), each excluding 0 exactly
   when its adjusted p is below alpha;
2. the equivalence pass: every row's TOST p in place of its Welch p where a margin was declared
   (the rows without one, and every multi-bootstrap test, enter with their primary p), so that
   ``tost_p_adj`` is adjusted over the same m the family names (issue 53: it was adjusted among
   the rows with a margin alone); the TOST interval at 1 - 2 x its step's level
   (``tost_ci_*``, ``tost_ci_level``), inside the margin exactly when ``tost_p_adj`` < alpha.

A row without a test (not run, too few seeds, undefined) keeps its unadjusted 1 - alpha Welch
interval (it decides nothing: its reason says why) and no TOST interval.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from audit.stats import tests
from audit.stats.multiplicity import adjust, step_alphas, step_text


def t_interval(estimate, se, df, level):
    """estimate +- t_df(1 - (1 - level) / 2) se, element-wise (NaN where any part is)."""
    with np.errstate(invalid="ignore"):
        half = stats.t.ppf(1 - (1 - np.asarray(level, float)) / 2, np.asarray(df, float)) * np.asarray(se, float)
    estimate = np.asarray(estimate, float)
    return estimate - half, estimate + half


# the columns a family pass writes (``as_columns`` makes them before the first pass)
WRITES = ("p_adj", "tost_p_adj", "family_size", "family_dropped", "diff_ci_low", "diff_ci_high", "ci_level",
          "ci_how", "tost_ci_low", "tost_ci_high", "tost_ci_level", "tost_ci_how", "mb_p_adj", "mb_ci_low",
          "mb_ci_high", "mb_ci_level")


def as_columns(df: pd.DataFrame) -> dict:
    """A table as name -> numpy array (a copy), with every column a pass writes: the passes index
    arrays by position (pandas' per-cell ``.loc`` made a study's unstated-n checks, a thousand
    re-runs of a family, take minutes)."""
    cols = {c: df[c].to_numpy(copy=True) for c in df.columns}
    for name in WRITES:
        if name in ("family_size", "family_dropped"):   # counts stay integers
            cols[name] = np.asarray(cols.get(name, np.zeros(len(df))), float).astype(np.int64)
        elif name not in cols:
            blank = name.endswith("_how")
            cols[name] = np.full(len(df), "" if blank else np.nan, dtype=object if blank else float)
        elif name.endswith("_how"):
            cols[name] = cols[name].astype(object)
        else:
            cols[name] = cols[name].astype(float)
    return cols


def records(df: pd.DataFrame) -> list[dict]:
    """``df.to_dict("records")`` from its columns' arrays: pandas builds each row through
    ``itertuples`` and per-cell indexing, which the unstated-n checks call a thousand times."""
    names = list(df.columns)
    return [dict(zip(names, values)) for values in zip(*(df[c].to_numpy() for c in names))]


def _col(cols: dict, idx, name: str) -> np.ndarray:
    return np.asarray(cols[name][idx], float) if name in cols else np.full(len(idx), np.nan)


def _set(cols: dict, idx, mask, column: str, values) -> None:
    """``cols[column][idx[mask]] = values[mask]``."""
    rows = np.asarray(idx)[mask]
    if len(rows):
        cols[column][rows] = np.asarray(values, dtype=cols[column].dtype)[mask]


def adjust_family(df: dict, idx, alpha: float, welch_in, boot_in=None, extra=None) -> dict:
    """Both passes over one family, in place (module docstring): the rows ``idx`` of ``df`` and
    any further tests of the family (``extra``).

    Args:
        df: a comparisons table as columns (``as_columns``; ``audit.stats.comparisons.COLUMNS``,
            with ``boot_in`` also ``multiboot.COLUMNS``).
        idx: the family's row positions. welch_in: bool per row, whether its Welch test (and in the
            second pass its TOST) is one of the family's tests (``audit.stats.gates.eligible``).
        boot_in: bool per row, whether its multi-bootstrap test is one (None: none is).
        extra: (p, p_alternative), shape (k,) each: further tests of the family, entering the
            first pass with p and the second with p_alternative (the one-sample claims: toward
            the claim, toward its negation).

    Returns:
        dict of the extra tests: ``p_adj``, ``alternative_adj``, ``first`` and ``second`` (each
        test's step alpha in either pass), ``m`` (the family's tests).
    """
    n = len(idx)
    welch_in = np.asarray(welch_in, bool)
    boot_in = np.zeros(n, bool) if boot_in is None else np.asarray(boot_in, bool)
    extra_p, extra_alt = (np.asarray(e, float) for e in extra) if extra is not None else (np.empty(0), np.empty(0))
    welch = np.where(welch_in, _col(df, idx, "welch_p"), np.nan)
    boot = np.where(boot_in, _col(df, idx, "mb_p"), np.nan)
    primary = np.r_[welch, boot, extra_p]
    p_adj, size, _ = adjust(primary)
    # the family's rows with no test of either kind (not run, too few seeds, undefined)
    dropped = int((~(np.isfinite(welch) | np.isfinite(boot))).sum())
    first = step_alphas(primary, alpha)
    tost = _col(df, idx, "tost_p")
    has_tost = np.isfinite(welch) & np.isfinite(tost)
    alternative = np.r_[np.where(has_tost, tost, welch), boot, extra_alt]
    second_adj, second = adjust(alternative)[0], step_alphas(alternative, alpha)
    df["family_size"][idx], df["family_dropped"][idx] = size, dropped
    _set(df, idx, welch_in, "p_adj", p_adj[:n])
    _set(df, idx, welch_in, "tost_p_adj", np.where(has_tost, second_adj[:n], np.nan))
    arms = [_col(df, idx, c) for c in ("mean_a", "sd_a", "n_a", "mean_b", "sd_b", "n_b")]
    tested = welch_in & np.isfinite(first[:n])
    low, high = tests.welch_interval(*arms, 1 - first[:n])   # the Welch interval at its step's level
    for column, values in (("diff_ci_low", low), ("diff_ci_high", high), ("ci_level", 1 - first[:n]),
                           ("ci_how", [step_text(a, alpha, size) for a in first[:n]])):
        _set(df, idx, tested, column, values)
    tost_level = 1 - 2 * second[:n]
    low, high = tests.welch_interval(*arms, tost_level)
    for column, values in (("tost_ci_low", low), ("tost_ci_high", high), ("tost_ci_level", tost_level),
                           ("tost_ci_how", [step_text(a, alpha, size, tost=True) for a in second[:n]])):
        _set(df, idx, has_tost, column, values)
    boot_tested = boot_in & np.isfinite(boot)
    if boot_in.any():
        level = 1 - first[n:2 * n]
        low, high = t_interval(_col(df, idx, "mb_diff"), _col(df, idx, "mb_se"), _col(df, idx, "mb_df"), level)
        _set(df, idx, boot_in, "mb_p_adj", p_adj[n:2 * n])
        for column, values in (("mb_ci_low", low), ("mb_ci_high", high), ("mb_ci_level", level)):
            _set(df, idx, boot_tested, column, values)
    return dict(p_adj=p_adj[2 * n:], alternative_adj=second_adj[2 * n:], first=first[2 * n:],
                second=second[2 * n:], m=size)
