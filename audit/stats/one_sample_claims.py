"""The one-sample claims of the claims table: one arm against a declared bound, judged.

The test itself is ``audit.stats.one_sample``; this module turns a claim's ``one_sample`` spec
into its evidence on the runs table, corrects it in the Holm family ``claims``, and writes its
verdict and claims-table row (``audit.stats.claims`` assembles the table).

A one-sample claim (``one_sample``) joins the Holm family ``claims`` with its one-sided p toward
the claim (``p_adj``); its p toward the negation is Holm-adjusted in a second pass over the
same family (``p_opposite_adj``, as TOST is beside Welch). Supported when ``p_adj`` < alpha,
contradicted when ``p_opposite_adj`` < alpha (at most one can be), else inconclusive; fewer
than ``min_seeds`` usable runs, an undefined test, an absent column or head: inconclusive with
the reason, out of the family. The estimate is mean - bound (or rate - bound) with the
1 - 2 alpha interval whose ends are the one-sided bounds of the two tests (with undecided tokens
counted either way, the union of both accountings' intervals: ``audit.stats.intervals``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from audit.stats import one_sample
from audit.stats.comparisons import verdict as comparison_verdict
from audit.stats.gates import drop_kind
from audit.stats.io import Settings, absent_later, arm
from audit.stats.families import adjust_family, as_columns
from audit.stats.multiplicity import METHOD
from audit.stats.decision import Gate, Verdict

SCALE_VERDICT = Verdict.NOT_INFORMATIVE_AT_SCALE   # the verdict would follow from geometry alone


def one_sample_evidence(claim: dict, corpus: str, runs: pd.DataFrame, settings: Settings) -> dict:
    """The statistics of a one-sample claim on one corpus, before Holm (``audit.stats.one_sample``),
    with ``reason``: why it has no test ('' when it has one: it then enters the family); with the
    spec's ``unresolved``, both accountings of the undecided tokens (``_either_way``); with its
    ``scale_floor``, ``floor`` (the largest over the runs) for ``judge_one_sample``."""
    spec = claim["one_sample"]
    head, metric, test = str(spec["head"]), spec["metric"], spec.get("test", "t")
    ev = dict(head=head, metric=metric, test=test, bound=float(spec["bound"]), expect=claim["expect"],
              threshold=float(spec.get("threshold", 0.0)), n=0, n_failed=0, n_missing=0, reason="")
    extra = spec.get("unresolved")
    absent = next((c for c in (metric, extra) if c and c not in runs.columns), None)
    if absent:   # a runs table from before the metric was measured, or a typo
        ev.update(one_sample.one_sample(np.array([]), ev["bound"], claim["expect"], test, ev["threshold"], settings.alpha))
        return dict(ev, reason=absent_later(runs, absent) or Gate.NOT_RUN.because(f"the runs table has no column {absent!r}"))
    sample = arm(runs, corpus, head, metric)
    if extra:
        sample = arm(_with_unresolved(runs, metric, extra), corpus, head, metric)
    ev.update(one_sample.one_sample(sample.values, ev["bound"], claim["expect"], test, ev["threshold"], settings.alpha),
              n_failed=sample.n_failed, n_missing=sample.n_missing, samples=[sample.values])
    if extra and len(sample.values):
        counted = arm(_with_unresolved(runs, metric, extra, counted=True), corpus, head, metric)
        ev = _either_way(ev, counted, claim["expect"], settings)
        ev["samples"] = [sample.values, counted.values]
    n, need = len(sample.values), settings.min_seeds
    if not sample.present:
        ev["reason"] = Gate.NOT_RUN.because(f"no runs of {head} in corpus {corpus!r}")
    elif n < need:
        lost = [f"{c} {what}" for c, what in ((sample.n_failed, "runs failed"),
                                                (sample.n_missing, f"ok runs without a {metric} value")) if c]
        kind = Gate.RUNS_FAILED if sample.n_failed and n + sample.n_failed >= need else Gate.TOO_FEW_SEEDS
        ev["reason"] = kind.because(f"n={n} < min_seeds={need}" + (f"; {', '.join(lost)}" if lost else ""))
    elif ev["undefined"]:
        ev["reason"] = ev["undefined"]
    if spec.get("scale_floor") and sample.present:
        ev["floor"] = scale_floor(runs, corpus, head)
    return ev


def _with_unresolved(runs: pd.DataFrame, metric: str, extra: str, counted: bool = False) -> pd.DataFrame:
    """``runs`` whose ``metric`` is NaN where ``extra`` (the undecided tokens) is, and, when
    ``counted``, ``metric + extra``: a run whose undecided count is unknown is no evidence."""
    out = runs.copy()
    value, undecided = (pd.to_numeric(out[c], errors="coerce") for c in (metric, extra))
    out[metric] = value.where(undecided.notna()) + (undecided if counted else 0.0)
    return out


def _either_way(ev: dict, counted, expect: str, settings: Settings) -> dict:
    """The one-sample evidence with the undecided tokens counted as argmaxable (``ev``) and as
    not (the test on ``counted``): p and p_opposite the larger of the two, so that Holm passes a
    side only where both accountings pass it; ``k_counted`` the count of the second. The interval
    is the union of the two accountings' intervals (``either_way``): it lies on one side of the
    bound exactly when both do, which is when the verdict can be decisive, so the cell never shows
    the accounting most favourable to the claim alone."""
    other = one_sample.one_sample(counted.values, ev["bound"], expect, ev["test"], ev["threshold"], settings.alpha)
    both = [ev["p"], other["p"]], [ev["p_opposite"], other["p_opposite"]]
    worst = [max(v) if all(np.isfinite(v)) else math.nan for v in both]
    ends = [ev["ci_low"], other["ci_low"]], [ev["ci_high"], other["ci_high"]]
    low, high = (min(ends[0]) if all(np.isfinite(ends[0])) else math.nan,
                 max(ends[1]) if all(np.isfinite(ends[1])) else math.nan)
    return dict(ev, p=worst[0], p_opposite=worst[1], k_counted=other.get("k", math.nan),
                stat_counted=other.get("stat", math.nan), undefined=ev["undefined"] or other["undefined"],
                ci_low=low, ci_high=high, either_way=True)


def scale_floor(runs: pd.DataFrame, corpus: str, head: str) -> float:
    """sqrt((d + 1) / V), the norm share of a random direction in R^V kept by a (d + 1)-dimensional
    subspace (col([W, 1]): E ||P g||^2 / ||g||^2 = (d + 1) / V), largest over the arm's ok runs
    (``emb_size``, ``vocab_size``); NaN when no run records both."""
    rows = runs[(runs["corpus"] == corpus) & (runs["head"] == head) & (runs["status"] == "ok")]
    if not {"emb_size", "vocab_size"} <= set(rows.columns):
        return math.nan
    d, V = (pd.to_numeric(rows[c], errors="coerce").to_numpy(dtype=float) for c in ("emb_size", "vocab_size"))
    floors = np.sqrt((d + 1) / V)
    floors = floors[np.isfinite(floors)]
    return float(floors.max()) if floors.size else math.nan


def holm_with_one_sample(comparison_rows: list[dict], singles: list[dict], settings: Settings,
                         tests: list[str] | None = None) -> None:
    """Holm over the family ``claims`` (``audit.stats.families.adjust_family``): each claim-only
    comparison by the test its claim names (``tests``, default all ``welch``: the Welch p where
    tested, the multi-bootstrap ``mb_p`` where defined) and the one-sample claims' p toward the
    claim; the second pass over the same m with each comparison's TOST p (where a margin was
    declared) and each one-sample p toward the negation (``p_opposite_adj``). Every interval at
    the level of its own Holm step, so that each verdict follows from the interval printed beside
    it. Updates both lists in place: a Welch row's ``p_adj``, ``tost_p_adj``, intervals and
    verdict; a multi-bootstrap row's ``mb_p_adj`` and interval; a one-sample claim's ``p_adj``,
    ``p_opposite_adj`` and its interval's ends (``ci_low``/``ci_high`` at ``ci_level``)."""
    tests = tests or ["welch"] * len(comparison_rows)
    boot = np.array([t == "multibootstrap" for t in tests], bool)
    frame = as_columns(pd.DataFrame(comparison_rows) if comparison_rows else pd.DataFrame(columns=["welch_p"]))
    tested = np.isfinite(frame["p_adj"].astype(float))
    has_test = [not s["reason"] for s in singles]
    extra = ([s["p"] if ok else math.nan for s, ok in zip(singles, has_test)],
             [s["p_opposite"] if ok else math.nan for s, ok in zip(singles, has_test)])
    out = adjust_family(frame, np.arange(len(comparison_rows)), settings.alpha, tested & ~boot, boot & tested, extra)
    note = _family_note(comparison_rows, singles, boot, out["m"])
    for i, row in enumerate(comparison_rows):
        row.update({k: frame[k][i] for k in frame}, family_note=note)
        if not boot[i] and tested[i]:
            row["verdict"], row["reason"] = comparison_verdict(row, settings)
    for j, single in enumerate(singles):
        single.update(p_adj=float(out["p_adj"][j]), p_opposite_adj=float(out["alternative_adj"][j]),
                      family_size=out["m"], family_note=note)
        if has_test[j]:
            single.update(_step_interval(single, out["first"][j], out["second"][j], settings.alpha, out["m"]))


