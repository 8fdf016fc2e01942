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
      # by_construction: "..."   # any kind: why it holds by algebra at this scale; judged as a
      #                          # control that passed or failed (audit.stats.controls)

A comparison claim uses the matching row of the comparisons table (same corpus, metric and
heads in either order, same margin when the claim gives one; Holm-corrected in that family).
Without one, the comparison is run here, and all such claim-only rows form one Holm family
``claims``. A correlation claim uses the permutation p of the named correlation's unrestricted
row. Verdicts: ``supported``, ``contradicted``, ``equivalent`` or ``inconclusive`` + reason.
With ``test: multibootstrap`` a comparison claim is judged on the same row's multi-bootstrap
(``mb_diff``, its t interval and ``mb_p_adj``, Holm in one family with the Welch tests): a claim
about the language rather than this test set. It tests no equivalence, so it never says
``equivalent``. In the family ``claims`` each row enters with the test its claim names.

This module judges the comparison and correlation claims and assembles the table. A one-sample
claim (``one_sample``) is judged by ``audit.stats.one_sample_claims``: its evidence, the Holm
family ``claims`` it shares with the claim-only comparisons, and its verdict and row.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from audit.config import check_section
from audit.stats import multiboot
from audit.stats.comparisons import default_lower_is_better, finalize, make_row
from audit.stats.controls import as_control
from audit.stats.decision import Gate, Rule, Verdict, decides, stamped
from audit.stats.io import Settings, absent_later, arm
from audit.stats.one_sample_claims import holm_with_one_sample, one_sample_claim_row, one_sample_evidence

# the decision record's columns (audit.stats.decision): the verdict, the interval it follows from
# (rule, null, margin: how), its level and how that level was chosen, the family and its m
COLUMNS = [
    "claim_id", "source", "statement", "corpus", "kind", "expect", "verdict", "reason", "gate", "guard", "role",
    "evidence_table", "evidence", "n_a", "n_b", "n_failed_a", "n_failed_b", "estimate_name",
    "estimate", "ci_low", "ci_high", "ci_level", "ci_how", "rule", "null", "margin", "p_name", "p",
    "p_adj", "tost_p_adj", "p_opposite_adj", "family", "family_m", "power",
    "seeds_needed", "alpha", "bootstrap_seed", "bootstrap_resamples", "ours",
]
EQUIVALENCE_NAME = ("diff = mean_a - mean_b (welch CI at 1 - 2 x the TOST step's alpha: the interval TOST "
                    "corresponds to)")


def _welch_shown(row: dict) -> dict:
    return dict(ci_low=row["diff_ci_low"], ci_high=row["diff_ci_high"], ci_level=row["ci_level"],
                ci_how=row.get("ci_how", ""), rule=str(Rule.EXCLUDES), margin=row.get("equivalence_margin", math.nan))


def _tost_shown(row: dict) -> dict:
    return dict(estimate_name=EQUIVALENCE_NAME, ci_low=row.get("tost_ci_low", math.nan),
                ci_high=row.get("tost_ci_high", math.nan), ci_level=row.get("tost_ci_level", math.nan),
                ci_how=row.get("tost_ci_how", ""), rule=str(Rule.INSIDE), margin=row["equivalence_margin"])


