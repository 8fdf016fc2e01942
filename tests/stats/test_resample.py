"""Seeded bootstrap and permutation helpers: determinism, shapes, and agreement with SciPy."""

import math

import numpy as np
import pytest
from scipy import stats

from audit.stats import resample as R


def _diff(a, b):
    return a.mean(axis=-1) - b.mean(axis=-1)


def test_bootstrap_is_seeded_and_stratified():
    a, b = np.arange(10.0), np.arange(7.0) + 3
    x = R.bootstrap_two_sample(a, b, _diff, 500, np.random.default_rng(1))
    y = R.bootstrap_two_sample(a, b, _diff, 500, np.random.default_rng(1))
    assert x.shape == (500,) and np.array_equal(x, y)
    sizes = R.bootstrap_two_sample(a, b, lambda u, v: np.stack([np.full(len(u), u.shape[1]),
                                                                  np.full(len(v), v.shape[1])], 1),
                                   10, np.random.default_rng(0))
    assert sizes.shape == (10, 2) and (sizes == [10, 7]).all()   # arms keep their sizes


def test_bootstrap_mean_diff_ci_close_to_scipy_percentile():
    rng = np.random.default_rng(5)
    a, b = rng.normal(0, 1, 30), rng.normal(1, 1, 30)
    ours = R.percentile_ci(R.bootstrap_two_sample(a, b, _diff, 4000, np.random.default_rng(2)), 0.95)
    ref = stats.bootstrap((a, b), lambda u, v, axis: u.mean(axis) - v.mean(axis), n_resamples=4000,
                          method="percentile", rng=np.random.default_rng(3)).confidence_interval
    assert ours == pytest.approx((ref.low, ref.high), abs=0.08)  # Monte-Carlo error only


def test_percentile_ci_ignores_nan_and_gives_up_when_mostly_nan():
    s = np.r_[np.arange(100.0), np.nan]
    assert R.percentile_ci(s, 0.9) == pytest.approx(tuple(np.percentile(np.arange(100.0), [5, 95])))
    assert all(math.isnan(v) for v in R.percentile_ci(np.r_[1.0, np.full(5, np.nan)], 0.9))


def test_permute_within_strata_keeps_strata():
    strata = np.array(list("aabbbcc"))
    idx = R.permute_within(strata, 7, 50, np.random.default_rng(0))
    assert idx.shape == (50, 7)
    assert (strata[idx] == strata).all()
    assert (np.sort(idx, axis=1) == np.arange(7)).all()


def test_exact_permutation_matches_scipy():
    x = np.array([1.0, 2.0, 3.5, 4.0, 5.5, 6.0])
    y = np.array([2.1, 1.9, 3.0, 5.2, 4.8, 6.1])
    ours = R.permutation_p(x, y, R.rowwise_corr, 10000, np.random.default_rng(0))
    # one sample with "pairings": SciPy permutes y against the fixed x, 6! = 720 orders (exact)
    ref = stats.permutation_test((y,), lambda v, axis=-1: np.abs(R.rowwise_corr(x, v)),
                                 permutation_type="pairings", n_resamples=10000, vectorized=True,
                                 alternative="greater").pvalue
    assert ours == pytest.approx(ref)


def test_monte_carlo_permutation_close_to_analytic():
    rng = np.random.default_rng(11)
    x = rng.normal(size=40)
    y = 0.3 * x + rng.normal(size=40)
    ours = R.permutation_p(x, y, R.rowwise_corr, 4000, np.random.default_rng(1))
    assert ours == pytest.approx(stats.pearsonr(x, y).pvalue, abs=0.02)
    assert R.permutation_p(x, x, R.rowwise_corr, 999, np.random.default_rng(1)) == pytest.approx(1 / 1000)


def test_rowwise_corr():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=9), rng.normal(size=(3, 9))
    r = R.rowwise_corr(x, y)
    assert r == pytest.approx([stats.pearsonr(x, row).statistic for row in y])
    assert np.isnan(R.rowwise_corr(x, np.ones((1, 9)))).all()
