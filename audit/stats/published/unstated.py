"""Verdicts that do not rest on an unstated n: every plausible n per arm, or none.

Where a paper does not say over how many runs a mean +- SD was taken (``n_basis`` says
``unstated``), the packaged table carries an assumed n so that a row can be computed at all.
A verdict must not rest on that assumption. For such a row the statistics are recomputed at
every (n_a, n_b) of the declared plausible range (``published.unstated_n``, default 3..20 per
arm, unequal allowed; an arm whose n is stated keeps it). When the paper printed a p-value,
only the pairs whose two-sided Student p reproduces it at its printed digits are kept (the n
the authors can have used, given their own numbers); otherwise the whole range is.

Each pair's row is finalized like any other (Holm within its family, the family's other rows
as they are; ``min_seeds``; TOST; verdict). The verdict stands only where it is the same at
every pair of that set; otherwise the row is ``inconclusive`` with a reason naming the pairs
behind each verdict ("depends on the unstated n: ..."). An empty set (no n in the range gives
the printed p) is ``inconclusive`` too. The range of p, TOST p and the CI over the set is shown.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from audit.errors import AuditError
from audit.stats.comparisons import drop_kind, finalize
from audit.stats.published.reproduce import round_sig, sig_digits
from audit.stats.published.summaries import compare_summary, student_p_from_stats

# over the set of n: the text saying which n, the range of the uncorrected Welch and TOST p
# (an arm below min_seeds has no p_adj) and the hull of the difference's CIs
COLUMNS = ["n_unstated", "n_set_welch_p_min", "n_set_welch_p_max", "n_set_tost_p_min", "n_set_tost_p_max",
           "n_set_diff_ci_low", "n_set_diff_ci_high"]


def unstated(n_basis: str) -> bool:
    """Whether a published row's n is not stated by the paper (its ``n_basis`` says so)."""
    return "unstated" in str(n_basis)


def n_pairs(row: dict, n_range: tuple[int, int]) -> tuple[list[tuple[int, int]], str]:
    """The (n_a, n_b) a comparisons row is judged over, and a sentence saying which and why.

    Args:
        row: a published comparisons row (``mean_a, sd_a, n_a, n_basis_a``, the same for b,
            ``published_p``: the printed p as text, or '').
        n_range: (low, high), inclusive, per arm whose n is unstated.
    """
    low, high = int(n_range[0]), int(n_range[1])
    if not 2 <= low <= high:
        raise AuditError(f"config key published.unstated_n: expected [low, high] with 2 <= low <= high, got {list(n_range)}")
    grid = [range(low, high + 1) if unstated(row[f"n_basis_{s}"]) else [int(row[f"n_{s}"])] for s in "ab"]
    pairs = [(i, j) for i in grid[0] for j in grid[1]]
    which = " and ".join(f"{s} = {row[f'head_{s}']}" for s in "ab" if unstated(row[f"n_basis_{s}"]))
    text = f"n unstated for {which}: every n in {low}-{high} per such arm considered"
    printed = str(row.get("published_p") or "")
    if not printed:
        return pairs, text + f" ({len(pairs)} (n_a, n_b), no printed p to narrow them)"
    digits, target = sig_digits(printed), round_sig(float(printed), sig_digits(printed))
    kept = [(i, j) for i, j in pairs
            if round_sig(student_p_from_stats(row["mean_a"], row["sd_a"], i, row["mean_b"], row["sd_b"], j), digits) == target]
    shown = ", ".join(f"({i}, {j})" for i, j in kept) or "none"
    return kept, text + f"; those whose Student p reproduces the printed p = {printed} (n_a, n_b): {shown}"


