"""Comparisons table: the LK papers' published p-values, exclusions, Holm families, verdicts."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from audit.errors import AuditError
from audit.stats.comparisons import COLUMNS, comparisons_table
from audit.stats.io import Settings

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
    with pytest.raises(AuditError, match="unknown key 'metric'"):
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
