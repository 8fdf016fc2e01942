"""Group-sequential boundaries against published tables and an independent computation."""

import numpy as np
import pytest
from scipy import stats

from audit.errors import AuditError
from audit.stats.sequential import boundaries as seq

# Jennison & Turnbull (2000), Table 2.1 (Pocock C_P) and Table 2.3 (O'Brien-Fleming C_B),
# two-sided alpha = 0.05, K equally spaced looks
JT_POCOCK = {2: 2.178, 3: 2.289, 4: 2.361, 5: 2.413}
JT_OBF = {2: 1.977, 3: 2.004, 4: 2.024, 5: 2.040}
# Lan-DeMets spending boundaries, K = 5 equally spaced, two-sided alpha = 0.05 (DeMets & Lan
# 1994, Stat Med 13:1341, Table 1; the same values as R ldbounds / gsDesign)
LD_OBF_5 = [4.877, 3.357, 2.680, 2.290, 2.031]
LD_POCOCK_5 = [2.44, 2.43, 2.41, 2.40, 2.39]
# Hwang-Shih-DeCani spending boundaries (fractions, alpha, gamma, sides) -> c_k, computed in R
# 4.2.2 by an independent method: Genz-type multivariate normal probabilities (mvtnorm 1.1-3,
# Debian r-cran-mvtnorm; Miwa's deterministic algorithm) and uniroot, stage by stage, so that
# P0(first crossing at look k) = f(t_k) - f(t_{k-1}). gsDesign is not packaged for Debian; the
# one-sided gamma = -4, K = 3 case is gsDesign's default design (upper bounds 3.01, 2.55, 1.99).
#   library(mvtnorm)
#   hsd <- function(t, a, g) if (g == 0) a * t else a * (1 - exp(-g * t)) / (1 - exp(-g))
#   cont <- function(c, t, sides) {  # P(no crossing at looks 1..k)
#     s <- sqrt(outer(t, t, pmin) / outer(t, t, pmax))
#     lower <- if (sides == 2) -c else rep(-Inf, length(c))
#     pmvnorm(lower = lower, upper = c, sigma = s, algorithm = Miwa(steps = 4096))[1]
#   }
#   bounds <- function(t, alpha, g, sides = 2) {
#     c <- numeric(0); f <- hsd(t, alpha, g)
#     for (k in seq_along(t)) {
#       prev <- if (k == 1) 1 else cont(c, t[1:(k - 1)], sides)
#       c[k] <- uniroot(function(x) prev - cont(c(c, x), t[1:k], sides) - (f[k] - c(0, f)[k]),
#                       c(0.5, 8), tol = 1e-12)$root
#     }
#     c
#   }
#   bounds((1:4) / 4, 0.05, -2); bounds(c(0.1, 0.3, 0.6, 1), 0.05, 1)
#   bounds(c(4, 8, 12, 30) / 30, 0.0125, 0); bounds((1:3) / 3, 0.025, -4, sides = 1)
R_HSD = [
    ((0.25, 0.5, 0.75, 1.0), 0.05, -2.0, 2, [2.802119, 2.580104, 2.340792, 2.090340]),
    ((0.1, 0.3, 0.6, 1.0), 0.05, 1.0, 2, [2.672571, 2.446744, 2.326767, 2.279133]),
    ((4 / 30, 8 / 30, 12 / 30, 1.0), 0.0125, 0.0, 2, [3.143980, 3.096387, 3.043546, 2.641753]),
    ((1 / 3, 2 / 3, 1.0), 0.025, -4.0, 1, [3.010739, 2.546531, 1.999226]),
]


@pytest.mark.parametrize("looks", [2, 3, 4, 5])
def test_classical_constants_match_jennison_turnbull_tables(looks):
    assert seq.classical_constant(looks, 0.05, "pocock") == pytest.approx(JT_POCOCK[looks], abs=1.5e-3)
    assert seq.classical_constant(looks, 0.05, "obf") == pytest.approx(JT_OBF[looks], abs=1.5e-3)


def test_lan_demets_boundaries_match_demets_lan_1994():
    t = np.arange(1, 6) / 5
    np.testing.assert_allclose(seq.boundaries(t, 0.05, "obf"), LD_OBF_5, atol=1e-3)
    np.testing.assert_allclose(seq.boundaries(t, 0.05, "pocock"), LD_POCOCK_5, atol=6e-3)


@pytest.mark.parametrize("t, alpha, gamma, sides, expected", R_HSD)
def test_hwang_shih_decani_boundaries_match_r_mvtnorm(t, alpha, gamma, sides, expected):
    np.testing.assert_allclose(seq.boundaries(t, alpha, "hsd", sides, gamma=gamma), expected, atol=2e-6)


