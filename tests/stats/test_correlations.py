"""Correlations table: golden values from SciPy and statsmodels, levels, post hoc windows."""

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats

from audit.errors import AuditError
from audit.stats.correlations import (COLUMNS, correlate, correlations_table, family_of, fisher_ci,
                                      partial_p)
from audit.stats.io import Settings

FAST = Settings(bootstrap_resamples=2000)


@pytest.fixture
def runs():
    rng = np.random.default_rng(4)
    rows = []
    for h, (rank, ppl) in {"softmax": (400, 57.1), "sigsoftmax": (5000, 57.0), "gss": (9000, 57.0),
                           "plif": (500, 56.8), "mos": (9980, 54.9)}.items():
        for s in range(8):
            r = rank + rng.normal(0, 60)
            rows.append(dict(corpus="ptb", head=h, seed=str(s), status="ok", press_rank=r,
                             test_ppl=ppl - 2e-5 * (r - rank) + rng.normal(0, 0.1)))
    rows.append(dict(corpus="ptb", head="mos", seed="9", status="failed", press_rank=1.0, test_ppl=np.nan))
    return pd.DataFrame(rows)


def test_run_level_matches_scipy(runs):
    spec = {"name": "c", "x": "press_rank", "y": "test_ppl"}
    t = correlations_table(runs, {"correlations": [spec]}, FAST)
    assert list(t.columns) == COLUMNS
    row = t[t.level == "runs"].iloc[0]
    ok = runs[runs.status == "ok"]
    ref = stats.pearsonr(ok.press_rank, ok.test_ppl)
    assert (row.n, row.n_excluded, row.post_hoc) == (40, 1, False)
    assert row.pearson_r == pytest.approx(ref.statistic) and row.pearson_p == pytest.approx(ref.pvalue)
    ci = ref.confidence_interval(0.95)                     # SciPy's CI is the Fisher-z one
    assert (row.pearson_ci_low, row.pearson_ci_high) == pytest.approx((ci.low, ci.high))
    sp = stats.spearmanr(ok.press_rank, ok.test_ppl)
    assert row.spearman_rho == pytest.approx(sp.statistic) and row.spearman_p == pytest.approx(sp.pvalue)
    assert row.pearson_perm_p == pytest.approx(ref.pvalue, abs=0.02) or ref.pvalue < 1e-3 > row.pearson_perm_p


def test_head_means_level(runs):
    t = correlations_table(runs, {"correlations": [{"name": "c", "x": "press_rank", "y": "test_ppl"}]}, FAST)
    row = t[t.level == "head_means"].iloc[0]
    means = runs[runs.status == "ok"].groupby("head")[["press_rank", "test_ppl"]].mean()
    assert row.n == 5
    assert row.pearson_r == pytest.approx(stats.pearsonr(means.press_rank, means.test_ppl).statistic)
    # two-sided as P(|r*| >= |r|) (SciPy's default doubles the smaller tail instead)
    exact = stats.permutation_test((means.test_ppl.to_numpy(),),
                                   lambda v: abs(stats.pearsonr(means.press_rank, v).statistic),
                                   permutation_type="pairings", alternative="greater").pvalue
    assert row.pearson_perm_p == pytest.approx(exact)        # 5! < resamples: enumerated exactly


def test_partial_correlation_equals_ols_with_family_dummies(runs):
    fams = {"softmax-like": ["softmax", "sigsoftmax", "gss", "plif"]}
    t = correlations_table(runs, {"correlations": [
        {"name": "c", "x": "press_rank", "y": "test_ppl", "families": fams}]}, FAST)
    row = t[t.level == "partial_family"].iloc[0]
    ok = runs[runs.status == "ok"]
    dummy = (ok["head"] == "mos").astype(float).to_numpy()
    fit = sm.OLS(ok.test_ppl.to_numpy(), sm.add_constant(np.column_stack([ok.press_rank, dummy]))).fit()
    assert row.pearson_p == pytest.approx(fit.pvalues[1], rel=1e-8)
    # the partial r from residuals of both variables on the family dummy
    rx = sm.OLS(ok.press_rank.to_numpy(), sm.add_constant(dummy)).fit().resid
    ry = sm.OLS(ok.test_ppl.to_numpy(), sm.add_constant(dummy)).fit().resid
    assert row.pearson_r == pytest.approx(stats.pearsonr(rx, ry).statistic)
    assert row.n_families == 2 and "mos" in row.controls
    lo, hi = fisher_ci(row.pearson_r, 40, 0.95, n_controls=1)
    assert (row.pearson_ci_low, row.pearson_ci_high) == pytest.approx((lo, hi))


