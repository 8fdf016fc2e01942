"""Claims table: verdicts from comparison and correlation evidence, and every way to be inconclusive."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit.errors import AuditError
from audit.stats.claims import COLUMNS, claims_table, judge_correlation
from audit.stats.comparisons import comparisons_table
from audit.stats.correlations import correlations_table
from audit.stats.io import Settings, load_config

FAST = Settings(bootstrap_resamples=2000)
ROOT = Path(__file__).resolve().parents[2]


def exact_sample(mean, sd, n=10, seed=0):
    z = np.random.default_rng(seed).normal(size=n)
    return mean + sd * (z - z.mean()) / z.std(ddof=1)


def make_runs(arms, corpus="ptb"):
    rows = []
    for i, (head, (mean, sd, n)) in enumerate(arms.items()):
        for s, v in enumerate(exact_sample(mean, sd, n, seed=i)):
            rows.append(dict(corpus=corpus, head=head, seed=str(s), status="ok", test_ppl=v,
                             press_rank=400.0 + 10 * s if head != "mos" else 9000.0 + s))
    return pd.DataFrame(rows)


def run_claims(runs, config):
    comp = comparisons_table(runs, config, FAST)
    corr = correlations_table(runs, config, FAST)
    return claims_table(runs, config, FAST, comp, corr)


def claim(cid, a, b, expect, **extra):
    return {"id": cid, "source": "test", "comparison": {"head_a": a, "head_b": b, "metric": "test_ppl"},
            "expect": expect, **extra}


def test_default_study_gets_every_claim_with_not_run_reasons():
    # the default study runs only softmax and sigsoftmax
    runs = make_runs({"softmax": (57.08, 0.10, 10), "sigsoftmax": (57.03, 0.15, 10)})
    config = load_config(ROOT / "configs" / "claims.yaml")
    t = run_claims(runs, config)
    assert list(t.columns) == COLUMNS
    assert t["claim_id"].tolist() == [c["id"] for c in config["claims"]]   # one corpus: one row each
    by = t.set_index("claim_id")
    for cid in ("plif-lowers-ppl", "mos-lowers-ppl", "mos-raises-rank", "gating-matters-beyond-rank",
                "learned-plif-no-better-than-frozen", "mos-no-better-than-matched-softmax",
                "logp-rank-correlates-with-ppl"):
        assert by.loc[cid, "verdict"] == "inconclusive" and by.loc[cid, "reason"].startswith("not run"), cid
    # sigsoftmax vs softmax is testable: LK's numbers give p = 0.39 -> not significant, no margin
    assert by.loc["sigsoftmax-lowers-ppl", "verdict"] == "inconclusive"
    assert "no equivalence_margin" in by.loc["sigsoftmax-lowers-ppl", "reason"]


def test_too_few_seeds_is_inconclusive():
    runs = make_runs({"softmax": (57.0, 0.1, 10), "plif": (55.0, 0.1, 3)})
    t = run_claims(runs, {"claims": [claim("c", "plif", "softmax", "lower")]})
    row = t.iloc[0]
    assert row.verdict == "inconclusive" and row.reason.startswith("too few seeds")
    assert (row.n_a, row.n_b) == (3, 10)


@pytest.mark.parametrize("mean_a, expect, margin, verdict", [
    (56.0, "lower", None, "supported"),
    (58.0, "lower", None, "contradicted"),
    (57.0, "lower", 0.3, "equivalent"),
    (57.0, "equivalent", 0.3, "supported"),
    (56.0, "equivalent", 0.3, "contradicted"),
    (57.0, "not_lower", 0.3, "supported"),
    (58.0, "not_lower", None, "supported"),
    (56.0, "not_lower", None, "contradicted"),
    (56.0, "higher", None, "contradicted"),
    (57.05, "lower", None, "inconclusive"),
])
def test_comparison_verdicts(mean_a, expect, margin, verdict):
    runs = make_runs({"softmax": (57.0, 0.1, 10), "plif": (mean_a, 0.1, 10)})
    extra = {"equivalence_margin": margin} if margin else {}
    t = run_claims(runs, {"claims": [claim("c", "plif", "softmax", expect, **extra)]})
    assert t.iloc[0].verdict == verdict
    assert t.iloc[0].evidence_table == "claims (computed here)"


def test_evidence_from_a_study_family_in_reversed_orientation():
    runs = make_runs({"softmax": (57.0, 0.1, 10), "plif": (56.5, 0.1, 10), "mos": (55.0, 0.2, 10)})
    config = {"comparisons": [{"family": "f", "baseline": "softmax", "against": ["plif", "mos"],
                               "metrics": ["test_ppl"]}],
              "claims": [claim("c", "softmax", "plif", "higher")]}       # stated the other way round
    comp = comparisons_table(runs, config, FAST)
    t = claims_table(runs, config, FAST, comp, None)
    row, ev = t.iloc[0], comp[comp.head_a == "plif"].iloc[0]
    assert row.verdict == "supported" and row.evidence_table == "comparisons.csv"
    assert row.estimate == pytest.approx(-ev["diff"]) and row.p_adj == ev.p_adj
    assert (row.ci_low, row.ci_high) == pytest.approx((-ev.diff_ci_high, -ev.diff_ci_low))
    assert "family=f" in row.evidence and "(m = 2 defined Welch tests of 2 rows)" in row.p_name


def test_correlation_claims():
    # decided on the Fisher-z interval of r (issue 53), whose z test's p is printed beside it
    from audit.stats.correlations import fisher_ci, fisher_p
    r = -0.6
    ci, p = fisher_ci(r, 30, 0.95), fisher_p(r, 30)
    assert ci[1] < 0 and p < 0.05
    assert judge_correlation("negative", r, p, 30, FAST, ci=ci)[0] == "supported"
    assert judge_correlation("positive", r, p, 30, FAST, ci=ci)[0] == "contradicted"
    weak = fisher_ci(0.1, 30, 0.95)
    assert judge_correlation("nonzero", 0.1, fisher_p(0.1, 30), 30, FAST, ci=weak)[0] == "inconclusive"
    assert judge_correlation("nonzero", 0.9, 0.001, 4, FAST, ci=(0.1, 0.99))[1].startswith("too few seeds")
    # a p below alpha beside an interval that holds 0 (another test's p) decides nothing
    assert judge_correlation("positive", 0.5, 0.01, 30, FAST, ci=(-0.05, 0.8))[0] == "inconclusive"
    runs = make_runs({"softmax": (57.0, 0.1, 10), "mos": (55.0, 0.1, 10)})
    config = {"correlations": [{"name": "r", "x": "press_rank", "y": "test_ppl"}],
              "claims": [{"id": "k", "source": "s", "expect": "negative", "correlation": {"name": "r"}}]}
    row = run_claims(runs, config).iloc[0]
    assert row.verdict == "supported" and row.kind == "correlation" and row.estimate < 0


def test_claim_levels_are_the_levels_the_correlations_table_computes():
    from audit.schema import read_schema
    from audit.stats.correlations import LEVELS

    level = read_schema()["$defs"]["claim_correlation"]["properties"]["level"]
    assert tuple(level["enum"]) == LEVELS and level["default"] == "runs"


def test_claim_validation():
    runs = make_runs({"softmax": (57.0, 0.1, 10)})
    # errors worded by configs/schema.yaml: one line naming the source and the key
    with pytest.raises(AuditError, match=r"^config: config key claims\[0\]\.expect: 'better' is not one of \['lower'"):
        run_claims(runs, {"claims": [claim("c", "plif", "softmax", "better")]})
    with pytest.raises(AuditError, match=r"^config: config key claims\[1\]: give exactly one of 'comparison', 'correlation', 'one_sample' or 'untestable'$"):
        run_claims(runs, {"claims": [claim("ok", "plif", "softmax", "lower"), {"id": "c", "source": "s", "expect": "lower"}]})
    with pytest.raises(AuditError, match=r"^config: config key claims\[0\]: 'source' is a required property$"):
        run_claims(runs, {"claims": [{"id": "c", "comparison": {}}]})
    with pytest.raises(AuditError, match=r"^config: config key claims\[0\]\.expect: 'lower' is not one of \['positive'"):
        run_claims(runs, {"claims": [{"id": "c", "source": "s", "expect": "lower", "correlation": {"name": "r"}}]})
    with pytest.raises(AuditError, match=r"^config: config key claims\[1\]\.id: duplicate claim id 'c'$"):
        run_claims(runs, {"claims": [claim("c", "plif", "softmax", "lower")] * 2})
    # one-sample claims: below | above, and a binomial bound is a rate in (0, 1)
    with pytest.raises(AuditError, match=r"^config: config key claims\[0\]\.expect: 'lower' is not one of \['below', 'above'\]"):
        run_claims(runs, {"claims": [one_claim("c", "test_ppl", 50, "lower")]})
    with pytest.raises(AuditError, match=r"^config: config key claims\[0\]\.one_sample\.bound: 2 is greater than or equal to"):
        run_claims(runs, {"claims": [one_claim("c", "test_ppl", 2, "below", "binomial")]})


@pytest.mark.parametrize("ci, verdict", [
    ((0.10, 0.45), "supported"),       # the whole interval of |r| below 0.5
    ((-0.45, 0.30), "supported"),      # |r| in [0, 0.45]
    ((0.28, 0.64), "inconclusive"),    # straddles: LK's PTB r = 0.48 over 72 grid models
    ((-0.90, -0.55), "contradicted"),  # |r| in [0.55, 0.90]: strong, whatever the sign
])
def test_weak_correlation_claims(ci, verdict):
    from audit.stats.claims import judge_weak

    assert judge_weak(0.3, ci, 0.5)[0] == verdict
    assert judge_correlation("weak", 0.3, math.nan, 30, FAST, ci=ci, weak_below=0.5)[0] == verdict


def test_weak_claim_on_runs_reads_the_correlation_interval():
    runs = make_runs({"softmax": (57.0, 0.1, 10), "mos": (55.0, 0.1, 10)})   # rank and ppl strongly tied
    config = {"correlations": [{"name": "r", "x": "press_rank", "y": "test_ppl"}],
              "claims": [{"id": "w", "source": "s", "expect": "weak", "weak_below": 0.5, "correlation": {"name": "r"}}]}
    row = run_claims(runs, config).iloc[0]
    assert row.verdict == "contradicted" and abs(row.ci_low) >= 0.5 and "CI of |r|" in row.reason
    with pytest.raises(AuditError, match="weak_below"):
        del config["claims"][0]["weak_below"]
        run_claims(runs, config)


def test_evidence_without_a_margin_says_none_not_nan():
    runs = make_runs({"softmax": (57.0, 0.1, 10), "plif": (56.0, 0.1, 10)})
    row = run_claims(runs, {"claims": [claim("c", "plif", "softmax", "lower")]}).iloc[0]
    assert row.evidence.endswith("; margin=none") and "nan" not in row.evidence.lower()
    with_margin = run_claims(runs, {"claims": [claim("c", "plif", "softmax", "lower", equivalence_margin=0.3)]})
    assert with_margin.iloc[0].evidence.endswith("; margin=0.3")


def test_a_multibootstrap_claim_on_summary_rows_is_inconclusive_not_a_crash():
    """The published record's comparisons have no mb_* columns: a claim naming the
    multi-bootstrap is inconclusive there, saying why (it once raised KeyError 'mb_diff')."""
    import math

    from audit.stats.claims import multiboot_evidence
    from audit.stats.io import Settings

    row = {"diff": -1.0, "p_adj": 0.01, "verdict": "significant", "reason": "welch p_adj=0.01 < 0.05"}
    out = multiboot_evidence(row, Settings())
    assert out["verdict"] == "inconclusive" and math.isnan(out["p_adj"])
    assert out["reason"].startswith("not run: the multibootstrap needs per-sentence")


# -- one-sample claims (audit.stats.one_sample) -------------------------------------------------

def one_claim(cid, metric, bound, expect, test="t", head="softmax", **extra):
    return {"id": cid, "source": "test", "expect": expect,
            "one_sample": {"head": head, "metric": metric, "bound": bound, "test": test, **extra}}


def share_runs(shares, counts=None, head="softmax"):
    counts = [0] * len(shares) if counts is None else counts
    return pd.DataFrame([dict(corpus="ptb", head=head, seed=str(s), status="ok", test_ppl=57.0 + 0.1 * s,
                              gradient_norm_share=v, unargmaxable=c) for s, (v, c) in enumerate(zip(shares, counts))])


@pytest.mark.parametrize("mean, expect, verdict", [
    (0.03, "below", "supported"), (0.07, "below", "contradicted"), (0.0502, "below", "inconclusive"),
    (0.07, "above", "supported"), (0.03, "above", "contradicted")])
def test_one_sample_t_verdicts(mean, expect, verdict):
    runs = share_runs(exact_sample(mean, 0.005, 10))
    row = run_claims(runs, {"claims": [one_claim("c", "gradient_norm_share", 0.05, expect)]}).iloc[0]
    assert row.kind == "one_sample" and row.verdict == verdict, row.reason
    assert row.estimate == pytest.approx(mean - 0.05) and row.n_a == 10
    assert row.ci_level == pytest.approx(0.90) and row.ci_low < row.estimate < row.ci_high
    assert row.p_adj == pytest.approx(row.p)   # alone in its family: m = 1


def test_one_sample_binomial_all_zero_counts_supported_and_t_undefined():
    runs = share_runs([0.03] * 10, counts=[0] * 10)
    t = run_claims(runs, {"claims": [one_claim("bin", "unargmaxable", 0.5, "below", "binomial"),
                                     one_claim("t", "unargmaxable", 0.5, "below", "t")]}).set_index("claim_id")
    assert t.loc["bin", "verdict"] == "supported" and t.loc["bin", "p"] == pytest.approx(0.5 ** 10)
    # the undefined t leaves the family: the binomial's p is adjusted over m = 1
    assert t.loc["bin", "p_adj"] == pytest.approx(0.5 ** 10)
    assert t.loc["t", "verdict"] == "inconclusive" and t.loc["t", "reason"].startswith("undefined")
    assert math.isnan(t.loc["t", "p_adj"])


def test_one_sample_and_claim_only_comparisons_share_one_holm_family():
    runs = share_runs(exact_sample(0.03, 0.005, 10))
    runs = pd.concat([runs, share_runs(exact_sample(0.06, 0.005, 10), head="mos")])
    config = {"claims": [one_claim("one", "gradient_norm_share", 0.05, "below"),
                         {"id": "two", "source": "test", "expect": "higher", "lower_is_better": False,
                          "comparison": {"head_a": "mos", "head_b": "softmax", "metric": "gradient_norm_share"}}]}
    t = claims_table(runs, config, FAST, None, None).set_index("claim_id")
    p = np.array([t.loc["one", "p"], t.loc["two", "p"]])
    # Holm by hand: the smaller p times 2, the larger max(that, larger p times 1)
    order = np.argsort(p)
    holm = np.empty(2)
    holm[order[0]] = min(1, 2 * p[order[0]])
    holm[order[1]] = min(1, max(holm[order[0]], p[order[1]]))
    assert [t.loc["one", "p_adj"], t.loc["two", "p_adj"]] == pytest.approx(list(holm))
    assert t.loc["one", "verdict"] == "supported" and t.loc["two", "verdict"] == "supported"
    assert "m = 2 defined tests (Welch and one-sample) of 2 rows" in t.loc["two", "p_name"]


def test_one_sample_inconclusive_without_enough_runs_or_column():
    few = share_runs([0.01, 0.02, 0.015])
    cfg = {"claims": [one_claim("c", "gradient_norm_share", 0.05, "below")]}
    row = run_claims(few, cfg).iloc[0]
    assert row.verdict == "inconclusive" and row.reason.startswith("too few seeds: n=3 < min_seeds=5")
    # older runs without the column: not run, never an error, never a verdict
    old = few.drop(columns=["gradient_norm_share", "unargmaxable"])
    row = claims_table(old, cfg, FAST, None, None).iloc[0]
    assert row.verdict == "inconclusive" and "no column 'gradient_norm_share' (runs made before" in row.reason
    # mixtures have no count (null): their arm has no values, so no verdict
    nulls = share_runs([0.01] * 6, counts=[np.nan] * 6, head="mos")
    row = claims_table(nulls, {"claims": [one_claim("m", "unargmaxable", 0.5, "below", "binomial", head="mos")]},
                       FAST, None, None).iloc[0]
    assert row.verdict == "inconclusive" and "6 ok runs without a unargmaxable value" in row.reason


def test_one_sample_claim_on_an_arm_below_unigram_is_not_informative():
    from audit.stats.guard import VERDICT, guard_claims
    runs = share_runs(exact_sample(0.03, 0.005, 10))
    cfg = {"claims": [one_claim("c", "gradient_norm_share", 0.05, "below")]}
    t = claims_table(runs, cfg, FAST, None, None)
    base = pd.DataFrame([dict(corpus="ptb", vocab_size=np.nan, unigram_ppl=50.0)])
    guarded = guard_claims(t, runs, base, cfg).iloc[0]
    assert guarded.verdict == VERDICT and "the test alone: supported" in guarded.reason


def test_claims_file_one_sample_claims_validate_and_published_record_lists_them():
    from audit.stats.published.evidence import published_tables
    config = load_config(ROOT / "configs" / "published.yaml")
    kinds = {c["id"]: next(k for k in ("comparison", "correlation", "one_sample", "untestable") if k in c) for c in config["claims"]}
    assert kinds["softmax-rarely-unargmaxable"] == kinds["softmax-passes-small-gradient-share"] == "one_sample"
    tables = published_tables(config, FAST)
    assert not {"softmax-rarely-unargmaxable", "softmax-passes-small-gradient-share"} & set(tables["published_claims"]["claim_id"])
    listed = tables["published_untestable"].set_index("claim_id")
    assert "13" in listed.loc["softmax-rarely-unargmaxable", "numbers"]
    assert "95" in listed.loc["softmax-passes-small-gradient-share", "numbers"]


def test_a_head_given_as_alternatives_is_the_first_with_runs_in_each_corpus():
    """head_a: [mos_fair, mos] is mos_fair where a corpus has it, mos where only mos ran; the
    verdict matches the same claim written with that head, and corpora resolve independently."""
    alt = claim("matched", ["mos_fair", "mos"], "softmax_matched", "lower")
    ptb = make_runs({"mos_fair": (56.0, 0.3, 5), "mos": (70.0, 0.3, 5), "softmax_matched": (57.0, 0.3, 5)})
    wt2 = make_runs({"mos": (60.0, 0.3, 5), "softmax_matched": (58.0, 0.3, 5)}, corpus="wt2")
    runs = pd.concat([ptb, wt2], ignore_index=True)
    got = run_claims(runs, {"claims": [alt]}).set_index("corpus")
    assert got.loc["ptb", "evidence"].startswith("family=claims; metric=test_ppl; mos_fair - softmax_matched")
    assert got.loc["wt2", "evidence"].startswith("family=claims; metric=test_ppl; mos - softmax_matched")
    assert (got.loc["ptb", "verdict"], got.loc["wt2", "verdict"]) == ("supported", "contradicted")
    for corpus, head in (("ptb", "mos_fair"), ("wt2", "mos")):
        plain = run_claims(runs, {"claims": [dict(claim("matched", head, "softmax_matched", "lower"), corpora=[corpus])]})
        assert plain["estimate"].iloc[0] == pytest.approx(got.loc[corpus, "estimate"], abs=1e-12)
    # no alternative has runs: the first one is named in the "not run" reason
    none = run_claims(make_runs({"softmax_matched": (57.0, 0.3, 5)}), {"claims": [alt]})
    assert none["reason"].iloc[0] == "not run: no runs of mos_fair in corpus 'ptb'"


def test_same_params_checks_the_claims_premise_on_the_runs():
    runs = make_runs({"mos": (56.0, 0.3, 5), "softmax_matched": (57.0, 0.3, 5)})
    runs["n_params"] = np.where(runs["head"] == "mos", 287_440, 286_096)       # 0.47% apart
    c = claim("matched", ["mos_fair", "mos"], "softmax_matched", "lower")
    c["comparison"]["same_params"] = 0.01
    assert run_claims(runs, {"claims": [c]})["verdict"].iloc[0] == "supported"
    runs.loc[runs["head"] == "softmax_matched", "n_params"] = 300_000         # 4.2% apart
    got = run_claims(runs, {"claims": [c]}).iloc[0]
    assert got["verdict"] == "inconclusive" and got["reason"] == (
        "not run: the claim compares arms of the same parameter count, but mos has 287,440 and "
        "softmax_matched 300,000 (differ by 4.2% > same_params 0.01)")
    with pytest.raises(AuditError, match=r"^config: config key claims\[0\]\.comparison\.head_a: must be a head name "
                                         r"or a non-empty list of head names$"):
        run_claims(runs, {"claims": [claim("c", [], "softmax", "lower")]})
