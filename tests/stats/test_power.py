"""Welch power and seeds per arm against R (tests/fixtures/r_golden.R), far tails included."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from audit.stats import power as P

GOLDEN = pd.read_csv(Path(__file__).parents[1] / "fixtures" / "r_golden_power.csv")


def test_power_matches_r_noncentral_t_over_the_grid():
    """193 cases: SDs 0-0.3, n 5-12 (unequal), margins 0.05-1.0 (d up to 10), alpha 0.05/0.01;
    R's pt(q, df, ncp) is an implementation independent of SciPy's nct."""
    for case in GOLDEN.itertuples():
        got = P.welch_power(case.sd_a, case.sd_b, case.n_a, case.n_b, case.margin, case.alpha)
        assert got == pytest.approx(case.power, rel=1e-8, abs=1e-12), case


def test_seeds_needed_matches_r_search():
    for case in GOLDEN.itertuples():
        got = P.seeds_needed(case.sd_a, case.sd_b, case.margin, case.alpha, 0.8)
        assert got == case.seeds_needed, case
        # the smallest n: one seed fewer falls short (n = 2 is the floor)
        if got > 2:
            assert P.welch_power(case.sd_a, case.sd_b, got - 1, got - 1, case.margin, case.alpha) < 0.8


def test_equal_sds_and_n_is_r_power_t_test():
    eq = GOLDEN[GOLDEN.power_t_test.notna()]
    assert len(eq) == 8
    for case in eq.itertuples():
        assert P.welch_power(case.sd_a, case.sd_b, case.n_a, case.n_b, case.margin,
                             case.alpha) == pytest.approx(case.power_t_test, rel=1e-9)


def test_power_agrees_with_monte_carlo_of_the_welch_test():
    """R simulated the real Welch test 200,000 times per case (MC SE <= 0.0012); the
    noncentral-t formula is an approximation, off by at most 0.012 here (n_a = 5). Tolerance
    0.015 covers both."""
    mc = GOLDEN[GOLDEN.mc_power.notna()]
    assert len(mc) == 25 and (mc.sd_a == 0).any()          # includes a constant arm
    for case in mc.itertuples():
        got = P.welch_power(case.sd_a, case.sd_b, case.n_a, case.n_b, case.margin, case.alpha)
        assert got == pytest.approx(case.mc_power, abs=0.015), case


@pytest.mark.parametrize("d", [4, 5, 6, 7, 8, 9, 10])
@pytest.mark.parametrize("n", [10, 11, 12])
def test_far_tail_power_is_one_not_nan(d, n):
    """statsmodels' TTestIndPower returned NaN for many of these (SciPy's nct.cdf far out)."""
    got = P.welch_power(1.0, 1.0, n, n, float(d), 0.05)
    assert np.isfinite(got) and got == pytest.approx(1.0, abs=1e-9)
    assert 0.9999 < P.welch_power(1.0, 1.3, n, n + 1, float(d), 0.05) <= 1.0
    need = P.seeds_needed(1.0, 1.0, float(d), 0.05, 0.8)
    assert need in (2, 3) and P.welch_power(1.0, 1.0, need, need, float(d), 0.05) >= 0.8


def test_tail_fallback_is_a_second_method():
    # where SciPy's nct is finite, integrating over the chi distribution gives the same tails
    for x, df, nc in [(2.1, 18, 1.0), (2.1, 18, 3.0), (-2.1, 18, 3.0), (1.5, 5.3, 0.7), (2.0, 9.5, 6.0)]:
        assert P._tail_by_integration(x, df, nc, True) == pytest.approx(stats.nct.sf(x, df, nc), rel=1e-9, abs=1e-14)
        assert P._tail_by_integration(x, df, nc, False) == pytest.approx(stats.nct.cdf(x, df, nc), rel=1e-9, abs=1e-14)
    # where SciPy returns NaN (left tail, nc = 4 sqrt(5)), the fallback gives a probability
    # below the bound P(T < -x) <= Phi(-nc)
    crit, nc = stats.t.ppf(0.975, 18), 4 * math.sqrt(5)
    assert math.isnan(stats.nct.cdf(-crit, 18, nc))            # the reason the fallback exists
    got = P.nct_tail(-crit, 18, nc, upper=False)
    assert 0 <= got <= stats.norm.cdf(-nc)


def test_undefined_inputs_give_nan():
    assert math.isnan(P.welch_power(0.0, 0.0, 10, 10, 0.2, 0.05))        # both arms constant
    assert math.isnan(P.welch_power(0.1, 0.1, 1, 10, 0.2, 0.05))
    assert math.isnan(P.welch_power(0.1, 0.1, 10, 10, math.nan, 0.05))
    assert math.isnan(P.welch_power(math.nan, 0.1, 10, 10, 0.2, 0.05))
    assert math.isnan(P.seeds_needed(0.0, 0.0, 0.2, 0.05, 0.8))
    assert math.isnan(P.seeds_needed(0.1, 0.1, -1.0, 0.05, 0.8))
    # one constant arm is defined: the Welch SE and df come from the other arm alone
    assert P.welch_power(0.0, 0.15, 10, 10, 0.2, 0.05) == pytest.approx(
        GOLDEN[(GOLDEN.sd_a == 0)].power.iloc[0], rel=1e-9)
