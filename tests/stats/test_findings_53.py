"""The six findings of issue 53's outside review, each as it was found (each failed on 19f3457).

Golden values come from SciPy and statsmodels called here, not from the modules under test.
"""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from audit.report import counts
from audit.report.scales import cross_scale_table
from audit.stats.claims import claims_table
from audit.stats.comparisons import comparisons_table
from audit.stats.correlations import correlations_table
from audit.stats.io import Settings
from audit.stats.published.evidence import published_tables
from audit.stats.published.reproduce import round_sig
from audit.stats.published.summaries import student_p_from_stats
from audit.stats.wordsim import diffs_table

FAST = Settings(bootstrap_resamples=400)
HEADER = "set,paper,table,row,corpus,head,metric,kind,mean,sd,n,n_basis,published_p,p_vs,p_test,p_family,claim_id\n"


def exact(mean: float, sd: float, n: int, seed: int = 0) -> np.ndarray:
    z = np.random.default_rng(seed).normal(size=n)
    return mean + sd * (z - z.mean()) / z.std(ddof=1)


def runs_of(arms: dict, **columns) -> pd.DataFrame:
    return pd.DataFrame([dict(corpus="ptb", head=h, seed=str(s), status="ok", test_ppl=v,
                              **{k: c[h][s] for k, c in columns.items()})
                         for h, values in arms.items() for s, v in enumerate(values)])


def test_1_a_published_verdict_over_an_unstated_n_is_shown_with_what_holds_at_every_n(tmp_path):
    """mos vs softmax: means 56 / 57, SD 1, n unstated (3 assumed); the printed p reproduces only
    near 15 runs per arm. The claim stands at every admissible n; at the assumed n = 3 its
    interval was [-3.27, 1.27] and its p_adj 0.288."""
    printed = round_sig(student_p_from_stats(56.0, 1.0, 15, 57.0, 1.0, 15), 2)
    plif = student_p_from_stats(57.02, 0.1, 15, 57.0, 1.0, 15)
    rows = [f"t,P,T1,Softmax,ptb,softmax,test_ppl,seeds,57.0,1.0,3,unstated (3 assumed),,,,,",
            f"t,P,T1,MoS,ptb,mos,test_ppl,seeds,56.0,1.0,3,unstated (3 assumed),{printed},softmax,student,T1,",
            f"t,P,T1,PLIF,ptb,plif,test_ppl,seeds,57.02,0.1,3,unstated (3 assumed),{round_sig(plif, 2)},softmax,student,T1,"]
    path = tmp_path / "pub.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n")
    claims = [{"id": "mos", "source": "s", "statement": "mos lowers", "expect": "lower",
               "comparison": {"head_a": "mos", "head_b": "softmax", "metric": "test_ppl"}}]
    config = {"claims": claims, "published": {"unstated_n": [3, 20]}}
    out = published_tables(config, Settings(min_seeds=3), path)
    claim = out["published_claims"].set_index("claim_id").loc["mos"]
    at3 = stats.ttest_ind_from_stats(56.0, 1.0, 3, 57.0, 1.0, 3, equal_var=False)
    assert at3.pvalue > 0.05                               # the assumed n alone decides nothing
    assert claim["verdict"] == "supported"
    assert claim["ci_high"] < 0 and claim["p_adj"] < 0.05  # was [-3.27, 1.27] and 0.288
    assert "hull over the" in claim["ci_how"]
    # the hull holds each admissible n's interval at its Holm step's level
    comp = out["published_comparisons"].set_index("head_a")
    assert comp.loc["mos", "diff_ci_high"] == claim["ci_high"] and comp.loc["mos", "verdict"] == "a_better"