def judge_comparison(expect: str, row: dict, settings: Settings) -> tuple[str, str, dict]:
    """Verdict of a comparison claim from a finalized comparisons row (a = claim's head_a), with
    the interval it follows from (``shown``: ``ci_low, ci_high, ci_level, ci_how, rule, margin``
    and, for an equivalence, ``estimate_name``).

    Decided on the row's intervals (``audit.stats.decision.decides``): the Welch interval at its
    Holm step's level for a difference, the TOST interval for an equivalence. An undecided claim
    shows the interval of the test that would have decided it: TOST's for ``equivalent``, the
    difference's otherwise.
    """
    welch, tost = _welch_shown(row), _tost_shown(row)
    if row["verdict"] == Verdict.INCONCLUSIVE and not np.isfinite(row["p_adj"]):
        return Verdict.INCONCLUSIVE, row["reason"], welch   # not run, too few seeds, runs failed, undefined
    differ = decides(Rule.EXCLUDES, welch["ci_low"], welch["ci_high"])
    lower, higher = differ and row["diff"] < 0, differ and row["diff"] > 0
    equiv = decides(Rule.INSIDE, tost["ci_low"], tost["ci_high"], margin=tost["margin"])
    why = row["reason"]
    if expect in ("lower", "higher"):
        hit, miss = (lower, higher) if expect == "lower" else (higher, lower)
        if hit or miss:
            return (Verdict.SUPPORTED if hit else Verdict.CONTRADICTED), why, welch
        return (Verdict.EQUIVALENT, why, tost) if equiv else (Verdict.INCONCLUSIVE, why, welch)
    if expect == "equivalent":
        if equiv:
            return Verdict.SUPPORTED, why, tost
        return (Verdict.CONTRADICTED, why, welch) if differ else (Verdict.INCONCLUSIVE, why, tost)
    bad, good = (lower, higher) if expect == "not_lower" else (higher, lower)
    if good:
        return Verdict.SUPPORTED, why, welch
    if equiv:
        return Verdict.SUPPORTED, why, tost
    return (Verdict.CONTRADICTED, why, welch) if bad else (Verdict.INCONCLUSIVE, why, welch)


def judge_correlation(expect: str, r: float, p: float, n: int, settings: Settings,
                      ci: tuple[float, float] | None = None, weak_below: float | None = None,
                      p_name: str = "fisher z p") -> tuple[str, str]:
    """Verdict of a correlation claim, decided on the Fisher-z interval ``ci`` of r (the interval
    the Fisher z test inverts, whose two-sided ``p`` is shown beside it); a non-significant r is
    never read as "no correlation".

    ``expect: weak`` is judged on the interval of |r| alone: supported when the whole interval
    lies below ``weak_below``, contradicted when it lies at or above it, inconclusive when it
    straddles it.
    """
    if n < settings.min_seeds:
        return Verdict.INCONCLUSIVE, Gate.TOO_FEW_SEEDS.because(f"n={n} points < min_seeds={settings.min_seeds}")
    if expect == "weak":
        return judge_weak(r, ci, weak_below)
    low, high = ci if ci is not None else (math.nan, math.nan)
    if not (np.isfinite(p) and np.isfinite(low) and np.isfinite(high)):
        return Verdict.INCONCLUSIVE, Gate.UNDEFINED.because("constant variable or too few points for the Fisher z interval")
    if not decides(Rule.EXCLUDES, low, high):
        return Verdict.INCONCLUSIVE, (f"not significant ({p_name}={p:.3g}; its interval holds 0); absence of "
                                "correlation is not shown")
    why = f"r={r:.3g}, {p_name}={p:.3g} < {settings.alpha:g} (its interval excludes 0)"
    if expect == "nonzero" or (r > 0) == (expect == "positive"):
        return Verdict.SUPPORTED, why
    return Verdict.CONTRADICTED, why


