"""Stop rules of the sequential design: Welch from summaries, Holm, conditional power, replay."""

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from audit.stats.sequential import repeated, stopping
from helpers import r_two_sample


@pytest.mark.parametrize("case", ["unequal_sd", "unequal_n", "exact_summaries"])
def test_welch_arrays_match_r(case):
    a, b, r = r_two_sample(case)  # R's t.test and TOST on these samples (tests/fixtures/r_golden.R)
    w = stopping.welch_arrays(a.mean(), a.var(ddof=1), len(a), b.mean(), b.var(ddof=1), len(b), margin=r.margin)
    # R prints 15 digits; the summaries route differs from R's in the last bits only: rel=1e-9
    assert w["p"] == pytest.approx(r.welch_p, rel=1e-9) and w["df"] == pytest.approx(r.welch_df, rel=1e-9)
    assert w["p_tost"] == pytest.approx(r.tost_p, rel=1e-9)


def test_welch_arrays_information_and_zero_variance():
    w = stopping.welch_arrays(0.3, 1.0, 7, 0.0, 4.0, 9, margin=0.8)
    assert w["info"] == pytest.approx(7 * 9 / 16)
    none = stopping.welch_arrays(1.0, 0.0, 5, 1.0, 0.0, 5)
    assert np.isnan(none["p"]) and np.isnan(none["p_tost"])  # zero variance: undefined, not p = 0


def test_holm_matches_statsmodels():
    rng = np.random.default_rng(1)
    p = 10 ** rng.uniform(-4, 0, size=(40, 5))
    levels = 0.05 / np.arange(1, 6)
    got = stopping.holm(p[..., None] < levels, np.ones(p.shape, bool))
    want = np.array([multipletests(row, 0.05, "holm")[0] for row in p])
    # statsmodels rejects at p_adj <= alpha, holm() at p < alpha / r: equal away from ties
    np.testing.assert_array_equal(got, want)
    # a test that could not be run leaves the family: the other four are Holm over m = 4
    valid = np.ones(p.shape, bool)
    valid[:, 0] = False
    got4 = stopping.holm(p[..., None] < levels, valid)
    want4 = np.array([multipletests(row[1:], 0.05, "holm")[0] for row in p])
    np.testing.assert_array_equal(got4[:, 1:], want4)
    assert not got4[:, 0].any()


def test_conditional_power_matches_simulated_continuation():
    rng = np.random.default_rng(2)
    diff, se, ratio = 0.4, 0.25, 1 / 3  # a third of the information so far
    cp_eff, cp_eq = stopping.conditional_power(diff, se, ratio, 1.0, 2.0, 1.8, 1.0)
    # final estimate = (I1 d1 + I2 d2) / (I1 + I2) with the future part d2 ~ N(diff, se^2 I1 / I2)
    i1, i2 = ratio, 1 - ratio
    d2 = rng.normal(diff, se * np.sqrt(i1 / i2), 400000)
    final = (i1 * diff + i2 * d2) / (i1 + i2)
    se_final = se * np.sqrt(ratio)
    assert cp_eff == pytest.approx(np.mean(np.abs(final) > 2.0 * se_final), abs=3e-3)
    assert cp_eq == pytest.approx(np.mean(np.abs(final) < 1.0 - 1.8 * se_final), abs=3e-3)
    assert stopping.conditional_power(diff, se, ratio, 1.0, 2.0, 1.8, np.nan)[1] == 0.0


def _family(rng, B, m, design, shifts):
    sizes = np.array(design.sizes)
    a = rng.normal(0, 1, (B, m, design.maximum)) + np.asarray(shifts)[None, :, None]
    b = rng.normal(0, 1, (B, 1, design.maximum))
    ma, va = np.stack([a[..., :n].mean(-1) for n in sizes], -1), np.stack([a[..., :n].var(-1, ddof=1) for n in sizes], -1)
    mb, vb = np.stack([b[..., :n].mean(-1) for n in sizes], -1), np.stack([b[..., :n].var(-1, ddof=1) for n in sizes], -1)
    return stopping.welch_arrays(ma, va, sizes, mb, vb, sizes, margin=0.5)


def test_replay_efficacy_is_holm_on_repeated_p_values():
    """The vectorised rule (Holm via per-level boundary hits) equals Holm's adjustment of the
    sequential module's repeated p-values, study by study."""
    rng = np.random.default_rng(4)
    design = stopping.Design(4, 4, 12, futility_power=0.0)
    m, t = 3, np.array(design.sizes) / design.maximum
    w = _family(rng, 6, m, design, [0.0, 1.0, 1.6])
    eff = stopping.level_table(t, design, m, 2, True)
    eq = stopping.level_table(t, design, m, 1, True)
    out = stopping.replay(w["p"], w["p_tost"], w["diff"], w["se"], w["info"], eff, eq, design, 2, 0.5)
    assert out["rejected"].any() and not out["rejected"].all()
    for s in range(6):
        p_rep = []
        for i in range(m):
            k = out["stop"][s, i]
            p_rep.append(repeated.repeated_p(w["p"][s, i, : k + 1], t[: k + 1], design.spending, final=k == 2,
                                             gamma=design.gamma))
        assert np.array_equal(multipletests(p_rep, 0.05, "holm")[1] < 0.05, out["rejected"][s])
        stopped_for_efficacy = out["decision"][s] == stopping.EFFICACY
        assert np.array_equal(stopped_for_efficacy, out["rejected"][s])


def test_replay_stops_large_effects_early_and_null_ones_for_futility():
    rng = np.random.default_rng(5)
    design = stopping.Design(5, 5, 30)
    t = np.array(design.sizes) / design.maximum
    w = _family(rng, 2000, 2, design, [0.0, 3.0])
    eff = stopping.level_table(t, design, 2, 2, True)
    eq = stopping.level_table(t, design, 2, 1, True)
    out = stopping.replay(w["p"], w["p_tost"], w["diff"], w["se"], w["info"], eff, eq, design, 5, np.nan)
    big, null = out["decision"][:, 1], out["decision"][:, 0]
    assert np.mean(big == stopping.EFFICACY) > 0.99 and out["stop"][:, 1].mean() < 2  # 3 SD: by 10 seeds
    assert np.mean(null == stopping.FUTILITY) > 0.8
    assert np.mean(out["rejected"][:, 0]) < 0.05
    assert (out["stop"] >= 0).all()  # every comparison ends with a decision by the last stage


def test_undefined_test_stops_and_leaves_the_family():
    design = stopping.Design(2, 1, 4)
    nan = np.full((1, 2, 3), np.nan)
    p = nan.copy()
    p[0, 1] = [1e-9, 1e-9, 1e-9]
    t = np.array(design.sizes) / 4
    eff = stopping.level_table(t, design, 2, 2, True)
    out = stopping.replay(p, nan, np.ones((1, 2, 3)), np.ones((1, 2, 3)), np.ones((1, 2, 3)), eff, eff,
                          design, 2)
    assert out["decision"][0].tolist() == [stopping.UNDEFINED, stopping.EFFICACY]
