"""Tests for audit.evaluate.topk: position selection, row collection and top-k tables.

Golden values: a hand-checked 2 x 6 example with a tie, and an independent rank computation by
counting (number of larger log-probs, plus equal ones with a lower id) on random rows.
"""

import numpy as np
import pytest
import torch

from audit.evaluate import topk
from audit.errors import AuditError


def test_top_k_hand_checked_with_tie():
    logp = np.log(np.array([[0.1, 0.3, 0.05, 0.3, 0.2, 0.05],
                            [0.5, 0.1, 0.1, 0.1, 0.1, 0.1]], dtype=np.float32))
    table = topk.top_k(logp, targets=[4, 5], positions=[17, 99], k=3)
    # row 0: order 1, 3 (tie, lower id first), 4, 0, 2, 5 -> target 4 has rank 3
    assert list(table.loc[0, ["top_1", "top_2", "top_3"]]) == [1, 3, 4]
    assert table.loc[0, "target_rank"] == 3 and bool(table.loc[0, "in_top_k"])
    # row 1: order 0, 1, 2, 3, 4, 5 -> target 5 has rank 6
    assert list(table.loc[1, ["top_1", "top_2", "top_3"]]) == [0, 1, 2]
    assert table.loc[1, "target_rank"] == 6 and not bool(table.loc[1, "in_top_k"])
    assert list(table["position"]) == [17, 99]
    assert list(table.columns) == ["position", "target", "target_rank", "in_top_k",
                                   "top_1", "top_2", "top_3"]


def test_top_k_matches_counting_on_random_rows():
    rng = np.random.default_rng(0)
    logp = torch.log_softmax(torch.from_numpy(rng.standard_normal((30, 50))), -1)
    logp[:, 10] = logp[:, 11]  # force ties
    targets = rng.integers(0, 50, size=30)
    table = topk.top_k(logp, targets, np.arange(30))
    values = logp.numpy()
    for i, t in enumerate(targets):
        row = values[i]
        expected_rank = np.sum(row > row[t]) + np.sum((row == row[t]) & (np.arange(50) < t)) + 1
        assert table["target_rank"][i] == expected_rank
        assert table["in_top_k"][i] == (expected_rank <= 5)
        top = sorted(range(50), key=lambda j: (-row[j], j))[:5]
        assert list(table.loc[i, [f"top_{j}" for j in range(1, 6)]]) == top


def test_select_positions_seeded():
    a = topk.select_positions(1000, [5, 0, 5, 999], 20, np.random.default_rng(3))
    b = topk.select_positions(1000, [5, 0, 5, 999], 20, np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    assert list(a[:3]) == [5, 0, 999]          # fixed first, in order, repeat dropped
    drawn = a[3:]
    assert len(drawn) == 20 and np.all(np.diff(drawn) > 0)
    assert not set(drawn) & {0, 5, 999}        # drawn from the other positions only
    c = topk.select_positions(1000, [5, 0, 999], 20, np.random.default_rng(4))
    assert list(c[3:]) != list(drawn)          # another seed, another sample


def test_collect_rows_from_stream():
    rng = np.random.default_rng(1)
    full = rng.standard_normal((100, 7)).astype(np.float32)
    blocks = [full[i:i + 13] for i in range(0, 100, 13)]
    positions = [99, 0, 13, 12, 50]
    np.testing.assert_array_equal(topk.collect_rows(iter(blocks), positions), full[positions])
    np.testing.assert_array_equal(topk.collect_rows([torch.from_numpy(b) for b in blocks], [3]),
                                  full[[3]])


def test_bad_input_raises():
    rng = np.random.default_rng(2)
    with pytest.raises(AuditError, match="position 10"):
        topk.select_positions(10, [10], 0, rng)
    with pytest.raises(AuditError, match="random positions"):
        topk.select_positions(10, [1], 10, rng)
    with pytest.raises(AuditError, match="beyond"):
        topk.collect_rows([np.zeros((5, 3))], [5])
    with pytest.raises(AuditError, match="target id"):
        topk.top_k(np.zeros((1, 4)), [4], [0], k=2)
    with pytest.raises(AuditError, match="k must"):
        topk.top_k(np.zeros((1, 4)), [0], [0], k=5)
