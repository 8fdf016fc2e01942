"""Verdicts that do not rest on an unstated n: every plausible n per arm, or none.

Where a paper does not say over how many runs a mean +- SD was taken (``n_basis`` says
``unstated``), the packaged table carries an assumed n so that a row can be computed at all.
A verdict must not rest on that assumption, neither the row's own nor that of any row sharing
its Holm family (its n moves the row's p, and Holm's adjustment of every other row with it).

For each unstated row the *admissible set* is every (n_a, n_b) of the declared plausible range
(``published.unstated_n``, default 3..20 per arm, unequal allowed; an arm whose n is stated
keeps it). When the paper printed a p-value, only the pairs whose two-sided Student p
reproduces it at its printed digits are kept (the n the authors can have used, given their own
numbers); otherwise the whole range is. A row with an empty set (no n gives the printed p) is
``inconclusive``; for the other rows of its family its n stays unknown, so its whole range is
used there.

A Holm family with unstated rows is re-run at every *combination* (one admissible pair per
unstated row; all of them when there are at most ``MAX_COMBINATIONS``, otherwise a sample of
that many without replacement from ``numpy.random.default_rng(stats.bootstrap_seed)``, the count
and the seed stated): each finalized like any family (Holm, ``min_seeds``, TOST, verdict). A
row's verdict, for every row of the family (stated n or not), stands only where it is the same
at each combination; otherwise the row is ``inconclusive`` with a reason naming the
combinations behind each verdict ("depends on the unstated n: ..."). With a sample, a verdict
that stands was the same at every sampled combination, which the text says. The range of p,
TOST p and the CI over the combinations, and their count, are shown.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from audit.errors import AuditError
from audit.stats.comparisons import finalize
from audit.stats.families import records
from audit.stats.decision import Gate, Verdict
from audit.stats.gates import drop_kind
from audit.stats.published.reproduce import round_sig, sig_digits
from audit.stats.published.summaries import compare_summary, student_p_from_stats

# over the set of n: the text saying which n, the range of the uncorrected Welch and TOST p
# (an arm below min_seeds has no p_adj) and the hull of the difference's CIs
COLUMNS = ["n_unstated", "n_set_combinations", "n_set_welch_p_min", "n_set_welch_p_max", "n_set_tost_p_min",
           "n_set_tost_p_max", "n_set_diff_ci_low", "n_set_diff_ci_high"]
# the most combinations of a family's admissible n a family is re-run at; beyond it a seeded
# sample of this many (one re-run of a family takes ~20 ms: 1,000 take ~20 s)
MAX_COMBINATIONS = 1000
SHOWN = 12   # combinations named per verdict in a reason; the rest counted
# the columns of a row that stand for every admissible n (``over_row``)
OVER = ("welch_p", "p_adj", "tost_p", "tost_p_adj", "diff_ci_low", "diff_ci_high", "ci_level", "ci_how",
        "tost_ci_low", "tost_ci_high", "tost_ci_level", "tost_ci_how")


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


def combinations(sets: list[list[tuple[int, int]]], seed: int, limit: int | None = None) -> tuple[list[tuple], str]:
    """The combinations a family is judged at: one pair of each set, all of them when at most
    ``limit`` (default ``MAX_COMBINATIONS``), else ``limit`` distinct ones drawn without
    replacement by ``numpy.random.default_rng(seed)``, in the product's order.

    Returns:
        (combinations, a sentence saying how many were checked and how they were chosen).
    """
    limit = MAX_COMBINATIONS if limit is None else int(limit)
    shape = [len(x) for x in sets]
    total = math.prod(shape)
    if total <= limit:
        return list(itertools.product(*sets)), f"{total} combination{'s' * (total != 1)} of (n_a, n_b) checked (all of them)"
    picks = np.sort(np.random.default_rng(seed).choice(total, size=limit, replace=False))
    coords = np.unravel_index(picks, shape)
    combos = [tuple(sets[k][int(coords[k][c])] for k in range(len(sets))) for c in range(limit)]
    return combos, (f"{limit} of the {total} combinations of (n_a, n_b) checked (a sample without replacement, "
                    f"numpy default_rng({seed}); a verdict that stands held at each sampled one)")


def _inputs(table: pd.DataFrame, idx) -> list[dict]:
    """The rows of one family as ``finalize`` takes them: not run and undefined from their reason."""
    rows = []
    for i in idx:
        rec = table.loc[i].to_dict()
        kind = drop_kind(rec["reason"])
        rec.update(not_run=rec["reason"] if kind is Gate.NOT_RUN else "",
                   undefined=rec["reason"] if kind is Gate.UNDEFINED else "")
        rows.append(rec)
    return rows


def _at(rec: dict, n_a: int, n_b: int, settings) -> dict:
    """A row's statistics from its summaries at (n_a, n_b)."""
    margin = rec["equivalence_margin"]
    return compare_summary(dict(mean=rec["mean_a"], sd=rec["sd_a"], n=n_a), dict(mean=rec["mean_b"], sd=rec["sd_b"], n=n_b),
                           rec["lower_is_better"], margin if np.isfinite(margin) else None, settings)


