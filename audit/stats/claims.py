"""The claims table: a verdict on every published claim, with the evidence row it rests on.

Claims come from the study config's ``claims:`` and from the file named by its
``claims_file:`` (see ``configs/claims.yaml``), checked against ``$defs/claim`` of
``configs/schema.yaml``. One claim::

    - id: plif-lowers-ppl                 # required, unique
      source: Ganea et al. 2019           # required: who claimed it
      statement: LMS-PLIF lowers test perplexity vs softmax
      # either a comparison of two heads ...
      comparison: {head_a: plif, head_b: softmax, metric: test_ppl}
      #   a head may be a list of alternatives, [mos_fair, mos]: the first with runs in the
      #   corpus (a role the studies name differently); same_params: 0.01 makes the claim's
      #   premise "the two arms have the same parameter count" checked on the runs' n_params
      #   (relative difference of the medians at most this, else no verdict)
      expect: lower        # lower | higher (of head_a's metric), equivalent, not_lower, not_higher
      equivalence_margin: 0.2   # optional, metric units
      lower_is_better: true     # optional; only orients P(A better than B)
      family: heads-vs-softmax  # optional: take the row from this comparisons family
      corpora: [ptb]            # optional; default every corpus of the runs table
      test: welch               # optional: welch (over seeds, the default) or multibootstrap
                                # (seeds and test sentences, audit.stats.multiboot)
      # ... or a declared correlation of the study config:
      # correlation: {name: press-rank-vs-test-ppl, level: runs, method: pearson}
      # expect: positive | negative | nonzero | weak
      # weak_below: 0.5   # with expect: weak -- supported when the CI of |r| lies below it,
                          # contradicted when it lies at or above it, else inconclusive
      # ... or one arm against a declared bound (audit.stats.one_sample):
      # one_sample: {head: softmax, metric: gradient_norm_share, bound: 0.05, test: t}
      #             # test: binomial counts the runs whose value is above `threshold` (default 0)
      #             # and tests their rate against the bound (a rate in (0, 1))
      #             # unresolved: a column of tokens left undecided (argmax_unresolved_box100): the
      #             #   verdict must hold with them counted either way (metric, metric + unresolved)
      #             # scale_floor: random_direction -- the share kept by a (d+1)-dimensional
      #             #   subspace of a random direction in R^V, sqrt((d+1)/V) (emb_size, vocab_size):
      #             #   at or above the bound, the verdict follows from geometry alone
      # expect: below | above
      # ... or a claim this audit cannot test, with why (listed with the claims not tested):
      # untestable: the runs keep their best validation epoch, so a late rise is cut away
      # ours: "the bound 0.5 is ours: ..."   # any kind: the bound or threshold this audit chose,
      #                                      # and why; the page marks it "ours"

A comparison claim uses the matching row of the comparisons table (same corpus, metric and
heads in either order, same margin when the claim gives one; Holm-corrected in that family).
Without one, the comparison is run here, and all such claim-only rows form one Holm family
``claims``. A correlation claim uses the permutation p of the named correlation's unrestricted
row. Verdicts: ``supported``, ``contradicted``, ``equivalent`` or ``inconclusive`` + reason.
With ``test: multibootstrap`` a comparison claim is judged on the same row's multi-bootstrap
(``mb_diff``, its t interval and ``mb_p_adj``, Holm in one family with the Welch tests): a claim
about the language rather than this test set. It tests no equivalence, so it never says
``equivalent``. In the family ``claims`` each row enters with the test its claim names.

A one-sample claim (``one_sample``) joins the Holm family ``claims`` with its one-sided p toward
the claim (``p_adj``); its p toward the negation is Holm-adjusted in a second pass over the
same family (``p_opposite_adj``, as TOST is beside Welch). Supported when ``p_adj`` < alpha,
contradicted when ``p_opposite_adj`` < alpha (at most one can be), else inconclusive; fewer
than ``min_seeds`` usable runs, an undefined test, an absent column or head: inconclusive with
the reason, out of the family. The estimate is mean - bound (or rate - bound) with the
1 - 2 alpha interval whose ends are the one-sided bounds of the two tests.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from audit.config import check_section
from audit.stats import multiboot, one_sample
from audit.stats.comparisons import default_lower_is_better, finalize, make_row, verdict as comparison_verdict
from audit.stats.gates import drop_kind
from audit.stats.io import Settings, absent_later, arm
from audit.stats.multiplicity import METHOD, adjust

COLUMNS = [
    "claim_id", "source", "statement", "corpus", "kind", "expect", "verdict", "reason",
    "evidence_table", "evidence", "n_a", "n_b", "n_failed_a", "n_failed_b", "estimate_name",
    "estimate", "ci_low", "ci_high", "ci_level", "p_name", "p", "p_adj", "tost_p_adj",
    "p_opposite_adj", "power",
    "seeds_needed", "alpha", "bootstrap_seed", "bootstrap_resamples", "ours",
]
SCALE_VERDICT = "not_informative_at_scale"   # the verdict would follow from geometry alone


def judge_comparison(expect: str, row: dict, settings: Settings) -> tuple[str, str]:
    """Verdict of a comparison claim from a finalized comparisons row (a = claim's head_a)."""
    if row["verdict"] == "inconclusive" and not np.isfinite(row["p_adj"]):
        return "inconclusive", row["reason"]   # not run, too few seeds, runs failed, undefined
    alpha = settings.alpha
    sig = row["p_adj"] < alpha
    lower, higher = sig and row["diff"] < 0, sig and row["diff"] > 0
    equiv = np.isfinite(row["tost_p_adj"]) and row["tost_p_adj"] < alpha
    why = row["reason"]
    if expect in ("lower", "higher"):
        hit, miss = (lower, higher) if expect == "lower" else (higher, lower)
        if hit:
            return "supported", why
        if miss:
            return "contradicted", why
        if equiv:
            return "equivalent", why
        return "inconclusive", why
    if expect == "equivalent":
        if equiv:
            return "supported", why
        return ("contradicted", why) if sig else ("inconclusive", why)
    bad, good = (lower, higher) if expect == "not_lower" else (higher, lower)
    if equiv or good:
        return "supported", why
    return ("contradicted", why) if bad else ("inconclusive", why)


def judge_correlation(expect: str, r: float, p: float, n: int, settings: Settings,
                      ci: tuple[float, float] | None = None, weak_below: float | None = None,
                      p_name: str = "permutation p") -> tuple[str, str]:
    """Verdict of a correlation claim; a non-significant r is never read as "no correlation".

    ``expect: weak`` is judged on the interval ``ci`` of r alone (no p-value): supported when
    the whole interval of |r| lies below ``weak_below``, contradicted when it lies at or above
    it, inconclusive when it straddles it.
    """
    if n < settings.min_seeds:
        return "inconclusive", f"too few points: n={n} < min_seeds={settings.min_seeds}"
    if expect == "weak":
        return judge_weak(r, ci, weak_below)
    if not np.isfinite(p):
        return "inconclusive", "test undefined (constant variable or too few points)"
    if p >= settings.alpha:
        return "inconclusive", f"not significant ({p_name}={p:.3g}); absence of correlation is not shown"
    why = f"r={r:.3g}, {p_name}={p:.3g} < {settings.alpha:g}"
    if expect == "nonzero" or (r > 0) == (expect == "positive"):
        return "supported", why
    return "contradicted", why


def judge_weak(r: float, ci: tuple[float, float] | None, weak_below: float | None) -> tuple[str, str]:
    """Verdict of "the correlation is weak": the CI of |r| against the declared threshold."""
    if weak_below is None:
        return "inconclusive", "expect: weak needs weak_below (the threshold of a weak |r|) in the claim"
    low, high = ci if ci is not None else (math.nan, math.nan)
    if not (np.isfinite(low) and np.isfinite(high)):
        return "inconclusive", "no interval for r (too few points or r undefined)"
    # interval of |r| from the interval of r: [0, max] when it holds 0
    abs_low = 0.0 if low <= 0 <= high else min(abs(low), abs(high))
    abs_high = max(abs(low), abs(high))
    why = f"r={r:.3g}, CI of |r| [{abs_low:.3g}, {abs_high:.3g}] against weak below {weak_below:g}"
    if abs_high < weak_below:
        return "supported", why
    if abs_low >= weak_below:
        return "contradicted", why
    return "inconclusive", why + ": the interval straddles the threshold"


def resolve(claim: dict, runs: pd.DataFrame, corpus: str) -> dict:
    """The claim with each of its comparison's heads given as a list of alternatives replaced by
    the first one with runs in ``corpus`` of ``runs`` (a runs table or the published one), or by
    the first alternative when none has runs (its "not run" reason then names it); other claims
    unchanged."""
    comp = claim.get("comparison")
    if not comp or all(isinstance(comp[k], str) for k in ("head_a", "head_b")):
        return claim
    heads = set(runs.loc[runs["corpus"] == corpus, "head"].astype(str))

    def pick(names):
        names = [names] if isinstance(names, str) else list(names)
        return next((h for h in names if h in heads), names[0])

    return dict(claim, comparison=dict(comp, head_a=pick(comp["head_a"]), head_b=pick(comp["head_b"])))


def params_mismatch(claim: dict, runs: pd.DataFrame, corpus: str) -> str | None:
    """Why a resolved comparison claim with ``same_params`` has no verdict: the medians of the two
    arms' ``n_params`` over their ok runs differ by more than that share of head_b's; None when
    they match, or when the runs table has no ``n_params`` (a published table: its paper
    states the match)."""
    comp = claim["comparison"]
    tol = comp.get("same_params")
    if tol is None or "n_params" not in runs:
        return None
    medians = []
    for head in (comp["head_a"], comp["head_b"]):
        values = arm(runs, corpus, head, "n_params").values     # ok runs, finite values
        medians.append(float(np.median(values)) if values.size else math.nan)
    a, b = medians
    if not (np.isfinite(a) and np.isfinite(b)) or abs(a - b) <= tol * b:
        return None   # an arm without runs gets its own "not run" reason downstream
    return (f"not run: the claim compares arms of the same parameter count, but {comp['head_a']} has "
            f"{a:,.0f} and {comp['head_b']} {b:,.0f} (differ by {abs(a - b) / b:.1%} > same_params {tol:g})")


def find_row(comparisons: pd.DataFrame, claim: dict, corpus: str):
    """The comparisons row a comparison claim rests on, and whether its heads are swapped."""
    comp = claim["comparison"]
    if comparisons is None or comparisons.empty:
        return None, False
    sel = comparisons[(comparisons["corpus"] == corpus) & (comparisons["metric"] == comp["metric"])]
    if claim.get("family"):
        sel = sel[sel["family"].str.split("[", regex=False).str[0] == claim["family"]]
    if claim.get("equivalence_margin") is not None:
        sel = sel[np.isclose(sel["equivalence_margin"], float(claim["equivalence_margin"]))]
    for flipped, (a, b) in ((False, (comp["head_a"], comp["head_b"])), (True, (comp["head_b"], comp["head_a"]))):
        hit = sel[(sel["head_a"] == a) & (sel["head_b"] == b)]
        if len(hit):
            return hit.iloc[0].to_dict(), flipped
    return None, False


def flip_row(row: dict) -> dict:
    """Re-orient a comparisons row so head_a and head_b swap."""
    out = dict(row)
    for k in ("n", "n_failed", "n_missing", "mean", "sd", "head"):
        out[f"{k}_a"], out[f"{k}_b"] = row[f"{k}_b"], row[f"{k}_a"]
    for key in ("diff", "mb_diff"):
        if key in row:
            low, high = ("diff_ci_low", "diff_ci_high") if key == "diff" else ("mb_ci_low", "mb_ci_high")
            out[key], out[low], out[high] = -row[key], -row[high], -row[low]
    return out


def multiboot_evidence(row: dict, settings: Settings) -> dict:
    """A comparisons row re-pointed at its multi-bootstrap: ``diff`` and ``p_adj`` from
    ``mb_diff`` and ``mb_p_adj``, no TOST, the reason saying what was tested; an arm below
    ``min_seeds`` keeps the Welch row's "too few seeds" reason. A row without ``mb_*`` columns
    (the published record: summary rows have no per-sentence NLL) is inconclusive, saying so."""
    if "mb_diff" not in row:
        return dict(row, tost_p_adj=math.nan, p_adj=math.nan, verdict="inconclusive",
                    reason="multibootstrap not computed: it needs per-sentence test NLL, which summary rows lack")
    out = dict(row, tost_p_adj=math.nan, diff=row["mb_diff"], p_adj=row["mb_p_adj"],
               diff_ci_low=row["mb_ci_low"], diff_ci_high=row["mb_ci_high"])
    if not np.isfinite(row["p_adj"]) and row["verdict"] == "inconclusive" and not str(row["reason"]).startswith("undefined"):
        return dict(out, p_adj=math.nan)   # not run, too few seeds, runs failed: as the Welch row says
    if not np.isfinite(row["mb_p_adj"]):
        return dict(out, verdict="inconclusive", reason=f"multibootstrap {row['mb_note']}")
    p, alpha = row["mb_p_adj"], settings.alpha
    out["reason"] = (f"multibootstrap p_adj={p:.3g} {'<' if p < alpha else '>='} {alpha:g} "
                     f"(CI [{row['mb_ci_low']:.4g}, {row['mb_ci_high']:.4g}]; no equivalence test)")
    out["verdict"] = "decided"   # anything but "inconclusive": judge_comparison reads p_adj
    return out


def claims_table(runs: pd.DataFrame, config: dict, settings: Settings,
                 comparisons: pd.DataFrame | None, correlations: pd.DataFrame | None,
                 source: str = "config", sentences: multiboot.Sentences | None = None) -> pd.DataFrame:
    """One row per claim and corpus.

    Args:
        runs: validated runs table.
        config: study config with claims merged in (``io.load_config``).
        comparisons: finalized comparisons table of the study (may be empty).
        correlations: correlations table of the study (may be empty).
        sentences: per-run sentence sums for the claim-only rows' multi-bootstrap (None: NaN).
    """
    claims = check_section("claims", config.get("claims"), source)
    all_corpora = sorted(runs["corpus"].unique())
    pending, singles, rows = [], [], []
    for claim in claims:
        base = dict(claim_id=claim["id"], source=claim["source"], statement=claim["statement"],
                    expect=claim.get("expect", ""), alpha=settings.alpha, ours=claim.get("ours", ""))
        for corpus in [str(c) for c in claim.get("corpora") or all_corpora]:
            row = dict(base, corpus=corpus)
            if "untestable" in claim:
                rows.append(dict(row, kind="untestable", verdict="inconclusive", evidence_table="",
                                 reason=f"untestable: {claim['untestable']}"))
                continue
            if "comparison" in claim:
                row.update(kind="comparison")
                resolved = resolve(claim, runs, corpus)
                comp = resolved["comparison"]
                mismatch = params_mismatch(resolved, runs, corpus)
                if mismatch:
                    rows.append(dict(row, verdict="inconclusive", evidence_table="", reason=mismatch))
                    continue
                if comp["metric"] not in runs.columns:
                    rows.append(dict(row, verdict="inconclusive", evidence_table="",
                                     reason=absent_later(runs, comp["metric"])
                                     or f"not run: the runs table has no column {comp['metric']!r}"))
                    continue
                found, flipped = find_row(comparisons, resolved, corpus)
                if found is not None:
                    rows.append((row, resolved, flip_row(found) if flipped else found, "comparisons.csv"))
                    continue
                lib = claim.get("lower_is_better")
                lib = default_lower_is_better(comp["metric"], f"{source}: claim {claim['id']!r}") if lib is None else bool(lib)
                pending.append((row, resolved, make_row(runs, "claims", corpus, comp["metric"], str(comp["head_a"]),
                                                      str(comp["head_b"]), lib, claim.get("equivalence_margin"), settings)))
            elif "one_sample" in claim:
                singles.append((dict(row, kind="one_sample"), claim, one_sample_evidence(claim, corpus, runs, settings)))
            else:
                rows.append(_correlation_row(row, claim, corpus, correlations, settings))
    done = []
    if pending:   # claim-only comparisons: corrected together as the family "claims"
        done = multiboot.attach(finalize([p[2] for p in pending], settings), runs, sentences,
                                settings).to_dict("records")
    if pending or singles:   # ... with the one-sample claims, each row by its claim's test, one Holm family
        holm_with_one_sample(done, [s[2] for s in singles], settings,
                             [claim.get("test", "welch") for _, claim, _ in pending])
    rows += [(row, claim, r, "claims (computed here)") for (row, claim, _), r in zip(pending, done)]
    rows += [one_sample_claim_row(row, claim, ev, settings) for row, claim, ev in singles]
    out = [comparison_claim_row(*r, settings) if isinstance(r, tuple) else r for r in rows]
    order = {c["id"]: i for i, c in enumerate(claims)}
    out.sort(key=lambda r: (order[r["claim_id"]], r["corpus"]))
    return pd.DataFrame(out, columns=COLUMNS)


def comparison_claim_row(row: dict, claim: dict, ev: dict, table: str, settings: Settings) -> dict:
    """The claims-table row of a comparison claim judged on comparisons row ``ev`` (its
    multi-bootstrap with ``test: multibootstrap``)."""
    boot = claim.get("test", "welch") == "multibootstrap"
    if boot:
        ev = multiboot_evidence(ev, settings)
    verdict, reason = judge_comparison(claim["expect"], ev, settings)
    size = ev.get("family_size", math.nan)
    margin = ev["equivalence_margin"]   # NaN when none was declared: say so, never print "nan"
    return dict(
        row, verdict=verdict, reason=reason, evidence_table=table,
        evidence=(f"family={ev['family']}; metric={ev['metric']}; {ev['head_a']} - {ev['head_b']}; "
                  f"margin={f'{margin:g}' if np.isfinite(margin) else 'none'}"),
        n_a=ev["n_a"], n_b=ev["n_b"], n_failed_a=ev["n_failed_a"], n_failed_b=ev["n_failed_b"],
        estimate_name=("diff of mean corpus perplexities (multibootstrap t CI over seeds and sentences)"
                       if boot else "diff = mean_a - mean_b (welch CI)"),
        estimate=ev["diff"], ci_low=ev["diff_ci_low"], ci_high=ev["diff_ci_high"], ci_level=ev["ci_level"],
        p_name=(f"multibootstrap p (t, seed + sentence variance), two-sided, {ev['adj_method']} within "
                f"{ev['family']} ({ev.get('family_note') or f'm={size}'})" if boot else
                f"welch p, {ev['adj_method']} within {ev['family']} ({ev.get('family_note') or f'm={size}'})"),
        p=ev["mb_p"] if boot else ev["welch_p"],
        p_adj=ev["p_adj"], tost_p_adj=ev["tost_p_adj"], power=ev["power"], seeds_needed=ev["seeds_needed"],
        bootstrap_seed=ev["bootstrap_seed"], bootstrap_resamples=ev["bootstrap_resamples"])


def _correlation_row(row: dict, claim: dict, corpus: str, correlations: pd.DataFrame | None,
                     settings: Settings) -> dict:
    spec = claim["correlation"]
    level, method = spec["level"], spec["method"]   # defaults from the schema's claim_correlation
    row = dict(row, kind="correlation", evidence_table="correlations.csv",
               evidence=f"correlation={spec['name']}; level={level}; method={method}; restriction=none")
    hit = None
    if correlations is not None and len(correlations):
        hit = correlations[(correlations["name"] == spec["name"]) & (correlations["corpus"] == corpus)
                           & (correlations["level"] == level) & (correlations["restriction"] == "none")]
    if hit is None or hit.empty:
        return dict(row, verdict="inconclusive",
                    reason=f"not run: correlation {spec['name']!r} is not declared for corpus {corpus!r} in the study config")
    ev = hit.iloc[0]
    r = ev["pearson_r" if method == "pearson" else "spearman_rho"]
    p = ev[f"{method}_perm_p"]
    verdict, reason = judge_correlation(claim["expect"], r, p, int(ev["n"]), settings,
                                        ci=(ev[f"{method}_ci_low"], ev[f"{method}_ci_high"]),
                                        weak_below=claim.get("weak_below"))
    return dict(row, verdict=verdict, reason=reason, n_a=int(ev["n"]), estimate_name=f"{method} r",
                estimate=r, ci_low=ev[f"{method}_ci_low"], ci_high=ev[f"{method}_ci_high"],
                ci_level=ev["ci_level"], p_name="permutation p (uncorrected, single pre-declared test)",
                p=p, bootstrap_seed=ev["permutation_seed"], bootstrap_resamples=ev["permutation_resamples"])


def one_sample_evidence(claim: dict, corpus: str, runs: pd.DataFrame, settings: Settings) -> dict:
    """The statistics of a one-sample claim on one corpus, before Holm (``audit.stats.one_sample``),
    with ``reason``: why it has no test ('' when it has one: it then enters the family); with the
    spec's ``unresolved``, both accountings of the undecided tokens (``_either_way``); with its
    ``scale_floor``, ``floor`` (the largest over the runs) for ``judge_one_sample``."""
    spec = claim["one_sample"]
    head, metric, test = str(spec["head"]), spec["metric"], spec.get("test", "t")
    ev = dict(head=head, metric=metric, test=test, bound=float(spec["bound"]),
              threshold=float(spec.get("threshold", 0.0)), n=0, n_failed=0, n_missing=0, reason="")
    extra = spec.get("unresolved")
    absent = next((c for c in (metric, extra) if c and c not in runs.columns), None)
    if absent:   # a runs table from before the metric was measured, or a typo
        ev.update(one_sample.one_sample(np.array([]), ev["bound"], claim["expect"], test, ev["threshold"], settings.alpha))
        return dict(ev, reason=absent_later(runs, absent) or f"not run: the runs table has no column {absent!r}")
    sample = arm(runs, corpus, head, metric)
    if extra:
        sample = arm(_with_unresolved(runs, metric, extra), corpus, head, metric)
    ev.update(one_sample.one_sample(sample.values, ev["bound"], claim["expect"], test, ev["threshold"], settings.alpha),
              n_failed=sample.n_failed, n_missing=sample.n_missing)
    if extra and len(sample.values):
        ev = _either_way(ev, arm(_with_unresolved(runs, metric, extra, counted=True), corpus, head, metric),
                         claim["expect"], settings)
    n, need = len(sample.values), settings.min_seeds
    if not sample.present:
        ev["reason"] = f"not run: no runs of {head} in corpus {corpus!r}"
    elif n < need:
        lost = [f"{c} {what}" for c, what in ((sample.n_failed, "runs failed"),
                                                (sample.n_missing, f"ok runs without a {metric} value")) if c]
        kind = "runs failed" if sample.n_failed and n + sample.n_failed >= need else "too few seeds"
        ev["reason"] = f"{kind}: n={n} < min_seeds={need}" + (f"; {', '.join(lost)}" if lost else "")
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
    side only where both accountings pass it; ``k_counted`` the count of the second."""
    other = one_sample.one_sample(counted.values, ev["bound"], expect, ev["test"], ev["threshold"], settings.alpha)
    both = [ev["p"], other["p"]], [ev["p_opposite"], other["p_opposite"]]
    worst = [max(v) if all(np.isfinite(v)) else math.nan for v in both]
    return dict(ev, p=worst[0], p_opposite=worst[1], k_counted=other.get("k", math.nan),
                stat_counted=other.get("stat", math.nan), undefined=ev["undefined"] or other["undefined"])


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
    """Holm over the family ``claims``: each claim-only comparison's p by the test its claim
    names (``tests``, default all ``welch``: the Welch p where tested, the multi-bootstrap ``mb_p``
    where defined) and the one-sample claims' p toward the claim; a second pass with the
    one-sample p toward the negation (``p_opposite_adj``) over the same m. Updates both lists in
    place: ``p_adj`` of a Welch row (its verdict again from it), ``mb_p_adj`` of a multi-bootstrap
    row."""
    tests = tests or ["welch"] * len(comparison_rows)
    boot = [t == "multibootstrap" for t in tests]
    welch = [r["mb_p"] if b else (r["welch_p"] if np.isfinite(r["p_adj"]) else math.nan)
             for r, b in zip(comparison_rows, boot)]
    tested = [not s["reason"] for s in singles]
    p_adj, size, dropped = adjust(welch + [s["p"] if ok else math.nan for s, ok in zip(singles, tested)])
    p_opp = adjust(welch + [s["p_opposite"] if ok else math.nan for s, ok in zip(singles, tested)])[0]
    reasons = [r["reason"] for r in comparison_rows] + [s["reason"] for s in singles]
    kinds = [drop_kind(r) for r in reasons]
    counts = {k: kinds.count(k) for k in dict.fromkeys(kinds) if k}
    names = [n for n, present in (("Welch", not all(boot)), ("multi-bootstrap", any(boot)),
                                  ("one-sample", bool(singles))) if present]
    what = (f"defined tests ({', '.join(names[:-1])} and {names[-1]})" if len(names) > 1
            else f"defined {names[0]} tests")
    note = (f"m = {size} {what} of {len(kinds)} rows"
            + (f"; dropped: {', '.join(f'{n} {k}' for k, n in counts.items())}" if counts else ""))
    for i, r in enumerate(comparison_rows):
        if boot[i]:
            r["mb_p_adj"] = float(p_adj[i])
        elif np.isfinite(r["p_adj"]):
            r["p_adj"] = float(p_adj[i])
            r["verdict"], r["reason"] = comparison_verdict(r, settings)
        r.update(family_size=size, family_dropped=dropped, family_note=note)
    for j, s in enumerate(singles, start=len(comparison_rows)):
        s.update(p_adj=float(p_adj[j]), p_opposite_adj=float(p_opp[j]), family_size=size, family_note=note)


def judge_one_sample(expect: str, ev: dict, settings: Settings) -> tuple[str, str]:
    """Verdict of a one-sample claim from its evidence after Holm (``holm_with_one_sample``)."""
    if ev["reason"] or not np.isfinite(ev.get("p_adj", math.nan)):
        return "inconclusive", ev["reason"] or "undefined: the one-sample test could not be computed"
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
    if ev["p_adj"] < alpha:
        return "supported", f"{what} {side} {ev['bound']:g}{both}: one-sided p_adj={ev['p_adj']:.3g} < {alpha:g}"
    if ev["p_opposite_adj"] < alpha:
        return "contradicted", (f"{what} {other} {ev['bound']:g}{both}: one-sided p_adj toward the negation = "
                                f"{ev['p_opposite_adj']:.3g} < {alpha:g}")
    return "inconclusive", (f"{what}: neither side of {ev['bound']:g} shown (p_adj={ev['p_adj']:.3g}, "
                            f"toward the negation {ev['p_opposite_adj']:.3g})")


def one_sample_claim_row(row: dict, claim: dict, ev: dict, settings: Settings) -> dict:
    """The claims-table row of a one-sample claim; ``estimate`` is the arm's mean (or rate) minus
    the bound, its interval the one at ``ci_level`` = 1 - 2 alpha shifted by the bound."""
    verdict, reason = judge_one_sample(claim["expect"], ev, settings)
    test, bound = ev["test"], ev["bound"]
    binomial = test == "binomial"
    size = ev.get("family_size", math.nan)
    return dict(
        row, verdict=verdict, reason=reason, evidence_table="claims (computed here)",
        evidence=(f"family=claims; metric={ev['metric']}; head={ev['head']}; bound={bound:g}"
                  + (f"; runs with {ev['metric']} > {ev['threshold']:g}" if binomial else "")),
        n_a=ev["n"], n_b=math.nan, n_failed_a=ev["n_failed"], n_failed_b=math.nan,
        estimate_name=("rate - bound (rate = k/n runs above the threshold; exact Clopper-Pearson CI)"
                       if binomial else "mean - bound (one-sample t CI)"),
        estimate=ev["estimate"], ci_low=ev["ci_low"] - bound, ci_high=ev["ci_high"] - bound, ci_level=ev["ci_level"],
        p_name=(f"{'exact binomial' if binomial else 'one-sample t'} p, one-sided (H1: {claim['expect']} "
                f"{bound:g}), {METHOD} within claims (m={size})"),
        p=ev["p"], p_adj=ev.get("p_adj", math.nan), tost_p_adj=math.nan,
        p_opposite_adj=ev.get("p_opposite_adj", math.nan), power=math.nan, seeds_needed=math.nan,
        bootstrap_seed=math.nan, bootstrap_resamples=math.nan)