def test_partial_p_and_fisher_ci_edge_cases():
    assert np.isnan(partial_p(0.5, 3, 1)) and partial_p(1.0, 10, 0) == 0.0
    assert all(np.isnan(fisher_ci(0.5, 3, 0.95)))
    lo, hi = fisher_ci(0.5, 20, 0.95, spearman=True)
    wide = fisher_ci(0.5, 20, 0.95)
    assert lo < wide[0] and hi > wide[1]                    # 1.06 inflation for Spearman


def test_window_rows_are_post_hoc_and_beside_unrestricted(runs):
    spec = {"name": "c", "x": "press_rank", "y": "test_ppl",
            "windows": [{"column": "test_ppl", "min": 56.5, "max": 57.6}]}
    t = correlations_table(runs, {"correlations": [spec]}, FAST)
    assert len(t) == 6 and t.post_hoc.sum() == 3
    w = t[t.post_hoc & (t.level == "runs")].iloc[0]
    inside = runs[(runs.status == "ok") & runs.test_ppl.between(56.5, 57.6)]
    assert w.n == len(inside) and w.n_outside_window == 40 - len(inside)
    assert w.restriction == "test_ppl in [56.5, 57.6]"
    assert w.pearson_r == pytest.approx(stats.pearsonr(inside.press_rank, inside.test_ppl).statistic)


def test_degenerate_inputs_give_nan_with_note():
    out = correlate(np.array([1.0, 2.0]), np.array([3.0, 1.0]), FAST)
    assert np.isnan(out["pearson_r"]) and "too few points" in out["note"]
    out = correlate(np.arange(6.0), np.ones(6), FAST)
    assert np.isnan(out["pearson_r"]) and "constant" in out["note"]


def test_family_default_and_errors(runs):
    assert family_of("mos_uniform", None) == "mos" and family_of("plif", {"x": ["plif"]}) == "x"
    families = {"dl-0.29": ["*_dropoutl0.29"], "dl-0": ["*_dropoutl0"]}
    assert family_of("mos_experts3_dropoutl0.29", families) == "dl-0.29"
    assert family_of("mos_experts3_dropoutl0", families) == "dl-0" and family_of("gss_c0", families) == "gss"
    with pytest.raises(AuditError, match="no metric column 'erank_1e-3'"):
        correlations_table(runs, {"correlations": [{"name": "c", "x": "erank_1e-3", "y": "test_ppl"}]}, FAST)
    with pytest.raises(AuditError, match="unknown key 'window'"):
        correlations_table(runs, {"correlations": [{"name": "c", "x": "press_rank", "y": "test_ppl",
                                                    "window": []}]}, FAST)
    assert correlations_table(runs, {}, FAST).empty


def test_head_patterns_and_window_relative_to_the_best_run(runs):
    spec = {"name": "c", "x": "press_rank", "y": "test_ppl", "heads": ["s*", "gss"],
            "windows": [{"column": "test_ppl", "width_from_min": 0.2}]}
    t = correlations_table(runs, {"correlations": [spec]}, FAST)
    sel = runs[runs["head"].isin(["softmax", "sigsoftmax", "gss"])]
    full = t[~t.post_hoc & (t.level == "runs")].iloc[0]
    assert full.n == len(sel) and full.n_heads == 3
    low = sel.test_ppl.min()
    inside = sel[sel.test_ppl <= low + 0.2]
    w = t[t.post_hoc & (t.level == "runs")].iloc[0]
    assert w.n == len(inside) and w.n_outside_window == len(sel) - len(inside)
    assert w.restriction == f"test_ppl in [{low:.6g}, {low + 0.2:.6g}] (lowest + 0.2)"
    with pytest.raises(AuditError, match="width_from_min must be a positive number"):
        correlations_table(runs, {"correlations": [{**spec, "windows": [{"column": "test_ppl", "width_from_min": 1,
                                                                          "max": 3}]}]}, FAST)