def _is_unstated(row: dict) -> bool:
    return (unstated(row["n_basis_a"]) or unstated(row["n_basis_b"])) and drop_kind(row["reason"]) is not Gate.NOT_RUN


@dataclass
class FamilyCheck:
    """A Holm family re-run at the combinations of its unstated rows' admissible n.

    ``index``: its rows (table order); ``unstated``: those whose n is unstated (not ``not run``);
    ``kept``: per unstated row (its admissible pairs, the sentence saying why: ``n_pairs``);
    ``combos``: per combination one pair per unstated row (order of ``unstated``); ``counted``:
    how many combinations and how chosen; ``rows``: per combination the finalized rows (order of
    ``index``).
    """

    index: list
    unstated: list
    kept: dict
    combos: list
    counted: str
    rows: list

    def name(self, i) -> str:
        row = self.rows[0][self.index.index(i)]
        return f"{row['head_a']} vs {row['head_b']}"

    def why(self, index) -> str:
        """Which n the family was judged at, as row ``index`` shows it."""
        if self.unstated == [index]:
            return f"{self.kept[index][1]}; {self.counted}"
        rows = "; ".join(f"{self.name(i)}: {self.kept[i][1]}" for i in self.unstated)
        return f"n unstated in this Holm family ({rows}); {self.counted}"

    def others(self, index) -> list[str] | None:
        """Per combination, the (n_a, n_b) of the unstated rows other than ``index``; None when
        ``index`` is the only one (its verdict then moves with its own n alone)."""
        if self.unstated == [index]:
            return None
        return [" + ".join(f"{self.name(u)} ({n_a}, {n_b})" for u, (n_a, n_b) in zip(self.unstated, c) if u != index)
                for c in self.combos]


def check_family(table: pd.DataFrame, family: str, n_range, settings, limit: int | None = None) -> FamilyCheck | None:
    """Holm family ``family`` of a finalized published comparisons table at every combination of
    its unstated rows' admissible n (module docstring); None when no row of it has an unstated n."""
    idx = list(table.index[table["family"] == family])
    base = _inputs(table, idx)
    todo = [i for i, r in zip(idx, base) if _is_unstated(r)]
    if not todo:
        return None
    kept, sets = {}, []
    for i in todo:
        row = table.loc[i].to_dict()
        kept[i] = n_pairs(row, n_range)
        # no pair reproduces the printed p: the row itself is inconclusive; for the others its n
        # is simply unknown, so its whole range stands in
        sets.append(kept[i][0] or n_pairs(dict(row, published_p=""), n_range)[0])
    combos, counted = combinations(sets, settings.bootstrap_seed, limit)
    cache: dict = {}
    rows = []
    for combo in combos:
        recs = list(base)
        for i, (n_a, n_b) in zip(todo, combo):
            pos = idx.index(i)
            if (i, n_a, n_b) not in cache:
                cache[(i, n_a, n_b)] = _at(base[pos], n_a, n_b, settings)
            recs[pos] = {**base[pos], **cache[(i, n_a, n_b)]}
        rows.append(records(finalize(recs, settings)))
    return FamilyCheck(idx, todo, kept, combos, counted, rows)


def row_over(check: FamilyCheck, index) -> tuple[list, list[dict], str, list[str] | None]:
    """``over_set``'s (pairs, rows, why, others) for row ``index`` of a checked family: its own
    (n_a, n_b) at each combination (None entries for a stated row; [] for an unstated row whose
    set is empty), its finalized row at each, which n, and the other unstated rows' n."""
    pos = check.index.index(index)
    rows = [r[pos] for r in check.rows]
    if index in check.unstated:
        if not check.kept[index][0]:
            return [], [], check.kept[index][1], None
        at = check.unstated.index(index)
        own = [c[at] for c in check.combos]
    else:
        own = [None] * len(rows)
    return own, rows, check.why(index), check.others(index)