def test_hsd_spending_function():
    t = np.array([0.0, 0.3, 1.0])
    np.testing.assert_allclose(seq.spending(t, 0.05, "hsd", gamma=0.0), 0.05 * t)  # linear at gamma = 0
    np.testing.assert_allclose(seq.spending(0.3, 0.05, "hsd", gamma=-4.0),
                               0.05 * (1 - np.exp(1.2)) / (1 - np.exp(4.0)), rtol=1e-12)
    # continuous at gamma -> 0 (the formula's 0 / 0 limit), and a larger gamma spends more early
    assert seq.spending(0.3, 0.05, "hsd", gamma=1e-7) == pytest.approx(0.015, rel=1e-6)
    early = [seq.spending(0.2, 0.05, "hsd", gamma=g) for g in (-4, -2, 0, 1, 3)]
    assert np.all(np.diff(early) > 0)
    for bad in (np.nan, 41, "x"):
        with pytest.raises(AuditError, match="seeds.gamma"):
            seq.spending(0.5, 0.05, "hsd", gamma=bad)


def _mvn_continue(c, t, sides, drift=0.0):
    """P(no crossing at looks 1..K) by Genz's multivariate normal integration (independent of
    the recursive integration): corr(Z_i, Z_j) = sqrt(t_i / t_j)."""
    t = np.asarray(t)
    cov = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    lower = -np.asarray(c) if sides == 2 else np.full(len(t), -np.inf)
    mvn = stats.multivariate_normal(mean=drift * np.sqrt(t), cov=cov, abseps=1e-7, releps=1e-7)
    return mvn.cdf(np.asarray(c), lower_limit=lower, rng=np.random.default_rng(0))


@pytest.mark.parametrize("kind", ["obf", "pocock", "hsd"])
@pytest.mark.parametrize("sides", [1, 2])
def test_spent_alpha_is_the_exact_crossing_probability_by_mvn_integration(kind, sides):
    t = np.array([0.2, 0.45, 0.7, 1.0])  # unequal spacing, as after failed runs
    c = seq.boundaries(t, 0.05, kind, sides)
    spent = sides * seq.spending(t, 0.05 / sides, kind)
    for k in range(1, len(t) + 1):
        assert 1 - _mvn_continue(c[:k], t[:k], sides) == pytest.approx(spent[k - 1], abs=5e-5)
    np.testing.assert_allclose(np.cumsum(seq.crossing_probabilities(c, t, sides)), spent, atol=1e-7)


def test_crossing_under_a_drift_matches_mvn():
    t = np.array([1 / 3, 2 / 3, 1.0])
    c = seq.boundaries(t, 0.05)
    power = seq.crossing_probabilities(c, t, drift=2.8).sum()
    assert power == pytest.approx(1 - _mvn_continue(c, t, 2, drift=2.8), abs=1e-4)
    assert 0.75 < power < 0.80  # a fixed design at drift 2.8 has power 0.80; OBF loses a little


def test_one_look_is_the_fixed_two_sided_test():
    c = seq.boundaries([1.0], 0.05)
    assert c[0] == pytest.approx(stats.norm.isf(0.025), abs=1e-7)
    assert seq.nominal_levels(c)[0] == pytest.approx(0.05, abs=1e-9)


def test_spending_functions_reach_alpha_and_increase():
    t = np.linspace(0, 1, 21)
    for kind in seq.SPENDING:
        f = seq.spending(t, 0.05, kind)
        assert f[0] == 0 and f[-1] == pytest.approx(0.05) and np.all(np.diff(f) > 0)
    assert seq.spending(0.5, 0.05, "obf") < seq.spending(0.5, 0.05, "pocock")  # OBF spends little early
    with pytest.raises(AuditError, match="spending"):
        seq.spending(0.5, 0.05, "haybittle")


def test_final_look_short_of_full_information_still_spends_all_alpha():
    t = [0.25, 0.5, 0.9]  # failed runs: the last look has 90 % of the planned information
    c = seq.boundaries(t, 0.05, final=True)
    assert seq.crossing_probabilities(c, t).sum() == pytest.approx(0.05, abs=1e-7)
    c_interim = seq.boundaries(t, 0.05, final=False)
    assert seq.crossing_probabilities(c_interim, t).sum() == pytest.approx(2 * seq.spending(0.9, 0.025), abs=1e-7)


def test_stage_sizes_and_bad_schedules():
    assert seq.stage_sizes(5, 5, 30) == [5, 10, 15, 20, 25, 30]
    assert seq.stage_sizes(2, 1, 4) == [2, 3, 4]
    assert seq.stage_sizes(5, 7, 20) == [5, 12, 19, 20]
    assert seq.stage_sizes(4, 3, 4) == [4]
    for bad in [(1, 1, 4), (5, 0, 10), (6, 1, 5)]:
        with pytest.raises(AuditError, match="initial"):
            seq.stage_sizes(*bad)
    with pytest.raises(AuditError, match="increasing"):
        seq.boundaries([0.5, 0.5], 0.05)
