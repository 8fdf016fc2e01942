import numpy as np
import pytest
from scipy.optimize import linprog

from audit.errors import AuditError
from audit.evaluate import argmax

CORNERS = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])


def test_a_token_inside_the_hull_with_equal_bias_is_unargmaxable():
    # l_c = 0.1 x1 + 0.05 x2 < |x1| + |x2| = max over the corners for every x != 0, a tie at 0
    W = np.vstack([CORNERS, [0.1, 0.05]])
    res = argmax.check(W, np.zeros(5))
    assert res.unargmaxable.tolist() == [4] and res.witness + res.braid + res.lp_argmaxable == 4
    assert argmax.chebyshev_lp(W, np.zeros(5), 4, 1.0) <= argmax.LP_TOL


def test_the_same_token_with_a_large_bias_is_argmaxable():
    W = np.vstack([CORNERS, [0.1, 0.05]])
    b = np.array([0.0, 0.0, 0.0, 0.0, 1.0])  # wins at x = 0 with margin 1
    res = argmax.check(W, b)
    assert res.unargmaxable.size == 0 and res.unresolved.size == 0
    assert argmax.chebyshev_lp(W, b, 4, 1.0) > 0.1


def test_a_duplicate_row_with_equal_bias_is_never_a_strict_argmax():
    W = np.vstack([CORNERS, CORNERS[:1]])
    res = argmax.check(W, np.zeros(5))
    assert sorted(res.unargmaxable.tolist()) == [0, 4]


def grid_argmaxable(W, b, points=801):
    g = np.linspace(-1.0, 1.0, points)
    x = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    logits = x @ W.T + b
    top2 = np.sort(logits, axis=1)[:, -2:]
    strict = top2[:, 1] - top2[:, 0] > 1e-12
    return set(np.unique(logits.argmax(axis=1)[strict]).tolist())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tiers_agree_with_brute_force_over_a_dense_grid_at_d2(seed):
    rng = np.random.default_rng(seed)
    W, b = rng.normal(size=(25, 2)), 0.3 * rng.normal(size=25)
    res = argmax.check(W, b)
    found = set(range(25)) - set(res.unargmaxable.tolist())
    assert res.unresolved.size == 0
    assert 0 < len(res.unargmaxable) < 25   # both kinds present: the test can tell them apart
    assert found == grid_argmaxable(W, b)


def feasibility_t(W, b, c, box=1.0):
    """Second formulation: max t s.t. (w_j - w_c) x + b_j - b_c + t <= 0, x in the box."""
    others = np.delete(np.arange(len(b)), c)
    A = np.hstack([W[others] - W[c], np.ones((len(others), 1))])
    res = linprog(np.r_[np.zeros(W.shape[1]), -1.0], A_ub=A, b_ub=b[c] - b[others],
                  bounds=[(-box, box)] * W.shape[1] + [(None, None)], method="highs")
    assert res.status == 0
    return res.x[-1]


def test_the_chebyshev_lp_agrees_with_the_feasibility_lp():
    rng = np.random.default_rng(5)
    W, b = rng.normal(size=(40, 3)), 0.5 * rng.normal(size=40)
    cheb = np.array([argmax.chebyshev_lp(W, b, c, 1.0) for c in range(40)])
    t = np.array([feasibility_t(W, b, c) for c in range(40)])
    assert ((cheb > argmax.LP_TOL) == (t > 1e-7)).all()
    assert 5 < (t > 1e-7).sum() < 35


def test_the_lp_budget_leaves_tokens_unresolved_and_tiers_are_timed():
    W = np.vstack([CORNERS, [0.1, 0.05], [0.0, 0.2]])
    res = argmax.check(W, np.zeros(6), lp_budget=1)
    assert res.unargmaxable.size + res.unresolved.size == 2 and res.unresolved.size == 1
    summary = res.summary()
    assert summary["unargmaxable"] == 1 and summary["argmax_unresolved"] == 1 and summary["argmax_lp_tokens"] == 1
    assert set(res.seconds) == {"witness", "dominated", "braid", "lp"}
    assert summary["argmax_seconds"] == pytest.approx(sum(res.seconds.values()))


def test_the_witness_tier_certifies_random_tokens_in_high_dimension():
    rng = np.random.default_rng(0)
    W, b = rng.normal(size=(500, 64)), np.zeros(500)
    res = argmax.check(W, b, lp_budget=0)
    assert res.witness == 500


def test_bad_shapes_are_one_line_errors():
    with pytest.raises(AuditError, match="W must be"):
        argmax.check(np.zeros(3), np.zeros(3))


def test_a_token_beaten_by_one_rival_on_the_whole_box_is_dominated_and_the_lp_agrees():
    W = np.vstack([CORNERS, [0.5, 0.0]])
    b = np.array([0.0, 0.0, 0.0, 0.0, -2.5])   # b_0 - b_4 = 2.5 >= ||w_0 - w_4||_1 = 1.5
    res = argmax.check(W, b)
    assert res.dominated == 1 and res.unargmaxable.tolist() == [4] and res.summary()["argmax_lp_tokens"] == 0
    assert argmax.chebyshev_lp(W, b, 4, 1.0) <= argmax.LP_TOL
    b[4] = -1.4                                 # no longer dominated by corner 0 (1.4 < 1.5): the LP decides
    assert not argmax.dominated_tier(W, b, np.array([4]), 1.0)[0]