def _family_note(comparison_rows: list[dict], singles: list[dict], boot, m: int) -> str:
    """'m = 3 defined tests (Welch and one-sample) of 4 rows; dropped: 1 too few seeds'."""
    reasons = [r["reason"] for r in comparison_rows] + [s["reason"] for s in singles]
    kinds = [drop_kind(r) for r in reasons]
    counts = {k: kinds.count(k) for k in dict.fromkeys(kinds) if k}
    names = [n for n, present in (("Welch", not all(boot)), ("multi-bootstrap", any(boot)),
                                  ("one-sample", bool(singles))) if present]
    what = (f"defined tests ({', '.join(names[:-1])} and {names[-1]})" if len(names) > 1
            else f"defined {names[0]} tests")
    return (f"m = {m} {what} of {len(kinds)} rows"
            + (f"; dropped: {', '.join(f'{n} {k}' for k, n in counts.items())}" if counts else ""))


def _step_interval(ev: dict, toward: float, away: float, alpha: float, m: int) -> dict:
    """The one-sample interval whose ends are the one-sided bounds at each side's Holm step level:
    the bound on the claim's side at 1 - ``toward`` (first pass), the other at 1 - ``away``
    (second pass); with undecided tokens, the union over both accountings."""
    below = ev["expect"] == "below"
    a_low, a_high = (away, toward) if below else (toward, away)
    ends = [one_sample.bounds(x, ev["test"], ev["threshold"], a_low, a_high) for x in ev["samples"]]
    low, high = min(e[0] for e in ends), max(e[1] for e in ends)
    how = (f"one-sided bounds at their holm steps: toward the claim 1 - {toward:.4g}, toward the negation "
           f"1 - {away:.4g} (family of m = {m})")
    return dict(ci_low=low, ci_high=high, ci_level=1 - toward - away, ci_how=how)


