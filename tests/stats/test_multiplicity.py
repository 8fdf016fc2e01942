"""Holm correction: adjusted >= raw, monotone in the raw order, NaN-safe, equal to R's p.adjust.

Golden values are Holm's step-down worked by hand (``pmin(1, cummax((m - i + 1) * p[o]))`` over
the sorted p-values) and checked with R 4.2.2's ``p.adjust(p, "holm")``, which printed exactly
these values; not statsmodels, which ``adjust`` itself calls.
"""

import numpy as np
import pytest

from audit.stats.multiplicity import adjust


@pytest.mark.parametrize("p, expected", [
    # sorted 0.01 0.02 0.03 0.04 0.05, m = 5: 5(.01) = .05, 4(.02) = .08, 3(.03) = .09, 2(.04) = .08 -> .09
    # (step-down keeps the running maximum), 1(.05) = .05 -> .09
    ([0.01, 0.02, 0.03, 0.04, 0.05], [0.05, 0.08, 0.09, 0.09, 0.09]),
    # unsorted input, capped at 1: 3(.02) = .06, 2(.4) = .8, 1(.6) = .6 -> .8
    ([0.4, 0.6, 0.02], [0.8, 0.8, 0.06]),
    ([0.6, 0.7], [1.0, 1.0]),                         # 2(.6) = 1.2 -> 1
    ([0.03, 0.03, 0.001], [0.06, 0.06, 0.003]),       # ties share the larger multiplier's max
    ([0.2], [0.2]),                                   # a family of one is not adjusted
])
def test_holm_equals_r_p_adjust(p, expected):
    adj, size, dropped = adjust(p)
    assert adj == pytest.approx(expected, abs=1e-12) and (size, dropped) == (len(p), 0)


@pytest.mark.parametrize("seed", range(5))
def test_holm_adjusted_ge_raw_and_monotone(seed):
    p = np.random.default_rng(seed).uniform(0, 0.2, 12) ** 2
    adj, size, dropped = adjust(p)
    assert (size, dropped) == (12, 0)
    assert np.all(adj >= p - 1e-15) and np.all(adj <= 1)
    order = np.argsort(p)
    assert np.all(np.diff(adj[order]) >= 0)          # same ranking as the raw p-values
    # Holm written out: max over j <= i of min(1, (m - j) p_(j))
    m = len(p)
    step = np.minimum(1, (m - np.arange(m)) * p[order])
    assert adj[order] == pytest.approx(np.maximum.accumulate(step))


def test_nan_is_dropped_counted_and_does_not_poison():
    p = np.array([0.01, np.nan, 0.04, 0.03, np.nan])
    adj, size, dropped = adjust(p)
    assert (size, dropped) == (3, 2)
    assert np.isnan(adj[[1, 4]]).all()
    # m = 3, not 5: 3(.01) = .03, 2(.03) = .06, 1(.04) = .04 -> .06; counting the NaNs
    # towards m (what statsmodels 0.15 does on its own) would give 0.05 for the smallest p
    assert adj[[0, 2, 3]] == pytest.approx([0.03, 0.06, 0.06], abs=1e-12)


def test_empty_and_all_nan():
    adj, size, dropped = adjust([])
    assert adj.shape == (0,) and size == 0 and dropped == 0
    adj, size, dropped = adjust([np.nan, np.nan])
    assert np.isnan(adj).all() and (size, dropped) == (0, 2)


def test_our_holm_equals_statsmodels_multipletests_bit_for_bit():
    """multiplicity.holm replaces statsmodels' (which runs gc.collect() per call in 0.15): the same
    numbers, ties and p near 1 included."""
    from statsmodels.stats.multitest import multipletests

    from audit.stats.multiplicity import holm

    rng = np.random.default_rng(7)
    for _ in range(500):
        m = int(rng.integers(1, 30))
        p = rng.uniform(0, 1, m) ** rng.uniform(0.2, 4)
        p[rng.random(m) < 0.2] = p[0]                       # ties
        assert np.array_equal(holm(p), multipletests(p, method="holm")[1]), p
