from types import SimpleNamespace

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


def grid_argmaxable_in(W, b, lo, hi, points=801):
    """Tokens that are the strict argmax somewhere on a dense grid of the box [lo, hi] (d = 2)."""
    g1, g2 = np.linspace(lo[0], hi[0], points), np.linspace(lo[1], hi[1], points)
    x = np.stack(np.meshgrid(g1, g2), -1).reshape(-1, 2)
    logits = x @ W.T + b
    top2 = np.sort(logits, axis=1)[:, -2:]
    strict = top2[:, 1] - top2[:, 0] > 1e-12
    return set(np.unique(logits.argmax(axis=1)[strict]).tolist())


def grid_argmaxable(W, b, points=801):
    return grid_argmaxable_in(W, b, (-1.0, -1.0), (1.0, 1.0), points)


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


def summary_without_seconds(res):
    return {k: v for k, v in res.summary().items() if "seconds" not in k}


@pytest.mark.parametrize("seed, half", [(0, 1.0), (3, 0.7), (4, 2.5)])
def test_a_per_coordinate_box_gives_the_scalar_box_results(seed, half):
    # the general formulas (centre, half-widths) against the scalar ones, on the same box
    rng = np.random.default_rng(seed)
    W, b = rng.normal(size=(200, 5)), rng.normal(size=200)
    scalar = argmax.check(W, b, box=half, seed=seed, lp_budget=30)
    coords = argmax.check(W, b, box=(np.full(5, -half), np.full(5, half)), seed=seed, lp_budget=30)
    assert summary_without_seconds(scalar) == summary_without_seconds(coords)
    assert scalar.unargmaxable.tolist() == coords.unargmaxable.tolist()
    assert scalar.unresolved.tolist() == coords.unresolved.tolist()
    assert scalar.dominated > 0 and scalar.unargmaxable.size > scalar.dominated   # two proof tiers ran


LO, HI = np.array([-0.5, 0.2]), np.array([1.5, 0.9])   # an asymmetric box, 0 outside it in x2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tiers_agree_with_brute_force_over_an_asymmetric_box(seed):
    rng = np.random.default_rng(seed)
    W, b = rng.normal(size=(25, 2)), 0.3 * rng.normal(size=25)
    res = argmax.check(W, b, box=(LO, HI))
    found = set(range(25)) - set(res.unargmaxable.tolist())
    assert res.unresolved.size == 0 and 0 < len(res.unargmaxable) < 25
    assert found == grid_argmaxable_in(W, b, LO, HI)
    # and the box matters: the symmetric [-1, 1]^2 gives another answer on these rows
    assert found != set(range(25)) - set(argmax.check(W, b).unargmaxable.tolist())


def test_the_dominated_bound_on_an_asymmetric_box_by_hand():
    # w_1 - w_0 = (1, -1): min over [-0.5, 1.5] x [0.2, 0.9] of x1 - x2 is -0.5 - 0.9 = -1.4,
    # so token 0 is dominated by token 1 exactly when b_1 - b_0 >= 1.4
    W = np.array([[0.0, 0.0], [1.0, -1.0], [-5.0, 5.0]])
    for gap, beaten in ((1.41, True), (1.39, False)):
        b = np.array([0.0, gap, -100.0])
        assert argmax.dominated_tier(W, b, np.array([0]), (LO, HI))[0] == beaten
        assert (argmax.chebyshev_lp(W, b, 0, (LO, HI)) > argmax.LP_TOL) == (not beaten)


def test_the_chebyshev_lp_agrees_with_the_feasibility_lp_on_an_asymmetric_box():
    rng = np.random.default_rng(7)
    W, b = rng.normal(size=(40, 3)), 0.5 * rng.normal(size=40)
    lo, hi = np.array([-2.0, 0.1, -0.3]), np.array([0.5, 1.0, 0.3])
    cheb = np.array([argmax.chebyshev_lp(W, b, c, (lo, hi)) for c in range(40)])
    t = []
    for c in range(40):
        others = np.delete(np.arange(40), c)
        A = np.hstack([W[others] - W[c], np.ones((39, 1))])
        res = linprog(np.r_[np.zeros(3), -1.0], A_ub=A, b_ub=b[c] - b[others],
                      bounds=list(zip(lo, hi)) + [(None, None)], method="highs")
        t.append(res.x[-1])
    t = np.array(t)
    assert ((cheb > argmax.LP_TOL) == (t > 1e-7)).all() and 3 < (t > 1e-7).sum() < 37