def judge_weak(r: float, ci: tuple[float, float] | None, weak_below: float | None) -> tuple[str, str]:
    """Verdict of "the correlation is weak": the CI of |r| against the declared threshold."""
    if weak_below is None:
        return Verdict.INCONCLUSIVE, "expect: weak needs weak_below (the threshold of a weak |r|) in the claim"
    low, high = ci if ci is not None else (math.nan, math.nan)
    if not (np.isfinite(low) and np.isfinite(high)):
        return Verdict.INCONCLUSIVE, Gate.UNDEFINED.because("no interval for r (too few points or r undefined)")
    # interval of |r| from the interval of r: [0, max] when it holds 0
    abs_low = 0.0 if low <= 0 <= high else min(abs(low), abs(high))
    abs_high = max(abs(low), abs(high))
    why = f"r={r:.3g}, CI of |r| [{abs_low:.3g}, {abs_high:.3g}] against weak below {weak_below:g}"
    if abs_high < weak_below:
        return Verdict.SUPPORTED, why
    if abs_low >= weak_below:
        return Verdict.CONTRADICTED, why
    return Verdict.INCONCLUSIVE, why + ": the interval straddles the threshold"


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
    return Gate.NOT_RUN.because(f"the claim compares arms of the same parameter count, but {comp['head_a']} has "
                                f"{a:,.0f} and {comp['head_b']} {b:,.0f} (differ by {abs(a - b) / b:.1%} > "
                                f"same_params {tol:g})")


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
    if "tost_ci_low" in row:
        out["tost_ci_low"], out["tost_ci_high"] = -row["tost_ci_high"], -row["tost_ci_low"]
    return out


def multiboot_evidence(row: dict, settings: Settings) -> dict:
    """A comparisons row re-pointed at its multi-bootstrap: ``diff`` and ``p_adj`` from
    ``mb_diff`` and ``mb_p_adj``, no TOST, the reason saying what was tested; an arm below
    ``min_seeds`` keeps the Welch row's "too few seeds" reason. A row without ``mb_*`` columns
    (the published record: summary rows have no per-sentence NLL) is inconclusive, saying so."""
    if "mb_diff" not in row:
        return dict(row, tost_p_adj=math.nan, p_adj=math.nan, verdict=Verdict.INCONCLUSIVE,
                    reason=Gate.NOT_RUN.because("the multibootstrap needs per-sentence test NLL, which summary rows lack"))
    out = dict(row, tost_p_adj=math.nan, diff=row["mb_diff"], p_adj=row["mb_p_adj"],
               diff_ci_low=row["mb_ci_low"], diff_ci_high=row["mb_ci_high"], ci_level=row["mb_ci_level"],
               ci_how=f"{row['mb_ci_level']:.4g}: the level of its Holm step (family of m = {row['family_size']:g})", tost_ci_low=math.nan, tost_ci_high=math.nan, tost_ci_level=math.nan)
    if not np.isfinite(row["p_adj"]) and row["verdict"] == Verdict.INCONCLUSIVE and Gate.of(row["reason"]) is not Gate.UNDEFINED:
        return dict(out, p_adj=math.nan)   # not run, too few seeds, runs failed: as the Welch row says
    if not np.isfinite(row["mb_p_adj"]):
        return dict(out, p_adj=math.nan, verdict=Verdict.INCONCLUSIVE, reason=Gate.UNDEFINED.because(f"multibootstrap {row['mb_note']}"))
    p, alpha = row["mb_p_adj"], settings.alpha
    out["reason"] = (f"multibootstrap p_adj={p:.3g} {'<' if p < alpha else '>='} {alpha:g} "
                     f"(its {row['mb_ci_level']:.4g} CI [{row['mb_ci_low']:.4g}, {row['mb_ci_high']:.4g}]; "
                     f"no equivalence test)")
    out["verdict"] = "decided"   # anything but "inconclusive": judge_comparison reads the interval
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
                rows.append(dict(row, kind="untestable", verdict=Verdict.INCONCLUSIVE, evidence_table="",
                                 reason=Gate.UNTESTABLE.because(str(claim["untestable"]))))
                continue
            if "comparison" in claim:
                row.update(kind="comparison")
                resolved = resolve(claim, runs, corpus)
                comp = resolved["comparison"]
                mismatch = params_mismatch(resolved, runs, corpus)
                if mismatch:
                    rows.append(dict(row, verdict=Verdict.INCONCLUSIVE, evidence_table="", reason=mismatch))
                    continue
                if comp["metric"] not in runs.columns:
                    rows.append(dict(row, verdict=Verdict.INCONCLUSIVE, evidence_table="",
                                     reason=absent_later(runs, comp["metric"])
                                     or Gate.NOT_RUN.because(f"the runs table has no column {comp['metric']!r}")))
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
    by_id = {c["id"]: c for c in claims}
    # by construction: a control, not support; each row checked as its decision record
    out = [stamped(as_control(r, by_id[r["claim_id"]])) for r in out]
    order = {c["id"]: i for i, c in enumerate(claims)}
    out.sort(key=lambda r: (order[r["claim_id"]], r["corpus"]))
    return pd.DataFrame(out, columns=COLUMNS)