def test_2_a_correlation_claim_is_decided_by_the_test_its_interval_inverts(tmp_path):
    """Six runs, r = 0.755: the permutation p (0.044) had said supported beside the Fisher
    interval [-0.146, 0.971]; the published r = 0.881 at n = 5: t-test p 0.048 beside [-0.0057, 0.992]."""
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    rng = np.random.default_rng(3)
    y = x + rng.normal(0, 1.3, 6)
    r = float(np.corrcoef(x, y)[0, 1])
    runs = runs_of({h: [50 + v] for h, v in zip("abcdef", y)}, press_rank={h: [v] for h, v in zip("abcdef", x)})
    config = {"correlations": [{"name": "rank", "x": "press_rank", "y": "test_ppl"}],
              "claims": [{"id": "pos", "source": "s", "statement": "s", "expect": "positive",
                          "correlation": {"name": "rank", "level": "runs", "method": "pearson"}}]}
    settings = Settings(min_seeds=3, bootstrap_resamples=720)
    corr = correlations_table(runs, config, settings)
    claim = claims_table(runs, config, settings, None, corr).iloc[0]
    fisher_p = 2 * stats.norm.sf(abs(math.atanh(r)) * math.sqrt(6 - 3))
    assert claim["p"] == pytest.approx(fisher_p, rel=1e-9)
    holds_zero = claim["ci_low"] < 0 < claim["ci_high"]
    assert (claim["verdict"] == "inconclusive") == holds_zero == (fisher_p >= 0.05)
    assert claim["verdict"] == "inconclusive" and 0.05 < fisher_p
    # the published record: r = 0.881, n = 5
    path = tmp_path / "pub.csv"
    path.write_text(HEADER + "r,P,T,rows,ptb,grid,rank,correlation,0.881,,5,5 models,,,,,\n")
    config = {"claims": [{"id": "pos", "source": "s", "statement": "s", "expect": "positive",
                          "correlation": {"name": "rank", "level": "runs", "method": "pearson"}}]}
    pub = published_tables(config, FAST, path)["published_claims"].iloc[0]
    assert pub["p"] == pytest.approx(2 * stats.norm.sf(math.atanh(0.881) * math.sqrt(2)), rel=1e-9)
    assert pub["verdict"] == "inconclusive" and pub["ci_low"] < 0 < pub["ci_high"]


def test_3_a_word_similarity_verdict_stands_beside_the_interval_its_z_test_inverts():
    """13 word pairs, 5 seeds a head, many draws: every decisive row's interval excludes 0 and no
    undecided row's does (the percentile interval had stood beside the z test's verdicts)."""
    rows, mismatch_before = [], 0
    for trial in range(12):
        rng = np.random.default_rng(trial)
        gold = rng.uniform(0, 10, 13)
        for head, noise in (("softmax", 0.25), ("mos", rng.uniform(0.25, 0.8))):
            for seed in range(5):
                cos = gold / 10 + rng.normal(0, noise, 13)
                rows += [dict(corpus=f"c{trial}", head=head, seed=str(seed), benchmark="b", word1=f"w{i}",
                              word2=f"v{i}", gold=gold[i], cosine=cos[i]) for i in range(13)]
    table = diffs_table(pd.DataFrame(rows), Settings(bootstrap_resamples=1000))
    for r in table.to_dict("records"):
        excludes = r["diff_ci_high"] < 0 or r["diff_ci_low"] > 0
        assert excludes == (r["verdict"] in ("a_better", "b_better")) == (r["p_adj"] < 0.05), r
        pct = r["pct_ci_high"] < 0 or r["pct_ci_low"] > 0
        mismatch_before += pct != excludes
    assert mismatch_before                     # the draws hold the finding: percentile and z disagreed


def test_4_a_control_is_a_control_in_every_column_and_in_the_headline(tmp_path):
    """A by-construction claim: flagged by the guard, not run, or judged on the published record;
    never 'Claims: 1 not informative', '1 not tested' or a supported cell that counts as agreement."""
    path = tmp_path / "pub.csv"
    path.write_text(HEADER + "t,P,T,S,ptb,softmax,test_ppl,seeds,57.0,0.1,10,10 seeds,,,,,\n"
                             "t,P,T,M,ptb,mos,test_ppl,seeds,55.0,0.1,10,10 seeds,,,,,\n")
    claim = {"id": "built", "source": "s", "statement": "s", "expect": "lower", "by_construction": "algebra",
             "comparison": {"head_a": "mos", "head_b": "softmax", "metric": "test_ppl"}}
    pub = published_tables({"claims": [claim]}, FAST, path)["published_claims"]
    assert pub.iloc[0]["verdict"] == "control_passed" and pub.iloc[0]["role"] == "control"
    own = [dict(claim_id="built", corpus="ptb", statement="s", verdict="not_informative", role="control",
                gate="tested", reason="not informative: mos: ...", guard="mos: ..."),
           dict(claim_id="gone", corpus="ptb", statement="s", verdict="inconclusive", role="control",
                gate="not run", reason="not run: no runs of x"),
           dict(claim_id="real", corpus="ptb", statement="s", verdict="supported", role="evidence",
                gate="tested", reason="welch", estimate=-2.0, ci_low=-2.1, ci_high=-1.9, ci_level=0.95)]
    parts = counts.split(own)
    assert counts.counts(parts["claims"]) == {"supported": 1} and parts["untested"] == []
    assert counts.counts(parts["controls"]) == {"not_informative": 1, "not run": 1}
    matrix = cross_scale_table([("published", pub, "", ""), ("this study", pd.DataFrame(own), "", "")])
    row = matrix.set_index("claim_id").loc["built"]
    assert row["agreement"] == ""                        # a control counts in no agreement
    assert row["cell__this study"].startswith("control (holds by construction), not informative")
    evidence_cells = matrix[(matrix["claim_id"] != "scale")
                            & ~matrix["verdict__this study"].isin(["", "control_passed"])]
    shown = {v: int((evidence_cells["verdict__this study"] == v).sum()) for v in ("supported",)}
    assert shown == counts.counts(parts["claims"])       # the headline counts the matrix's evidence cells