def judge_one_sample(expect: str, ev: dict, settings: Settings) -> tuple[str, str]:
    """Verdict of a one-sample claim from its evidence after Holm (``holm_with_one_sample``)."""
    if ev["reason"] or not np.isfinite(ev.get("p_adj", math.nan)):
        return Verdict.INCONCLUSIVE, ev["reason"] or Gate.UNDEFINED.because("the one-sample test could not be computed")
    alpha = settings.alpha
    what = (f"rate of runs with {ev['metric']} > {ev['threshold']:g} = {ev['k']:.0f}/{ev['n']}"
            if ev["test"] == "binomial" else f"mean {ev['metric']} = {ev['stat']:.4g} (n={ev['n']})")
    if "k_counted" in ev:
        what += (f" ({ev['k_counted']:.0f}/{ev['n']} with the unresolved tokens counted unargmaxable)"
                 if ev["test"] == "binomial" else f" ({ev['stat_counted']:.4g} with the unresolved tokens counted)")
    floor = ev.get("floor", math.nan)
    if "floor" in ev and not (np.isfinite(floor) and floor < ev["bound"]):
        return SCALE_VERDICT, (f"not informative at this scale: a random direction keeps sqrt((d+1)/V) = "
                               f"{floor:.3g} of its norm, at or above the bound {ev['bound']:g}, so the verdict "
                               f"would follow from geometry alone ({what}; p_adj={ev['p_adj']:.3g}, toward the "
                               f"negation {ev['p_opposite_adj']:.3g})" if np.isfinite(floor) else
                               "not informative at this scale: no run records emb_size and vocab_size, so the "
                               "random-direction floor sqrt((d+1)/V) is unknown")
    side = "below" if expect == "below" else "above"
    other = "above" if side == "below" else "below"
    both = " (both accountings)" if "k_counted" in ev else ""
    if "floor" in ev:
        what += f"; random-direction floor sqrt((d+1)/V) = {floor:.3g} < the bound"
    # decided on the interval whose ends are each side's one-sided bound at its Holm step: the
    # claim's side lies beyond the bound exactly when its p_adj < alpha (audit.stats.decision)
    low, high = ev["ci_low"] - ev["bound"], ev["ci_high"] - ev["bound"]
    toward, away = (high < 0, low > 0) if expect == "below" else (low > 0, high < 0)
    if toward:
        return Verdict.SUPPORTED, f"{what} {side} {ev['bound']:g}{both}: one-sided p_adj={ev['p_adj']:.3g} < {alpha:g}"
    if away:
        return Verdict.CONTRADICTED, (f"{what} {other} {ev['bound']:g}{both}: one-sided p_adj toward the negation = "
                                f"{ev['p_opposite_adj']:.3g} < {alpha:g}")
    return Verdict.INCONCLUSIVE, (f"{what}: neither side of {ev['bound']:g} shown (p_adj={ev['p_adj']:.3g}, "
                            f"toward the negation {ev['p_opposite_adj']:.3g})")