def comparison_claim_row(row: dict, claim: dict, ev: dict, table: str, settings: Settings) -> dict:
    """The claims-table row of a comparison claim judged on comparisons row ``ev`` (its
    multi-bootstrap with ``test: multibootstrap``): the verdict and the interval it follows
    from come from one call (``judge_comparison``)."""
    boot = claim.get("test", "welch") == "multibootstrap"
    if boot:
        ev = multiboot_evidence(ev, settings)
    verdict, reason, shown = judge_comparison(claim["expect"], ev, settings)
    size = ev.get("family_size", math.nan)
    margin = ev["equivalence_margin"]   # NaN when none was declared: say so, never print "nan"
    name = shown.pop("estimate_name", "diff of mean corpus perplexities (multibootstrap t CI over seeds "
                     "and sentences)" if boot else "diff = mean_a - mean_b (welch CI)")
    return dict(
        row, verdict=verdict, reason=reason, evidence_table=table,
        evidence=(f"family={ev['family']}; metric={ev['metric']}; {ev['head_a']} - {ev['head_b']}; "
                  f"margin={f'{margin:g}' if np.isfinite(margin) else 'none'}"),
        n_a=ev["n_a"], n_b=ev["n_b"], n_failed_a=ev["n_failed_a"], n_failed_b=ev["n_failed_b"],
        estimate_name=name, estimate=ev["diff"], **shown, null=0.0, family=ev["family"], family_m=size,
        p_name=(f"multibootstrap p (t, seed + sentence variance), two-sided, {ev['adj_method']} within "
                f"{ev['family']} ({ev.get('family_note') or f'm={size}'})" if boot else
                f"welch p, {ev['adj_method']} within {ev['family']} ({ev.get('family_note') or f'm={size}'})"),
        p=ev.get("mb_p", math.nan) if boot else ev["welch_p"],
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
        return dict(row, verdict=Verdict.INCONCLUSIVE,
                    reason=Gate.NOT_RUN.because(f"correlation {spec['name']!r} is not declared for corpus {corpus!r} in the study config"))
    ev = hit.iloc[0]
    r = ev["pearson_r" if method == "pearson" else "spearman_rho"]
    p = ev[f"{method}_z_p"]
    ci = (ev[f"{method}_ci_low"], ev[f"{method}_ci_high"])
    verdict, reason = judge_correlation(claim["expect"], r, p, int(ev["n"]), settings, ci=ci,
                                        weak_below=claim.get("weak_below"))
    weak = claim["expect"] == "weak"
    return dict(row, verdict=verdict, reason=reason, n_a=int(ev["n"]), estimate_name=f"{method} r",
                estimate=r, ci_low=ci[0], ci_high=ci[1], ci_level=ev["ci_level"],
                ci_how=f"1 - alpha = {ev['ci_level']:.4g} (fisher-z; a single pre-declared test, no adjustment)",
                rule=str(Rule.WEAK if weak else Rule.EXCLUDES), null=float(claim.get("weak_below") or 0.0) if weak else 0.0,
                margin=math.nan, p_name=("fisher z p (H0: rho = 0; the test the interval inverts), two-sided, "
                                         f"uncorrected: a single pre-declared test; permutation p "
                                         f"{ev[f'{method}_perm_p']:.3g} in correlations.csv"),
                p=p, family="", family_m=1, bootstrap_seed=ev["permutation_seed"],
                bootstrap_resamples=ev["permutation_resamples"])
