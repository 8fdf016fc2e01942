"""Almost stochastic order: exact violation ratio, epsilon_min against deepsig's reference ``aso``
(GPL-3: a test-only dependency) within its Monte Carlo error, and the invariants of the measure."""

import math

import numpy as np
import pytest

from audit.stats.aso import eps_min, violation_ratio
from audit.stats.comparisons import compare
from audit.stats.io import Settings

try:
    import deepsig
except ImportError:  # only the two reference comparisons need it; the invariants run without
    deepsig = None
needs_deepsig = pytest.mark.skipif(deepsig is None, reason="deepsig (the test extra) is the reference "
                                   "implementation: pip install -e '.[test]'")


@needs_deepsig
@pytest.mark.parametrize("seed, n_a, n_b, shift", [(0, 10, 10, 0.3), (1, 7, 12, 0.0), (2, 5, 8, -0.5), (3, 11, 11, 1.0)])
def test_violation_ratio_matches_deepsig_integral(seed, n_a, n_b, shift):
    from deepsig.aso import compute_violation_ratio

    rng = np.random.default_rng(seed)
    a, b = rng.normal(shift, 1, n_a), rng.normal(0, 1, n_b)
    # deepsig integrates on a grid of step dt (and drops its first point): at dt = 1e-4 the
    # difference from the exact integral is below 1e-3
    assert float(violation_ratio(a, b)) == pytest.approx(compute_violation_ratio(a, b, dt=1e-4), abs=1e-3)


@needs_deepsig
def test_eps_min_matches_deepsig_within_monte_carlo_error():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.4, 1, 10), rng.normal(0, 1, 10)   # eps_min near 0.6: far from the clip at 0 and 1
    # deepsig seeds its i-th resample with seed + i, so runs must use far-apart seeds to be independent
    ref = np.array([deepsig.aso(a, b, seed=s * 100_000, num_bootstrap_iterations=500, show_progress=False)
                    for s in range(4)])
    ours = np.array([eps_min(a, b, False, 0.95, 500, np.random.default_rng(s)) for s in range(20)])
    mc_se = math.sqrt(ref.var(ddof=1) / len(ref) + ours.var(ddof=1) / len(ours))
    # 4 Monte Carlo SEs, plus 0.01 for deepsig's grid (dt = 0.005) against the exact integral
    assert abs(ref.mean() - ours.mean()) < 4 * mc_se + 0.01
    assert 0.3 < ours.mean() < 0.9 and mc_se > 0


def test_invariants():
    rng = np.random.default_rng(5)
    a, b = rng.normal(0, 1, 9), rng.normal(0.2, 2, 6)
    # del Barrio et al.: eps(A, B) + eps(B, A) = 1
    assert float(violation_ratio(a, b) + violation_ratio(b, a)) == pytest.approx(1.0)
    # complete separation: A dominates, no violation; the other way round, total violation
    hi, lo = np.arange(10.0) + 100, np.arange(10.0)
    assert float(violation_ratio(hi, lo)) == 0.0 and float(violation_ratio(lo, hi)) == 1.0
    assert eps_min(hi, lo, False, 0.95, 1000, np.random.default_rng(0)) < 0.05
    # lower_is_better: perplexities 50 beat 60
    assert eps_min(lo + 50, lo + 60, True, 0.95, 1000, np.random.default_rng(0)) < 0.05
    assert eps_min(lo + 60, lo + 50, True, 0.95, 1000, np.random.default_rng(0)) > 0.95
    # identical samples: the ratio is 0/0, left undefined; one value per arm: NaN
    assert math.isnan(eps_min(lo, lo.copy(), True, 0.95, 100, np.random.default_rng(0)))
    assert math.isnan(eps_min(lo[:1], hi, True, 0.95, 100, np.random.default_rng(0)))
    # same seed, same number
    assert eps_min(a, b, False, 0.95, 500, np.random.default_rng(9)) == eps_min(a, b, False, 0.95, 500, np.random.default_rng(9))


def test_comparisons_column_is_empty_below_min_seeds():
    settings = Settings(bootstrap_resamples=500, min_seeds=5)
    rng = np.random.default_rng(1)
    full = compare(rng.normal(56, 0.1, 10), rng.normal(57, 0.1, 10), True, 0.2, settings)
    assert full["aso_confidence"] == 0.95 and full["aso_eps_min"] < 0.2
    # one run against five: deepsig would say about 0.09 (deep-significance#16); here no number
    tiny = compare(np.array([56.0, 56.1]), rng.normal(57, 0.1, 5), True, 0.2, settings)
    assert math.isnan(tiny["aso_eps_min"])
