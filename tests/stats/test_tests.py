"""Two-sample tests, effect sizes and TOST against R's t.test / wilcox.test golden values
(tests/fixtures/r_golden.R: the module calls SciPy and statsmodels, so those are no reference);
undefined cases (both arms constant) stay undefined. Power: test_power.py; whole tables:
test_comparisons.py."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.meta_analysis import effectsize_smd

from audit.stats import tests as T
from helpers import r_two_sample

# R prints 15 significant digits; the same t and df through another library's t distribution
# agree to about 1e-12 relative, so rel=1e-9 leaves room for both and fails on any real error
R_REL = 1e-9


@pytest.fixture
def samples():
    rng = np.random.default_rng(7)
    return rng.normal(57.0, 0.1, 10), rng.normal(57.2, 0.2, 12)


@pytest.mark.parametrize("case", ["unequal_n", "unequal_sd", "ties", "exact_summaries"])
def test_welch_student_and_tost_match_r(case):
    a, b, r = r_two_sample(case)
    w = T.welch(a, b, 0.95)
    for key, col in (("t", "welch_t"), ("df", "welch_df"), ("p", "welch_p"), ("ci_low", "ci_low"),
                     ("ci_high", "ci_high")):
        assert w[key] == pytest.approx(r[col], rel=R_REL)
    assert T.student_p(a, b) == pytest.approx(r.student_p, rel=R_REL)
    assert T.tost_p(a, b, r.margin) == pytest.approx(r.tost_p, rel=R_REL)


def test_welch_df_and_ci_written_out(samples):
    a, b = samples
    w = T.welch(a, b, 0.95)
    # Welch-Satterthwaite df, written out independently
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    assert w["df"] == pytest.approx(df, rel=1e-10)
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    assert (w["ci_low"], w["ci_high"]) == pytest.approx((a.mean() - b.mean() - half, a.mean() - b.mean() + half))


def test_welch_undefined_for_constant_arms():
    assert math.isnan(T.welch(np.ones(5), np.ones(5))["p"])
    assert math.isnan(T.welch(np.ones(1), np.ones(5))["p"])


# 0.1 and 0.2 repeated: their mean is not exactly 0.1 / 0.2 in floating point, so np.var gives
# rounding noise instead of 0 and SciPy returns a finite t of about 1e16 rather than inf
@pytest.mark.parametrize("a, b", [(np.full(6, 3.0), np.full(5, 5.0)), (np.full(10, 0.1), np.full(7, 0.2)),
                                  (np.full(5, 400.0), np.full(5, 400.0))])
def test_both_arms_constant_is_undefined_in_every_sd_based_column(a, b):
    """SciPy's fallback is t = inf, df = 1, p = 0: a "certain" difference from no information."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        scipy_fallback = stats.ttest_ind(a, b, equal_var=False).pvalue
    assert scipy_fallback < 1e-10 or a[0] == b[0]          # what the table used to report
    assert T.undefined_reason(a, b).startswith("undefined: both arms constant")
    assert all(math.isnan(v) for v in T.welch(a, b).values())
    assert math.isnan(T.student_p(a, b)) and math.isnan(T.tost_p(a, b, 0.5))
    assert math.isnan(float(T.hedges_g(a, b)))
    # the rank test and P(A > B) do not divide by an SD: defined unless every value is tied
    if a[0] == 3.0:                                    # R: wilcox.test(rep(3, 6), rep(5, 5))
        assert T.rank_test_p(a, b) == pytest.approx(r_two_sample("both_constant")[2].rank_p, rel=R_REL)
    if a[0] != b[0]:
        assert float(T.prob_superiority(a, b, lower_is_better=True)) == float(a[0] < b[0])
    else:
        assert math.isnan(T.rank_test_p(a, b))       # zero tie-corrected variance (R: NaN too)
        assert float(T.prob_superiority(a, b, lower_is_better=True)) == 0.5


def test_one_constant_arm_is_defined():
    a, b, r = r_two_sample("one_constant")
    assert T.undefined_reason(a, b) == ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)    # SciPy's note on the constant arm
        w = T.welch(a, b)
        assert w["p"] == pytest.approx(r.welch_p, rel=R_REL)
        assert w["df"] == pytest.approx(len(b) - 1) == pytest.approx(r.welch_df)   # all the variance is b's
        assert T.student_p(a, b) == pytest.approx(r.student_p, rel=R_REL)
        assert T.tost_p(a, b, r.margin) == pytest.approx(r.tost_p, rel=R_REL)
        assert T.rank_test_p(a, b) == pytest.approx(r.rank_p, rel=R_REL)
    assert np.isfinite(float(T.hedges_g(a, b)))


def test_hedges_g_bootstrap_rows_with_both_arms_constant_are_nan():
    a = np.array([[0.1] * 5, [0.1, 0.2, 0.1, 0.1, 0.3]])
    b = np.array([[0.3] * 4, [0.3] * 4])
    g = T.hedges_g(a, b)
    assert math.isnan(g[0]) and np.isfinite(g[1])


def test_rank_test_exact_under_separation():
    a, b = np.arange(10.0), np.arange(10.0) + 100
    # exact two-sided p for complete separation of 10 vs 10 is 2 / C(20, 10)
    assert T.rank_test_p(a, b) == pytest.approx(2 / math.comb(20, 10), rel=1e-9)
    # no ties, n < 50: exact, as R's wilcox.test; ties: normal with continuity correction
    for case in ("unequal_n", "unequal_sd", "ties"):
        c, d, r = r_two_sample(case)
        assert T.rank_test_p(c, d) == pytest.approx(r.rank_p, rel=R_REL)


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
    assert math.isnan(T.tost_p(a, a + 0.1, float("nan")))   # R values: test_welch_student_and_tost_match_r


def test_rank_test_with_ties_carries_a_continuity_correction():
    c, d, r = r_two_sample("ties")
    assert T.rank_test_p(c, d) == pytest.approx(r.rank_p_normal_cc, rel=R_REL)
    assert r.rank_p_normal_cc != pytest.approx(r.rank_p_normal, rel=0.05)   # the correction matters here


def test_hedges_factor_is_the_approximation_of_the_exact_gamma_ratio():
    # exact J(m) = Gamma(m/2) / (sqrt(m/2) Gamma((m-1)/2)), m = n_a + n_b - 2 (Hedges 1981);
    # hand-worked approximation at n_a + n_b = 10: 1 - 3/31 = 28/31
    from scipy.special import gammaln
    assert T.hedges_factor(4, 6) == pytest.approx(28 / 31, rel=1e-15)
    for n in (6, 10, 20):
        m = n - 2
        exact = math.exp(gammaln(m / 2) - 0.5 * math.log(m / 2) - gammaln((m - 1) / 2))
        assert 0 < T.hedges_factor(n // 2, n - n // 2) / exact - 1 < {6: 2.7e-3, 10: 5.8e-4, 20: 1.1e-4}[n]