def one_sample_claim_row(row: dict, claim: dict, ev: dict, settings: Settings) -> dict:
    """The claims-table row of a one-sample claim; ``estimate`` is the arm's mean (or rate) minus
    the bound, its interval (shifted by the bound) the one its verdict follows from: each end the
    one-sided bound at its side's Holm step (``ci_how``), two-sided coverage ``ci_level``."""
    verdict, reason = judge_one_sample(claim["expect"], ev, settings)
    test, bound = ev["test"], ev["bound"]
    binomial = test == "binomial"
    size = ev.get("family_size", math.nan)
    return dict(
        row, verdict=verdict, reason=reason, evidence_table="claims (computed here)",
        evidence=(f"family=claims; metric={ev['metric']}; head={ev['head']}; bound={bound:g}"
                  + (f"; runs with {ev['metric']} > {ev['threshold']:g}" if binomial else "")),
        n_a=ev["n"], n_b=math.nan, n_failed_a=ev["n_failed"], n_failed_b=math.nan,
        estimate_name=("rate - bound (rate = k/n runs above the threshold; exact Clopper-Pearson CI"
                       if binomial else "mean - bound (one-sample t CI") + (
            ": the union of both accountings' intervals, undecided tokens counted argmaxable and not; the "
            "estimate counts them argmaxable)" if ev.get("either_way") else ")"),
        estimate=ev["estimate"], ci_low=ev["ci_low"] - bound, ci_high=ev["ci_high"] - bound, ci_level=ev["ci_level"],
        ci_how=ev.get("ci_how") or f"1 - 2 alpha = {ev['ci_level']:.4g} (no test: no adjustment)",
        rule="excludes", null=0.0, margin=math.nan, family="claims", family_m=size,
        p_name=(f"{'exact binomial' if binomial else 'one-sample t'} p, one-sided (H1: {claim['expect']} "
                f"{bound:g}), {METHOD} within claims ({ev.get('family_note') or f'm={size}'})"),
        p=ev["p"], p_adj=ev.get("p_adj", math.nan), tost_p_adj=math.nan,
        p_opposite_adj=ev.get("p_opposite_adj", math.nan), power=math.nan, seeds_needed=math.nan,
        bootstrap_seed=math.nan, bootstrap_resamples=math.nan)