def over_set(pairs: list, judged: list[tuple[str, str]], rows: list[dict], why: str,
             others: list[str] | None = None) -> tuple[str, str]:
    """The verdict over the combinations: the common one, or ``inconclusive`` naming who says what.

    Args:
        pairs: the row's own (n_a, n_b) at each combination, None entries where its n is stated;
            [] when no n reproduces its printed p. judged: (verdict, reason) at each; rows: the
            finalized row at each (for its p-values); why: the sentence saying which n.
        others: per combination the n of the family's other unstated rows; None when there are
            none (the row's own n alone decides; its p_adj is then not listed).
    """
    if not pairs:
        return Verdict.INCONCLUSIVE, f"no n reproduces the printed p, so no verdict: {why}"

    def at(k):   # where combination k puts this row (its only unstated n is its own)
        return f"({pairs[k][0]}, {pairs[k][1]})"

    def label(k):
        r = rows[k]
        if others is None:
            return f"{at(k)} [welch p {r['welch_p']:.3g}, tost p {r['tost_p']:.3g}]"
        where = ([f"this row {at(k)}"] if pairs[k] is not None else []) + ([others[k]] if others[k] else [])
        return f"{' + '.join(where)} [welch p {r['welch_p']:.3g}, tost p {r['tost_p']:.3g}, p_adj {r['p_adj']:.3g}]"

    def listed(ks, sep):
        text = sep.join(label(k) for k in ks[:SHOWN])
        return text + (f"{sep}and {len(ks) - SHOWN} more" if len(ks) > SHOWN else "")

    by: dict[str, list[int]] = {}
    for k, (verdict, _) in enumerate(judged):
        by.setdefault(verdict, []).append(k)
    if len(by) == 1:
        verdict = judged[0][0]
        if others is None:
            return verdict, (f"{verdict} at every n of the set: {listed(by[verdict], '; ')} ({why}); at "
                             f"{at(0)}: {judged[0][1]}")
        return verdict, (f"{judged[0][1]}; {verdict} at each of the {len(judged)} combinations of the unstated n "
                         f"in this Holm family: {listed(by[verdict], '; ')} ({why})")
    word = "for n =" if others is None else "at"
    detail = "; ".join(f"{v} {word} {listed(ks, ', ')}" for v, ks in by.items())
    return Verdict.INCONCLUSIVE, f"depends on the unstated n: {detail} ({why})"


def ranges(rows: list[dict]) -> dict:
    """``COLUMNS`` but the text and the count: the range over the combinations of the Welch and
    TOST p and the CI hull."""
    def pick(key, fn):
        values = [r[key] for r in rows if np.isfinite(r[key])]
        return float(fn(values)) if values else math.nan
    return dict(n_set_welch_p_min=pick("welch_p", min), n_set_welch_p_max=pick("welch_p", max),
                n_set_tost_p_min=pick("tost_p", min), n_set_tost_p_max=pick("tost_p", max),
                n_set_diff_ci_low=pick("diff_ci_low", min), n_set_diff_ci_high=pick("diff_ci_high", max))


def _hull(rows: list[dict], low: str, high: str, level: str) -> tuple[float, float, float, str]:
    """The hull of one interval over the combinations, the lowest of their levels and a sentence
    (NaN when a combination lacks it: no interval then stands for every admissible n)."""
    lows, highs, levels = (np.array([r[k] for r in rows], float) for k in (low, high, level))
    if not len(rows) or not (np.isfinite(lows).all() and np.isfinite(highs).all()):
        return math.nan, math.nan, math.nan, ""
    how = (f"hull over the {len(rows)} combinations of the admissible n of each one's interval at its Holm step "
           f"level ({levels.min():.4g}-{levels.max():.4g}); coverage at least the lowest")
    return float(lows.min()), float(highs.max()), float(levels.min()), how


