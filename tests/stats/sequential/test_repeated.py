"""Stage-wise and repeated p-values and repeated confidence intervals: the alpha they spend,
their agreement with the boundaries, and simultaneous coverage by simulation."""

import numpy as np
import pytest

from audit.stats.sequential import boundaries as seq, repeated


def test_one_look_p_values_are_the_fixed_tests_p():
    c = seq.boundaries([1.0], 0.05)
    assert repeated.stagewise_p(0.0123, [1.0], c) == pytest.approx(0.0123, rel=1e-6)
    assert repeated.repeated_p([0.0123], [1.0], final=True) == pytest.approx(0.0123, rel=1e-5)


def test_stagewise_p_at_a_boundary_is_the_alpha_spent_so_far():
    t = np.arange(1, 5) / 4
    c = seq.boundaries(t, 0.05)
    p_nominal = seq.nominal_levels(c)
    for k in range(1, 5):
        assert repeated.stagewise_p(p_nominal[k - 1], t[:k], c[:k]) == pytest.approx(
            2 * seq.spending(t[k - 1], 0.025), abs=1e-7)
    # A later stop is less extreme than any earlier efficacy stop. At look 3 with p = 1e-12 the
    # stage-wise p is the alpha spent through look 2 plus at most 1e-12, so it equals that spend
    # to within the recursive integration's accuracy (1e-7, as above): a strict ">" between the
    # two would be decided by the integration's last bits, which differ between CPUs.
    spent = 2 * seq.spending(t, 0.025)
    assert repeated.stagewise_p(1e-12, t[:3], c[:3]) == pytest.approx(spent[1], abs=1e-7)
    # A look-3 stop inside its rejection region lies strictly between the spend through look 2
    # and through look 3, by far more than that accuracy (here about 7.6e-3 and 8.7e-3 away).
    middle = repeated.stagewise_p(p_nominal[2] / 2, t[:3], c[:3])
    assert spent[1] + 1e-4 < middle < spent[2] - 1e-4


@pytest.mark.parametrize("kind, gamma", [("obf", seq.HSD_GAMMA), ("hsd", 1.0)])
def test_repeated_p_below_alpha_exactly_when_some_look_crossed(kind, gamma):
    rng = np.random.default_rng(3)
    t = np.array([0.25, 0.5, 0.75, 1.0])
    for _ in range(10):
        p = 10 ** rng.uniform(-5, 0, size=4)
        for alpha in (0.05, 0.0125):
            nominal = seq.nominal_levels(seq.boundaries(t, alpha, kind, gamma=gamma))
            # a p within 1e-6 (relative) of a nominal level would let the root finders' tolerances
            # (xtol 1e-10, rtol 1e-6) decide the side; the seeded draws stay far from that
            assert np.min(np.abs(p / nominal - 1)) > 1e-4
            crossed = np.any(p < nominal)
            assert (repeated.repeated_p(p, t, kind, final=True, gamma=gamma) < alpha) == crossed
    assert repeated.repeated_p([0.2, 0.3], [0.5, 1.0], final=True) >= 0.2  # never below a look's own p
    assert np.isnan(repeated.repeated_p([np.nan, np.nan], [0.5, 1.0]))


def test_repeated_cis_cover_simultaneously():
    """Normal seeds, equal SDs, looks at 5..30 seeds per arm: all six Welch-based RCIs contain
    the true difference in >= 95 % of simulated studies (up to Monte Carlo error)."""
    rng = np.random.default_rng(11)
    sizes = np.array(seq.stage_sizes(5, 5, 30))
    level = seq.nominal_levels(seq.boundaries(sizes / 30, 0.05))
    a, b = rng.normal(1.0, 1.0, (20000, 30)), rng.normal(0.0, 1.0, (20000, 30))
    covered = np.ones(20000, bool)
    for n, lv in zip(sizes, level):
        va, vb = a[:, :n].var(1, ddof=1), b[:, :n].var(1, ddof=1)
        se = np.sqrt(va / n + vb / n)
        df = (va / n + vb / n) ** 2 / ((va / n) ** 2 / (n - 1) + (vb / n) ** 2 / (n - 1))
        low, high = repeated.repeated_ci(a[:, :n].mean(1) - b[:, :n].mean(1), se, df, lv)
        covered &= (low < 1.0) & (1.0 < high)
    assert covered.mean() > 0.95 - 2 * np.sqrt(0.05 * 0.95 / 20000)