@pytest.mark.parametrize("box, message", [
    (-1.0, "half-width must be finite and > 0"), (float("nan"), "half-width must be finite"),
    ((np.zeros(3), np.ones(2)), "lo and hi need 2 coordinates"),
    ((np.ones(2), np.zeros(2)), "lo <= hi"), ((1, 2, 3), "a pair"), (None, "a pair")])
def test_a_bad_box_is_a_one_line_error(box, message):
    with pytest.raises(AuditError, match=message):
        argmax.check(np.eye(2), np.zeros(2), box=box)


def test_the_box_describes_itself_for_eval_json():
    assert argmax.Box.of(1.0, 3).describe() == 1.0
    assert argmax.Box.of((LO, HI), 2).describe() == {"lo": [-0.5, 0.2], "hi": [1.5, 0.9]}


def full_chebyshev_r(W, b, c, lo, hi):
    """r* of the Chebyshev LP over all V - 1 rows in one HiGHS call (the formulation before
    constraint generation)."""
    others = np.delete(np.arange(len(b)), c)
    diff = W[others] - W[c]
    A = np.hstack([diff, np.linalg.norm(diff, axis=1, keepdims=True)])
    res = linprog(np.r_[np.zeros(W.shape[1]), -1.0], A_ub=A, b_ub=b[c] - b[others],
                  bounds=list(zip(lo, hi)) + [(0.0, 1.0)], method="highs")
    return -1.0 if res.status == 2 else res.x[-1]


@pytest.mark.parametrize("rows", [4, 64])
def test_constraint_generation_gives_the_lp_over_all_rows(rows, monkeypatch):
    # 4 rows: most tokens need several rounds; 64: the default; r* must be the one-shot LP's
    monkeypatch.setattr(argmax, "LP_ROWS", rows)
    rng = np.random.default_rng(11)
    W, b = rng.normal(size=(400, 5)), 0.3 * rng.normal(size=400)
    lo, hi = np.array([-1.0, -0.5, -1.0, 0.0, -2.0]), np.array([1.0, 1.0, 0.2, 1.0, 0.5])
    rounds = []
    real_linprog = argmax.linprog
    monkeypatch.setattr(argmax, "linprog", lambda *a, **k: rounds.append(1) or real_linprog(*a, **k))
    tokens, argmaxable = range(0, 400, 7), 0
    for c in tokens:
        got = argmax.chebyshev_lp(W, b, c, (lo, hi))
        want = full_chebyshev_r(W, b, c, lo, hi)
        assert (got > argmax.LP_TOL) == (want > argmax.LP_TOL), c
        if want > argmax.LP_TOL:
            assert got == pytest.approx(want, abs=1e-9), c
            argmaxable += 1
    assert 5 < argmaxable < len(tokens) - 5          # both outcomes are exercised
    if rows == 4:
        assert len(rounds) > 2 * len(tokens)         # most tokens took more than one round


class StuckHighs:
    """A linprog stand-in that returns one fixed "optimal" point (x, r) whatever rows it is given,
    as HiGHS did on a [-100, 100]^d LP whose point broke a row already in its working set (issue
    49). It raises after ``limit`` calls, so a loop that never ends fails instead of hanging."""

    def __init__(self, point, limit=1000, status=0):
        self.point, self.limit, self.status = np.asarray(point, dtype=float), limit, status
        self.calls, self.time_limits = 0, []

    def __call__(self, cost, A_ub, b_ub, bounds, method, options):
        self.calls += 1
        if self.calls > self.limit:
            raise RuntimeError(f"linprog called {self.limit} times for one token: the loop does not end")
        self.time_limits.append(options.get("time_limit"))
        return SimpleNamespace(status=self.status, x=self.point.copy(), message="stub")


