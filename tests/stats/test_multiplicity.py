"""Holm correction: adjusted >= raw, monotone in the raw order, NaN-safe, statsmodels-equal."""

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from audit.stats.multiplicity import adjust


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
    assert adj[[0, 2, 3]] == pytest.approx(multipletests([0.01, 0.04, 0.03], method="holm")[1])
    # statsmodels on its own mishandles NaN: all-NaN in old versions (statsmodels#2899); in
    # 0.15 the NaNs still count towards m, so the smallest p is multiplied by 5, not 3
    raw = multipletests(p, method="holm")[1]
    assert np.isnan(raw).all() or raw[0] > adj[0]


def test_empty_and_all_nan():
    adj, size, dropped = adjust([])
    assert adj.shape == (0,) and size == 0 and dropped == 0
    adj, size, dropped = adjust([np.nan, np.nan])
    assert np.isnan(adj).all() and (size, dropped) == (0, 2)