def over_row(rec: dict, rows: list[dict], settings) -> dict:
    """A comparisons row standing for every admissible n: the hull of its Welch and TOST intervals
    over the combinations (``rows``, the row finalized at each), the largest adjusted and raw p,
    and the verdict decided on those hulls (``audit.stats.comparisons.verdict``), so that the
    verdict and every number beside it hold at each admissible n (issue 53: they had been the
    assumed n's). A combination where the row has no test leaves it without one."""
    from audit.stats.comparisons import verdict as decide   # finalize's module imports this one

    untested = [r for r in rows if not np.isfinite(r["p_adj"])]
    out = dict(rec)
    for key in ("welch_p", "p_adj", "tost_p", "tost_p_adj"):
        values = np.array([r[key] for r in rows], float)
        out[key] = float(values.max()) if len(values) and np.isfinite(values).all() else math.nan
    out["diff_ci_low"], out["diff_ci_high"], out["ci_level"], out["ci_how"] = _hull(rows, "diff_ci_low", "diff_ci_high", "ci_level")
    out["tost_ci_low"], out["tost_ci_high"], out["tost_ci_level"], out["tost_ci_how"] = _hull(
        rows, "tost_ci_low", "tost_ci_high", "tost_ci_level")
    if untested:
        kind = drop_kind(untested[0]["reason"]) or Gate.UNDEFINED
        out["p_adj"] = out["tost_p_adj"] = math.nan
        return dict(out, verdict=Verdict.INCONCLUSIVE, reason=kind.because(
            f"at {len(untested)} of the {len(rows)} combinations of the admissible n: {untested[0]['reason']}"))
    out["verdict"], out["reason"] = decide(dict(out, not_run=""), settings)
    return out


def sensitivity(table: pd.DataFrame, index, n_range, settings, limit: int | None = None,
                checks: dict | None = None):
    """``row_over`` of row ``index`` (pairs, rows at each combination, text, others); None when
    no row of its Holm family has an unstated n, or the row is not run. ``checks``: the families
    ``apply`` checked (family -> ``FamilyCheck`` or None), reused rather than re-run."""
    if drop_kind(table.loc[index, "reason"]) is Gate.NOT_RUN:
        return None
    family = table.loc[index, "family"]
    if checks is not None and family in checks:
        check = checks[family]
    else:
        check = check_family(table, family, n_range, settings, limit)
    return None if check is None else row_over(check, index)


def apply(table: pd.DataFrame, n_range, settings, limit: int | None = None, checks: dict | None = None) -> pd.DataFrame:
    """The published comparisons table with every row of a Holm family holding an unstated n
    judged over the combinations of that family's admissible n (module docstring). ``checks``,
    if given, receives family -> ``FamilyCheck`` (None: no unstated n) for ``sensitivity``."""
    out = table.copy()
    for col in COLUMNS:
        out[col] = "" if col == "n_unstated" else math.nan
    for family in dict.fromkeys(table["family"]):
        check = check_family(table, family, n_range, settings, limit)
        if checks is not None:
            checks[family] = check
        if check is None:
            continue
        for index in check.index:
            if drop_kind(table.loc[index, "reason"]) is Gate.NOT_RUN:
                continue   # no statistic at any n; its reason says why
            pairs, rows, why, others = row_over(check, index)
            listed, listing = over_set(pairs, [(r["verdict"], r["reason"]) for r in rows], rows, why, others)
            rec = out.loc[index].to_dict()
            if not pairs:   # no admissible n reproduces the printed p: no verdict, no p, no interval
                judged = dict(rec, verdict=Verdict.INCONCLUSIVE, reason=Gate.UNDEFINED.because(listing),
                              **{k: (math.nan if k not in ("ci_how", "tost_ci_how") else "") for k in OVER})
            else:
                judged = over_row(dict(rec, undefined=""), rows, settings)
                if judged["verdict"] == listed:   # the same verdict at each: the combinations listed
                    judged["reason"] = listing
                elif drop_kind(judged["reason"]) is None:
                    judged["reason"] = f"{listing}; over every admissible n: {judged['reason']}"
            reason = judged["reason"] + ("; the means and SDs of this row are its published ones; its p-values and "
                                         "intervals hold at every admissible n (the largest p, the hull of the "
                                         "intervals)")
            for key in OVER:
                out.loc[index, key] = judged[key]
            out.loc[index, "verdict"] = judged["verdict"]
            out.loc[index, "reason"] = reason
            out.loc[index, "n_unstated"] = why
            out.loc[index, "n_set_combinations"] = len(rows)
            for key, value in ranges(rows).items():
                out.loc[index, key] = value
    return out
