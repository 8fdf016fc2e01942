"""Two-sample tests, effect sizes, TOST and power against SciPy/statsmodels golden values."""

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.meta_analysis import effectsize_smd
from statsmodels.stats.power import TTestIndPower
from statsmodels.stats.weightstats import ttost_ind

from audit.stats import tests as T


@pytest.fixture
def samples():
    rng = np.random.default_rng(7)
    return rng.normal(57.0, 0.1, 10), rng.normal(57.2, 0.2, 12)


def test_welch_and_student_match_scipy(samples):
    a, b = samples
    w = T.welch(a, b, 0.95)
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert w["p"] == pytest.approx(ref.pvalue, rel=1e-12)
    assert w["t"] == pytest.approx(ref.statistic, rel=1e-12)
    # Welch-Satterthwaite df, written out independently
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    assert w["df"] == pytest.approx(df, rel=1e-10)
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    assert (w["ci_low"], w["ci_high"]) == pytest.approx((a.mean() - b.mean() - half, a.mean() - b.mean() + half))
    assert T.student_p(a, b) == pytest.approx(stats.ttest_ind(a, b).pvalue, rel=1e-12)


def test_welch_undefined_for_constant_arms():
    assert math.isnan(T.welch(np.ones(5), np.ones(5))["p"])
    assert math.isnan(T.welch(np.ones(1), np.ones(5))["p"])


def test_rank_test_exact_under_separation():
    a, b = np.arange(10.0), np.arange(10.0) + 100
    # exact two-sided p for complete separation of 10 vs 10 is 2 / C(20, 10)
    assert T.rank_test_p(a, b) == pytest.approx(2 / math.comb(20, 10), rel=1e-9)
    c = np.array([1.0, 1, 2, 3, 4]); d = np.array([2.0, 5, 6, 6, 7])  # ties: asymptotic
    assert T.rank_test_p(c, d) == pytest.approx(
        stats.mannwhitneyu(c, d, method="asymptotic").pvalue, rel=1e-12)


def test_hedges_g_matches_statsmodels(samples):
    a, b = samples
    g_ref, _ = effectsize_smd(a.mean(), a.std(ddof=1), len(a), b.mean(), b.std(ddof=1), len(b))
    assert float(T.hedges_g(a, b)) == pytest.approx(g_ref, rel=1e-12)
    stacked = T.hedges_g(np.stack([a, a + 1]), np.stack([b, b]))  # leading resample axis
    assert stacked.shape == (2,)
    assert stacked[0] == pytest.approx(g_ref)


def test_prob_superiority_is_oriented_u_statistic(samples):
    a, b = samples
    u = stats.mannwhitneyu(a, b).statistic  # U of a: #(a > b) + ties / 2
    assert float(T.prob_superiority(a, b, lower_is_better=False)) == pytest.approx(u / (len(a) * len(b)))
    assert float(T.prob_superiority(a, b, lower_is_better=True)) == pytest.approx(1 - u / (len(a) * len(b)))
    assert float(T.prob_superiority(np.ones(3), np.ones(4), True)) == 0.5


def test_tost_identical_is_equivalent_and_shifted_is_not():
    rng = np.random.default_rng(3)
    a = rng.normal(0, 0.1, 10)
    assert T.tost_p(a, a.copy(), 0.2) < 0.01
    assert T.tost_p(a, a + 1.0, 0.2) > 0.99
    b = rng.normal(0.05, 0.15, 10)
    ref = ttost_ind(a, b, -0.2, 0.2, usevar="unequal")[0]
    assert T.tost_p(a, b, 0.2) == pytest.approx(ref)
    assert math.isnan(T.tost_p(a, b, float("nan")))


def test_power_and_seeds_needed_match_statsmodels():
    power = TTestIndPower()
    es = 0.2 / math.sqrt((0.1 ** 2 + 0.3 ** 2) / 2)
    assert T.power_at_margin(0.1, 0.3, 10, 10, 0.2, 0.05) == pytest.approx(power.power(es, 10, 0.05))
    n = T.seeds_needed(0.1, 0.3, 0.2, 0.05, 0.8)
    assert n == math.ceil(power.solve_power(es, power=0.8, alpha=0.05))
    # n is the smallest size that reaches the target
    assert power.power(es, n, 0.05) >= 0.8 > power.power(es, n - 1, 0.05)
    assert T.seeds_needed(0.01, 0.01, 1.0, 0.05, 0.8) == 2
    assert math.isnan(T.seeds_needed(0.1, 0.1, float("nan"), 0.05, 0.8))