# the token inside the corners' hull (unargmaxable: only the LP settles it) and a point for it at
# the corner (1, 1) with r = 0.5: corner 0's row, in the first working set (V - 1 < LP_ROWS), is
# broken by 1.5, and corner 0 beats the token there, so the point is no witness either
HULL = np.vstack([CORNERS, [0.1, 0.05]])


def test_an_lp_whose_point_breaks_a_row_of_its_working_set_ends_unresolved(monkeypatch):
    stuck = StuckHighs([1.0, 1.0, 0.5])
    monkeypatch.setattr(argmax, "linprog", stuck)
    r = argmax.chebyshev_lp(HULL, np.zeros(5), 4, 1.0)
    assert np.isnan(r) and not r > argmax.LP_TOL and not r <= argmax.LP_TOL
    assert stuck.calls == 1            # the set did not grow: re-solving it would give the same point
    assert 0 < stuck.time_limits[0] <= argmax.LP_SECONDS     # and the solve was timed
    # the check reports it unresolved, counted apart, and in no tier's tokens
    res = argmax.check(HULL, np.zeros(5), box=argmax.AUTHORS_BOX)
    assert res.unresolved.tolist() == [4] and res.lp_unresolved == 1 and res.unargmaxable.size == 0
    summary = res.summary()
    assert summary["argmax_unresolved"] == 1 and summary["argmax_lp_unresolved"] == 1
    assert summary["argmax_lp_tokens"] == 0 and summary["argmax_argmaxable"] == 4


def test_a_stuck_point_that_makes_the_token_the_argmax_is_a_witness(monkeypatch):
    # bias 1: the token wins at x = 0 by 1; r = 1 breaks its rows (norms ~1.4 > 1) but x is a witness
    b = np.array([0.0, 0.0, 0.0, 0.0, 1.0])
    monkeypatch.setattr(argmax, "linprog", StuckHighs([0.0, 0.0, 1.0]))
    assert argmax.chebyshev_lp(HULL, b, 4, 1.0) == 1.0


def test_the_time_and_round_bounds_leave_the_token_unresolved(monkeypatch):
    # HiGHS's time limit (scipy status 1): no point, unresolved
    timed_out = StuckHighs([0.0, 0.0, 0.0], status=1)
    monkeypatch.setattr(argmax, "linprog", timed_out)
    assert np.isnan(argmax.chebyshev_lp(HULL, np.zeros(5), 4, 1.0)) and timed_out.calls == 1
    # no time left: not even one solve
    never = StuckHighs([0.0, 0.0, 0.0])
    monkeypatch.setattr(argmax, "linprog", never)
    assert np.isnan(argmax.chebyshev_lp(HULL, np.zeros(5), 4, 1.0, seconds=0.0)) and never.calls == 0


def test_the_round_bound_stops_a_token_that_needs_more_rounds(monkeypatch):
    # one row added per round: an unargmaxable token of this layer needs several (no point of a
    # subset is a witness for it); with 2 rounds it is unresolved
    monkeypatch.setattr(argmax, "LP_ROWS", 1)
    rng = np.random.default_rng(11)
    W, b = rng.normal(size=(400, 5)), 0.3 * rng.normal(size=400)
    calls = []
    real_linprog = argmax.linprog
    monkeypatch.setattr(argmax, "linprog", lambda *a, **k: calls.append(1) or real_linprog(*a, **k))
    needs = {c: (calls.clear(), argmax.chebyshev_lp(W, b, c, 1.0), len(calls))[1:] for c in range(0, 400, 40)}
    c, (r, rounds) = next((c, v) for c, v in needs.items() if v[1] > 3 and v[0] <= argmax.LP_TOL)
    calls.clear()
    assert np.isnan(argmax.chebyshev_lp(W, b, c, 1.0, rounds=2)) and len(calls) == 2
    assert argmax.chebyshev_lp(W, b, c, 1.0, rounds=rounds) == r