def at_n(table: pd.DataFrame, index, n_a: int, n_b: int, settings) -> dict:
    """Row ``index`` of a finalized published comparisons table recomputed at (n_a, n_b): its
    statistics from the summaries, then Holm and the verdict within its family, whose other
    rows stay as they are."""
    row = table.loc[index]
    fam = table[table["family"] == row["family"]]
    rows = []
    for i, other in fam.iterrows():
        rec = other.to_dict()
        kind = drop_kind(rec["reason"])
        rec.update(not_run=rec["reason"] if kind == "not run" else "",
                   undefined=rec["reason"] if kind == "undefined" else "")
        if i == index:
            margin = rec["equivalence_margin"]
            rec.update(compare_summary(dict(mean=rec["mean_a"], sd=rec["sd_a"], n=n_a),
                                       dict(mean=rec["mean_b"], sd=rec["sd_b"], n=n_b), rec["lower_is_better"],
                                       margin if np.isfinite(margin) else None, settings))
        rows.append(rec)
    done = finalize(rows, settings)
    return done.iloc[list(fam.index).index(index)].to_dict()


def over_set(pairs: list[tuple[int, int]], judged: list[tuple[str, str]], rows: list[dict], why: str) -> tuple[str, str]:
    """The verdict over the set: the common one, or ``inconclusive`` naming who says what.

    Args:
        pairs: the (n_a, n_b) of the set; judged: (verdict, reason) at each; rows: the
            finalized row at each (for its p-values); why: ``n_pairs``'s text.
    """
    if not pairs:
        return "inconclusive", f"no n reproduces the printed p, so no verdict: {why}"
    by = {}
    for (i, j), (verdict, _), r in zip(pairs, judged, rows):
        by.setdefault(verdict, []).append(f"({i}, {j}) [welch p {r['welch_p']:.3g}, tost p {r['tost_p']:.3g}]")
    if len(by) == 1:
        verdict = judged[0][0]
        return verdict, (f"{verdict} at every n of the set: {'; '.join(by[verdict])} ({why}); at "
                         f"({pairs[0][0]}, {pairs[0][1]}): {judged[0][1]}")
    detail = "; ".join(f"{v} for n = {', '.join(p)}" for v, p in by.items())
    return "inconclusive", f"depends on the unstated n: {detail} ({why})"


def ranges(rows: list[dict]) -> dict:
    """``COLUMNS`` but the text: the range over the set of the Welch and TOST p and the CI hull."""
    def pick(key, fn):
        values = [r[key] for r in rows if np.isfinite(r[key])]
        return float(fn(values)) if values else math.nan
    return dict(n_set_welch_p_min=pick("welch_p", min), n_set_welch_p_max=pick("welch_p", max),
                n_set_tost_p_min=pick("tost_p", min), n_set_tost_p_max=pick("tost_p", max),
                n_set_diff_ci_low=pick("diff_ci_low", min), n_set_diff_ci_high=pick("diff_ci_high", max))


def sensitivity(table: pd.DataFrame, index, n_range, settings):
    """(pairs, rows at each pair, text) for row ``index``; None when its n is stated."""
    row = table.loc[index].to_dict()
    if not (unstated(row["n_basis_a"]) or unstated(row["n_basis_b"])) or drop_kind(row["reason"]) == "not run":
        return None
    pairs, why = n_pairs(row, n_range)
    return pairs, [at_n(table, index, i, j, settings) for i, j in pairs], why


def apply(table: pd.DataFrame, n_range, settings) -> pd.DataFrame:
    """The published comparisons table with every unstated-n row judged over its set of n."""
    table = table.copy()
    for col in COLUMNS:
        table[col] = "" if col == "n_unstated" else math.nan
    for index in table.index:
        found = sensitivity(table, index, n_range, settings)
        if found is None:
            continue
        pairs, rows, why = found
        verdict, reason = over_set(pairs, [(r["verdict"], r["reason"]) for r in rows], rows, why)
        n_a, n_b = table.loc[index, "n_a"], table.loc[index, "n_b"]
        table.loc[index, "verdict"] = verdict
        table.loc[index, "reason"] = reason + f"; the other columns of this row are at the assumed n = {n_a:g} / {n_b:g}"
        table.loc[index, "n_unstated"] = why
        for key, value in ranges(rows).items():
            table.loc[index, key] = value
    return table
