"""Comparisons table: the LK papers' published p-values, exclusions, Holm families, verdicts."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats
from statsmodels.stats.multitest import multipletests

from audit.errors import AuditError
from audit.stats.claims import claims_table
from audit.stats.comparisons import TABLE_COLUMNS as COLUMNS, comparisons_table
from audit.stats.io import Settings, load_runs

FAST = Settings(bootstrap_resamples=2000)

# LK-SM Table 1: 10-seed test perplexity mean, SD; LK-paper Table 2 p vs softmax (Student, n = 10)
TABLE2 = {
    "ptb": {"softmax": (57.08, 0.10), "sigsoftmax": (57.03, 0.15, 3.92e-1), "gss": (57.02, 0.13, 2.62e-1),
            "plif": (56.81, 0.11, 1.91e-5), "mos": (54.88, 0.26, 2.02e-15)},
    "wt2": {"softmax": (64.63, 0.09), "sigsoftmax": (64.35, 0.18, 3.46e-4), "gss": (64.51, 0.13, 2.74e-2),
            "plif": (64.15, 0.17, 2.98e-7), "mos": (61.97, 0.43, 2.04e-13)},
}
# LK-paper Table 4: learned PLIF vs frozen PLIF
TABLE4 = {"ptb": ((56.81, 0.11), (56.82, 0.09), 0.826), "wt2": ((64.15, 0.17), (64.30, 0.17), 0.0641)}


def exact_sample(mean, sd, n=10, seed=0):
    """n values whose sample mean and sample SD (ddof = 1) are exactly ``mean`` and ``sd``."""
    z = np.random.default_rng(seed).normal(size=n)
    z = (z - z.mean()) / z.std(ddof=1)
    return mean + sd * z


def runs_from(spec):
    rows = []
    for i, ((corpus, head), (mean, sd)) in enumerate(spec.items()):
        for s, v in enumerate(exact_sample(mean, sd, seed=i)):
            rows.append(dict(corpus=corpus, head=head, seed=str(s), status="ok", test_ppl=v))
    return pd.DataFrame(rows)


def sig3(x):
    return float(f"{x:.3g}")


def test_lk_table2_p_values_reproduced_by_student_p():
    spec = {(c, h): v[:2] for c, heads in TABLE2.items() for h, v in heads.items()}
    runs = runs_from(spec)
    cfg = {"comparisons": [{"family": "t2", "baseline": "softmax", "metrics": ["test_ppl"],
                            "against": ["sigsoftmax", "gss", "plif", "mos"]}]}
    table = comparisons_table(runs, cfg, FAST)
    assert list(table.columns) == COLUMNS and len(table) == 8
    for row in table.itertuples():
        mean_a, sd_a, published = TABLE2[row.corpus][row.head_a]
        mean_b, sd_b = TABLE2[row.corpus]["softmax"]
        assert (row.n_a, row.n_b) == (10, 10)
        assert (row.mean_a, row.sd_a) == pytest.approx((mean_a, sd_a), rel=1e-12)
        assert sig3(row.student_p) == published, (row.corpus, row.head_a)
        golden = stats.ttest_ind_from_stats(mean_a, sd_a, 10, mean_b, sd_b, 10, equal_var=True).pvalue
        assert row.student_p == pytest.approx(golden, rel=1e-9)
        welch = stats.ttest_ind_from_stats(mean_a, sd_a, 10, mean_b, sd_b, 10, equal_var=False).pvalue
        assert row.welch_p == pytest.approx(welch, rel=1e-9)
    # the papers' p-values are Student's, not Welch's (protocol section 5): WT2 PLIF Welch = 1.87e-6
    wt2_plif = table[(table.corpus == "wt2") & (table.head_a == "plif")].iloc[0]
    assert sig3(wt2_plif.welch_p) == 1.87e-6 != 2.98e-7


def test_lk_table4_plif_vs_frozen():
    spec = {}
    for corpus, (plif, frozen, _) in TABLE4.items():
        spec[(corpus, "plif")], spec[(corpus, "plif_frozen")] = plif, frozen
    table = comparisons_table(runs_from(spec), {"comparisons": [
        {"family": "t4", "pairs": [["plif", "plif_frozen"]], "metrics": ["test_ppl"]}]}, FAST)
    got = {r.corpus: sig3(r.student_p) for r in table.itertuples()}
    assert got == {c: v[2] for c, v in TABLE4.items()}


def _arms(**arms):
    """runs table for corpus 'c' from head -> list of values (None = failed run, nan = missing)."""
    rows = []
    for head, values in arms.items():
        for s, v in enumerate(values):
            rows.append(dict(corpus="c", head=head, seed=str(s), status="failed" if v is None else "ok",
                             test_ppl=1e6 if v is None else v, press_rank=1.0))
    return pd.DataFrame(rows)


def test_failed_runs_and_nans_are_excluded_and_counted():
    base = list(exact_sample(57.0, 0.1, seed=1))
    cand = list(exact_sample(56.5, 0.1, seed=2)) + [None, None, math.nan]
    table = comparisons_table(_arms(softmax=base, plif=cand), {"comparisons": [
        {"family": "f", "baseline": "softmax", "against": ["plif"], "metrics": ["test_ppl"]}]}, FAST)
    row = table.iloc[0]
    assert (row.n_a, row.n_failed_a, row.n_missing_a, row.n_b) == (10, 2, 1, 10)
    assert row.mean_a == pytest.approx(56.5)             # the failed runs' 1e6 never enters
    assert row.verdict == "a_better" and row.p_adj < 0.05


def test_too_few_seeds_and_failed_runs_give_no_verdict_and_leave_the_family():
    good = list(exact_sample(57.0, 0.1, seed=1))
    arms = _arms(softmax=good, plif=list(exact_sample(56.0, 0.1, 4, seed=2)),
                 mos=list(exact_sample(55.0, 0.1, 4, seed=3)) + [None] * 6,
                 gss=list(exact_sample(56.9, 0.1, seed=4)), sigsoftmax=list(exact_sample(56.0, 0.1, seed=5)))
    cfg = {"comparisons": [{"family": "f", "baseline": "softmax", "metrics": ["test_ppl"],
                            "against": ["plif", "mos", "gss", "sigsoftmax", "moc"]}]}
    t = comparisons_table(arms, cfg, FAST).set_index("head_a")
    assert t.loc["plif", "verdict"] == "inconclusive" and t.loc["plif", "reason"].startswith("too few seeds")
    assert t.loc["mos", "reason"].startswith("runs failed") and t.loc["mos", "n_failed_a"] == 6
    assert t.loc["moc", "reason"].startswith("not run")
    assert t[["p_adj"]].loc[["plif", "mos", "moc"]].isna().all().all()
    assert (t["family_size"] == 2).all() and (t["family_dropped"] == 3).all()
    expected = multipletests(t.loc[["gss", "sigsoftmax"], "welch_p"], method="holm")[1]
    assert t.loc[["gss", "sigsoftmax"], "p_adj"].to_numpy() == pytest.approx(expected)
    assert (t["p_adj"].dropna() >= t["welch_p"][t["p_adj"].notna()]).all()


def test_equivalence_only_from_tost():
    a = list(exact_sample(57.0, 0.1, seed=1))
    arms = _arms(softmax=a, same=a, shifted=[v + 0.08 for v in a], far=[v + 1 for v in a])
    cfg = {"comparisons": [{"family": "f", "baseline": "softmax", "metrics": ["test_ppl"],
                            "against": ["same", "shifted", "far"], "equivalence_margin": 0.3}]}
    t = comparisons_table(arms, cfg, FAST).set_index("head_a")
    assert t.loc["same", "verdict"] == "equivalent"
    assert t.loc["far", "verdict"] == "b_better" and t.loc["far", "tost_p"] > 0.99
    cfg["comparisons"][0]["equivalence_margin"] = 0.05       # too tight for 10 seeds
    t = comparisons_table(arms, cfg, FAST).set_index("head_a")
    assert t.loc["shifted", "verdict"] == "inconclusive"
    assert t.loc["shifted", "reason"].startswith("underpowered")
    assert t.loc["shifted", "power"] < 0.8 and t.loc["shifted", "seeds_needed"] > 10
    del cfg["comparisons"][0]["equivalence_margin"]
    t = comparisons_table(arms, cfg, FAST).set_index("head_a")
    assert t.loc["same", "verdict"] == "inconclusive" and "no equivalence_margin" in t.loc["same", "reason"]
    assert math.isnan(t.loc["same", "power"])


def test_direction_effect_sizes_and_bootstrap_record():
    runs = _arms(softmax=list(exact_sample(57.0, 0.1, seed=1)), mos=list(exact_sample(56.0, 0.3, seed=2)))
    runs["press_rank"] = np.where(runs["head"] == "mos", 9000.0, 400.0) + np.arange(len(runs))
    cfg = {"comparisons": [{"family": "f", "baseline": "softmax", "against": ["mos"],
                            "metrics": ["test_ppl", "press_rank"], "family_by": ["metric"]}]}
    t = comparisons_table(runs, cfg, FAST).set_index("metric")
    assert t.loc["test_ppl", "verdict"] == "a_better" and t.loc["press_rank", "verdict"] == "a_better"
    assert not t.loc["press_rank", "lower_is_better"]
    assert set(t["family"]) == {"f[metric=test_ppl]", "f[metric=press_rank]"} and (t["family_size"] == 1).all()
    r = t.loc["test_ppl"]
    assert r.hedges_g_ci_low <= r.hedges_g <= r.hedges_g_ci_high < 0
    assert r.prob_superiority == 1.0 and r.prob_superiority_ci_low <= 1.0
    assert (r.bootstrap_seed, r.bootstrap_resamples) == (12345, 2000)
    again = comparisons_table(runs, cfg, FAST).set_index("metric")
    assert again.loc["test_ppl", "hedges_g_ci_low"] == r.hedges_g_ci_low   # seeded


def test_config_errors_are_one_line():
    runs = _arms(softmax=[1.0] * 5, plif=[2.0] * 5)
    with pytest.raises(AuditError, match=r"^config: config key comparisons\[0\]: Additional properties are not "
                                         r"allowed \('metric' was unexpected\)$"):
        comparisons_table(runs, {"comparisons": [{"family": "f", "pairs": [["plif", "softmax"]],
                                                  "metric": ["test_ppl"]}]}, FAST)
    with pytest.raises(AuditError, match="no metric column 'valid_ppl'"):
        comparisons_table(runs, {"comparisons": [{"family": "f", "pairs": [["plif", "softmax"]],
                                                  "metrics": ["valid_ppl"]}]}, FAST)
    with pytest.raises(AuditError, match="lower_is_better"):
        runs["n_params"] = 1.0
        comparisons_table(runs, {"comparisons": [{"family": "f", "pairs": [["plif", "softmax"]],
                                                  "metrics": ["n_params"]}]}, FAST)
    assert comparisons_table(runs, {}, FAST).columns.tolist() == COLUMNS


def test_against_patterns_expand_to_the_matching_heads_in_one_holm_family():
    runs = runs_from({("ptb", "softmax"): (57.08, 0.10), ("ptb", "gss_c0_k2"): (57.02, 0.13),
                      ("ptb", "gss_c-1_k2"): (56.9, 0.13), ("ptb", "mos"): (54.88, 0.26)})
    spec = {"family": "grid", "baseline": "softmax", "against": ["gss_*", "mos", "plif"], "metrics": ["test_ppl"]}
    t = comparisons_table(runs, {"comparisons": [spec]}, FAST)
    assert list(t.head_a) == ["gss_c-1_k2", "gss_c0_k2", "mos", "plif"] and set(t.head_b) == {"softmax"}
    run = t[t.head_a != "plif"]
    raw = [stats.ttest_ind(runs[runs["head"] == h].test_ppl, runs[runs["head"] == "softmax"].test_ppl,
                           equal_var=False).pvalue
           for h in run.head_a]
    assert np.allclose(run.p_adj, multipletests(raw, method="holm")[1])   # plif (not run) is left out of Holm


def test_a_pattern_matching_no_head_gives_a_not_run_row():
    # issue 20: a family never loses a declared name silently
    runs = runs_from({("ptb", "softmax"): (57.08, 0.10), ("ptb", "mos"): (54.88, 0.26)})
    spec = {"family": "f", "baseline": "softmax", "against": ["gss_*", "mos"], "metrics": ["test_ppl"]}
    t = comparisons_table(runs, {"comparisons": [spec]}, FAST)
    assert list(t.head_a) == ["gss_*", "mos"]
    assert t.reason.iloc[0] == "not run: no runs of gss_* in corpus 'ptb'"
    assert list(t.family_size) == [1, 1] and t.family_note.iloc[0] == "m = 1 defined Welch tests of 2 rows; dropped: 1 not run"



def test_a_column_measured_since_issue_24_absent_from_older_runs_gives_not_run_rows():
    # runs made before gradient_norm_share was measured: no error, no verdict; a typo still fails
    runs = runs_from({("ptb", "softmax"): (57.08, 0.10), ("ptb", "mos"): (54.88, 0.26)})
    spec = {"family": "g", "baseline": "softmax", "against": ["mos"], "metrics": ["gradient_norm_share"]}
    t = comparisons_table(runs, {"comparisons": [spec]}, FAST)
    assert t.verdict.tolist() == ["inconclusive"] and math.isnan(t.p_adj.iloc[0])
    assert t.reason.iloc[0] == ("not run: the runs table has no column 'gradient_norm_share' "
                                "(runs made before it was measured)")
    assert t.family_size.iloc[0] == 0 and t.n_a.iloc[0] == 0
    with pytest.raises(AuditError, match="no metric column 'logit_grad_shar'"):
        comparisons_table(runs, {"comparisons": [dict(spec, metrics=["logit_grad_shar"], lower_is_better=False)]}, FAST)

# ---------------------------------------------------------------- independent check against R
FIXTURES = Path(__file__).parents[1] / "fixtures"
KEYS = ["family", "corpus", "metric", "head_a", "head_b"]
# columns R computed (tests/fixtures/r_golden.R), compared where either side has a value: NaN
# must meet NaN, so an undefined test can never come back as a number
R_COLUMNS = ["n_a", "n_b", "n_failed_a", "n_failed_b", "n_missing_a", "n_missing_b", "welch_t", "welch_df",
             "welch_p", "diff_ci_low", "diff_ci_high", "student_p", "rank_test_p", "tost_p", "hedges_g",
             "prob_superiority", "power", "seeds_needed", "p_adj", "tost_p_adj", "family_size",
             "family_dropped", "ci_level", "tost_ci_low", "tost_ci_high", "tost_ci_level"]
DESCRIPTIVE = ["mean_a", "mean_b", "sd_a", "sd_b", "diff"]        # R leaves them empty for n < 2
REASON = {"welch": "welch p_adj", "tost": "tost p_adj", "undefined": "undefined: both arms constant",
          "not run": "not run", "runs failed": "runs failed", "too few seeds": "too few seeds",
          "underpowered": "underpowered", "no decision": "no decision", "not significant": "not significant"}


@pytest.fixture(scope="module")
def r_golden():
    cfg = yaml.safe_load((FIXTURES / "r_golden_study.yaml").read_text())
    runs = load_runs(FIXTURES / "r_golden_runs.csv")
    ours = comparisons_table(runs, cfg, Settings.from_config(cfg["stats"]))
    theirs = pd.read_csv(FIXTURES / "r_golden_comparisons.csv")
    return ours.merge(theirs, on=KEYS, how="outer", suffixes=("", "_r"), indicator=True), cfg, runs


def test_comparisons_agree_with_r(r_golden):
    """Unequal n, ties, failed runs, NaN metrics, constant arms (equal and different), a head
    missing from one corpus, four Holm families (one split by corpus), far-tail power."""
    both, _, _ = r_golden
    assert len(both) == 26 and (both["_merge"] == "both").all()
    for col in R_COLUMNS + DESCRIPTIVE:
        ours, theirs = both[col].astype(float), both[f"{col}_r"].astype(float)
        check = theirs.notna() if col in DESCRIPTIVE else theirs.notna() | ours.notna()
        for key, x, y in zip(both[KEYS].itertuples(index=False), ours[check], theirs[check]):
            assert x == pytest.approx(y, rel=1e-8, abs=1e-13, nan_ok=True), (col, tuple(key))
    assert (both["verdict"] == both["verdict_r"]).all()
    for reason, kind in zip(both["reason"], both["reason_kind"]):
        assert reason.startswith(REASON[kind]), (reason, kind)
    # the cases the table got wrong before: 5 undefined rows, far-tail power 1.0 in family wide
    assert (both["reason_kind"] == "undefined").sum() == 5
    assert np.allclose(both.loc[both.family == "wide", "power"], 1.0, rtol=0, atol=1e-9)


def test_undefined_rows_report_no_number_that_was_not_computed(r_golden):
    both, _, _ = r_golden
    undefined = both[both["reason"].str.startswith("undefined")]
    for col in ("welch_t", "welch_df", "welch_p", "diff_ci_low", "diff_ci_high", "student_p", "p_adj",
                "hedges_g", "hedges_g_ci_low", "hedges_g_ci_high", "tost_p", "tost_p_adj", "power",
                "seeds_needed"):
        assert undefined[col].isna().all(), col
    assert (undefined["verdict"] == "inconclusive").all() and (undefined[["sd_a", "sd_b"]] == 0).all().all()
    # defined without an SD: means, diff, P(A better) with its (degenerate) bootstrap CI; the rank
    # test unless every value is tied
    different = undefined[undefined["mean_a"] != undefined["mean_b"]]
    assert len(different) == 2 and different["rank_test_p"].notna().all()
    assert (different["prob_superiority"] == 1.0).all() and (different["prob_superiority_ci_low"] == 1.0).all()
    assert undefined.loc[undefined["mean_a"] == undefined["mean_b"], "rank_test_p"].isna().all()
    # the family counts only the defined tests: ranks has 8 rows, 4 defined
    ranks = both[both.family == "ranks"]
    assert (ranks["family_size"] == 4).all() and (ranks["family_dropped"] == 4).all()
    defined = ranks[ranks["welch_p"].notna()]
    assert defined["p_adj"].to_numpy() == pytest.approx(multipletests(defined["welch_p"], method="holm")[1])
    # no reason anywhere prints an undefined number
    assert not both["reason"].str.contains(r"\bnan\b|\binf\b", case=False).any()


def test_claims_resting_on_an_undefined_row_stay_inconclusive(r_golden):
    _, cfg, runs = r_golden
    cfg = dict(cfg, claims=[
        {"id": "mos-rank", "source": "t", "comparison": {"head_a": "mos", "head_b": "softmax",
                                                         "metric": "press_rank"}, "expect": "higher"},
        {"id": "frozen-same", "source": "t", "comparison": {"head_a": "frozen2", "head_b": "frozen",
                                                            "metric": "test_ppl"}, "expect": "equivalent",
         "corpora": ["wt2"]},
        {"id": "own", "source": "t", "comparison": {"head_a": "mos", "head_b": "plif", "metric": "press_rank"},
         "expect": "higher", "equivalence_margin": 5}])
    settings = Settings.from_config(cfg["stats"])
    table = comparisons_table(runs, cfg, settings)
    claims = claims_table(runs, cfg, settings, table, None).set_index(["claim_id", "corpus"])
    for key in [("mos-rank", "ptb"), ("mos-rank", "wt2"), ("frozen-same", "wt2"), ("own", "ptb"), ("own", "wt2")]:
        row = claims.loc[key]
        assert row.verdict == "inconclusive" and row.reason.startswith("undefined: both arms constant"), key
        assert np.isnan(row.p) and np.isnan(row.p_adj) and np.isnan(row.power), key
    # the claim-only family "claims" holds no defined test: size 0, nothing adjusted
    assert "(m = 0 defined Welch tests of 2 rows; dropped: 2 undefined)" in claims.loc[("own", "ptb"), "p_name"]


def test_constant_float_arms_are_undefined_not_a_huge_t():
    """0.1 repeated has a rounding-noise variance (about 1e-34), where SciPy gives t of 1e16."""
    runs = _arms(softmax=[0.1] * 6, plif=[0.2] * 6, gss=list(exact_sample(0.15, 0.01, seed=3)))
    runs["wordsim_x"] = runs["test_ppl"]
    cfg = {"comparisons": [{"family": "f", "baseline": "softmax", "against": ["plif", "gss"],
                            "metrics": ["wordsim_x"], "equivalence_margin": 0.05}]}
    t = comparisons_table(runs, cfg, FAST).set_index("head_a")
    assert t.loc["plif", "sd_a"] == 0.0 and t.loc["plif", "sd_b"] == 0.0
    assert t.loc["plif", ["welch_t", "welch_p", "hedges_g", "hedges_g_ci_low", "power"]].isna().all()
    assert t.loc["plif", "reason"].startswith("undefined: both arms constant at different values")
    assert (t["family_size"] == 1).all() and (t["family_dropped"] == 1).all()
    assert t.loc["gss", "p_adj"] == t.loc["gss", "welch_p"]          # a family of one
