"""Correlations table: golden values from SciPy and statsmodels, levels, post hoc windows."""

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import yaml
from scipy import stats

from audit.errors import AuditError
from audit.stats.correlations import (COLUMNS, center_within, correlate, correlations_table, family_of,
                                      fisher_ci, partial_p)
from audit.stats.io import Settings, load_runs
from audit.stats.resample import all_orderings, n_orderings

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


def _pearson(x, y):
    """Pearson r written out (np.corrcoef), its t-test p on n - 2 df and the Fisher-z 95% CI:
    a second method beside the SciPy calls the module makes."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n, r = len(x), np.corrcoef(x, y)[0, 1]
    p = 2 * stats.t.sf(abs(r) * np.sqrt((n - 2) / (1 - r * r)), n - 2)
    half = stats.norm.ppf(0.975) / np.sqrt(n - 3)
    return r, p, (np.tanh(np.arctanh(r) - half), np.tanh(np.arctanh(r) + half))


def test_run_level_matches_the_formulas(runs):
    spec = {"name": "c", "x": "press_rank", "y": "test_ppl"}
    t = correlations_table(runs, {"correlations": [spec]}, FAST)
    assert list(t.columns) == COLUMNS
    row = t[t.level == "runs"].iloc[0]
    ok = runs[runs.status == "ok"]
    r, p, ci = _pearson(ok.press_rank, ok.test_ppl)
    assert (row.n, row.n_excluded, row.post_hoc) == (40, 1, False)
    # the formulas and the module's SciPy route agree to ~1e-12: pytest.approx's rel=1e-6 is ample
    assert row.pearson_r == pytest.approx(r) and row.pearson_p == pytest.approx(p)
    assert (row.pearson_ci_low, row.pearson_ci_high) == pytest.approx(ci)
    # Spearman = Pearson of average ranks; n = 40 > 9: the t approximation
    rho, p_rho, _ = _pearson(stats.rankdata(ok.press_rank), stats.rankdata(ok.test_ppl))
    assert row.spearman_rho == pytest.approx(rho) and row.spearman_p == pytest.approx(p_rho)
    assert row.pearson_perm_p == pytest.approx(p, abs=0.02) or p < 1e-3 > row.pearson_perm_p


def test_head_means_level(runs):
    t = correlations_table(runs, {"correlations": [{"name": "c", "x": "press_rank", "y": "test_ppl"}]}, FAST)
    row = t[t.level == "head_means"].iloc[0]
    means = runs[runs.status == "ok"].groupby("head")[["press_rank", "test_ppl"]].mean()
    assert row.n == 5
    assert row.pearson_r == pytest.approx(_pearson(means.press_rank, means.test_ppl)[0])
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
    assert row.pearson_r == pytest.approx(_pearson(rx, ry)[0])
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
    assert w.pearson_r == pytest.approx(_pearson(inside.press_rank, inside.test_ppl)[0])


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
    with pytest.raises(AuditError, match=r"^config: config key correlations\[0\]: Additional properties are not "
                                         r"allowed \('window' was unexpected\)$"):
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
    with pytest.raises(AuditError, match=r"^config: config key correlations\[0\]\.windows\[0\]: give 'min' and/or "
                                         r"'max', or else a positive 'width_from_min' alone$"):
        correlations_table(runs, {"correlations": [{**spec, "windows": [{"column": "test_ppl", "width_from_min": 1,
                                                                          "max": 3}]}]}, FAST)


# ---------------------------------------------------------------- independent check against R
FIXTURES = Path(__file__).parents[1] / "fixtures"


def test_correlations_agree_with_r():
    """Runs, head means (n = 6, tied x: plif and softmax share press_rank 400) and the family
    partial, two corpora, failed runs and NaN metrics excluded; R: cor.test, lm with family
    dummies, exact permutation p by enumeration (tests/fixtures/r_golden.R)."""
    cfg = yaml.safe_load((FIXTURES / "r_golden_study.yaml").read_text())
    runs = load_runs(FIXTURES / "r_golden_runs.csv")
    ours = correlations_table(runs, cfg, Settings.from_config(cfg["stats"]))
    theirs = pd.read_csv(FIXTURES / "r_golden_correlations.csv")
    both = ours.merge(theirs, on=["corpus", "level"], suffixes=("", "_r"))
    assert len(both) == 6
    for col in [c for c in theirs.columns if c not in ("corpus", "level")]:
        check = both[f"{col}_r"].notna()
        assert check.any(), col
        assert both.loc[check, col].to_numpy(float) == pytest.approx(both.loc[check, f"{col}_r"].to_numpy(float),
                                                                     rel=1e-8, abs=1e-14), col
    means = both[both.level == "head_means"]
    assert (means["n"] == 6).all() and means["p_method"].str.contains("spearman: exact permutation").all()


SPEARMAN = pd.read_csv(FIXTURES / "r_golden_spearman.csv")


@pytest.mark.parametrize("case", SPEARMAN.to_dict("records"), ids=lambda c: f"n{c['n']}-ties{c['ties']}")
def test_spearman_p_is_exact_for_small_n(case):
    """R: exact_perm_p by enumeration, and cor.test(exact = TRUE) where there are no ties."""
    x = np.array(case["x"].split(";"), float)
    y = np.array(case["y"].split(";"), float)
    out = correlate(x, y, FAST)
    assert out["spearman_rho"] == pytest.approx(case["rho"], rel=1e-12)
    assert out["spearman_p"] == pytest.approx(case["exact_p"], rel=1e-9)
    if not case["ties"]:
        assert out["spearman_p"] == pytest.approx(min(1.0, case["cor_test_exact_p"]), rel=1e-9)


def test_spearman_exact_p_at_n5_is_not_the_t_approximation():
    x, y = np.arange(1.0, 6.0), np.array([1.0, 2, 3, 5, 4])        # rho = 0.9
    out = correlate(x, y, FAST)
    assert out["spearman_p"] == pytest.approx(10 / 120)            # P(|rho*| >= 0.9): 10 of 5! orderings
    assert stats.spearmanr(x, y).pvalue == pytest.approx(0.0374, abs=5e-5)   # what it used to report
    many = correlate(np.arange(10.0), np.arange(10.0) ** 1.1 + np.sin(np.arange(10.0)), FAST)
    assert many["spearman_p"] == pytest.approx(stats.spearmanr(np.arange(10.0), np.arange(10.0) ** 1.1
                                                               + np.sin(np.arange(10.0))).pvalue)


def test_small_partial_is_exact_within_families():
    """Brute force: all 8! orderings of y, kept when each position stays in its family."""
    x = np.array([1.0, 2.5, 2.0, 4.0, 3.0, 6.5, 5.0, 7.0])
    y = np.array([1.2, 1.0, 2.8, 3.1, 2.0, 5.5, 6.1, 4.0])
    fam = np.array(["a", "a", "a", "b", "b", "b", "b", "c"], dtype=object)
    out = correlate(x, y, FAST, strata=fam)
    xc = center_within(x, fam)
    r0 = stats.pearsonr(xc, center_within(y, fam)).statistic
    hits = total = 0
    for perm in itertools.permutations(range(8)):
        if all(fam[i] == fam[j] for i, j in enumerate(perm)):
            total += 1
            hits += abs(stats.pearsonr(xc, center_within(y[list(perm)], fam)).statistic) >= abs(r0) - 1e-12
    assert total == 3 * 2 * 24 == n_orderings(fam, 8)
    assert out["pearson_perm_p"] == pytest.approx(hits / total)   # 144 <= resamples: enumerated
    rx, ry = center_within(stats.rankdata(x), fam), center_within(stats.rankdata(y), fam)
    rho0 = stats.pearsonr(rx, ry).statistic
    exact = np.mean([abs(stats.pearsonr(rx, center_within(stats.rankdata(y)[list(p)], fam)).statistic)
                     >= abs(rho0) - 1e-12 for p in itertools.permutations(range(8))
                     if all(fam[i] == fam[j] for i, j in enumerate(p))])
    assert out["spearman_p"] == pytest.approx(exact) and out["spearman_perm_p"] == out["spearman_p"]


def test_all_orderings_enumerates_each_once():
    fam = np.array([0, 1, 0, 1, 1])
    rows = np.concatenate(list(all_orderings(fam, 5, chunk=5)))
    assert len(rows) == n_orderings(fam, 5) == 12 and len({tuple(r) for r in rows}) == 12
    assert (fam[rows] == fam).all()                                 # nobody leaves their stratum
    assert (rows[0] == np.arange(5)).all()
    assert n_orderings(None, 6) == 720


def test_variable_constant_within_every_family_has_no_partial_correlation():
    """Centring leaves rounding noise (1e-16), not zeros; a correlation of noise is not reported."""
    x = np.array([0.1, 0.1, 0.1, 0.7, 0.7, 0.7])
    y = np.array([1.0, 2.0, 3.5, 1.5, 2.2, 3.0])
    out = correlate(x, y, FAST, strata=np.array(["a"] * 3 + ["b"] * 3, dtype=object))
    assert np.isnan(out["pearson_r"]) and np.isnan(out["pearson_perm_p"]) and "within every family" in out["note"]