def test_5_a_holm_family_adjusts_over_the_tests_it_names():
    """The family `claims`: one claim-only equivalence (raw TOST p about 0.03) and two one-sample
    claims: m = 3, so the TOST p is adjusted over three tests (0.091), not among the comparisons
    alone (0.0304: 'supported')."""
    a, b = exact(50.0, 0.3, 8, 1), exact(50.05, 0.3, 8, 2)
    share = {"x": exact(0.5, 0.1, 8, 3), "y": exact(0.5, 0.1, 8, 4)}
    runs = runs_of({"x": a, "y": b}, gradient_norm_share=share)
    margin = 0.335
    claims = [{"id": "ss-same", "source": "s", "statement": "s", "expect": "equivalent", "equivalence_margin": margin,
               "comparison": {"head_a": "x", "head_b": "y", "metric": "test_ppl"}},
              {"id": "one", "source": "s", "statement": "s", "expect": "below",
               "one_sample": {"head": "x", "metric": "gradient_norm_share", "bound": 0.6, "test": "t"}},
              {"id": "two", "source": "s", "statement": "s", "expect": "below",
               "one_sample": {"head": "y", "metric": "gradient_norm_share", "bound": 0.45, "test": "t"}}]
    table = claims_table(runs, {"claims": claims}, FAST, None, None).set_index("claim_id")
    from statsmodels.stats.weightstats import ttost_ind
    tost = ttost_ind(a, b, -margin, margin, usevar="unequal")[0]
    assert 0.017 < tost < 0.05                                   # alone it would pass
    away = [stats.ttest_1samp(share[h], bound, alternative="greater").pvalue for h, bound in (("x", 0.6), ("y", 0.45))]
    expected = multipletests([tost] + away, method="holm")[1][0]
    row = table.loc["ss-same"]
    assert row["family_m"] == 3 and "m = 3" in row["p_name"]
    assert row["tost_p_adj"] == pytest.approx(expected, rel=1e-9) and expected > 0.05
    assert row["verdict"] == "inconclusive" and not (-margin < row["ci_low"] and row["ci_high"] < margin)


def test_6_an_undecided_verdict_never_stands_beside_an_interval_that_decides():
    """Two rows with raw p 0.03 and 0.04: Holm gives 0.06 to both (no decision); their 95% intervals
    exclude 0. The intervals printed are at the level Holm tested them at, 1 - 0.05 / 2."""
    a1, b1 = exact(50.0, 0.5, 8, 5), exact(50.0, 0.5, 8, 6)
    target = {"m1": 0.03, "m2": 0.04}
    arms = {"base": b1}
    for head, p in target.items():   # a shift that gives this Welch p against base
        shift = stats.t.isf(p / 2, 14) * 0.5 * math.sqrt(2 / 8)
        arms[head] = a1 - shift
    runs = runs_of(arms)
    fam = {"family": "f", "baseline": "base", "against": ["m1", "m2"], "metrics": ["test_ppl"]}
    table = comparisons_table(runs, {"comparisons": [fam]}, FAST).set_index("head_a")
    for head, p in target.items():
        row = table.loc[head]
        assert row["welch_p"] == pytest.approx(p, rel=1e-6) and row["verdict"] == "inconclusive"
        assert row["ci_level"] == pytest.approx(1 - 0.05 / 2)
        assert row["diff_ci_low"] < 0 < row["diff_ci_high"]
        unadjusted = stats.ttest_ind(runs[runs["head"] == head]["test_ppl"], b1, equal_var=False).confidence_interval(0.95)
        assert unadjusted.high < 0                      # what the page had printed beside "inconclusive"
