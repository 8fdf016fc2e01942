"""Word-similarity tables: the wins matrix and the paired bootstrap over word pairs and seeds."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from audit.stats.io import Settings
from audit.stats.wordsim import DIFF_COLUMNS, WINS_COLUMNS, diffs_table, resampled_spearman, wins_table

FAST = Settings(bootstrap_resamples=2000)


def test_wins_counts_benchmarks_where_mean_rho_is_higher():
    rng = np.random.default_rng(0)
    rows = []
    for h in ("softmax", "mos", "plif"):
        for s in range(3):
            rows.append({"corpus": "ptb", "head": h, "seed": str(s), "status": "ok",
                         **{f"wordsim_B{b}": rng.uniform() for b in range(13)}})
    rows.append({"corpus": "ptb", "head": "mos", "seed": "9", "status": "failed",
                 **{f"wordsim_B{b}": 99.0 for b in range(13)}})   # must not count
    runs = pd.DataFrame(rows)
    t = wins_table(runs)
    assert list(t.columns) == WINS_COLUMNS and len(t) == 6
    means = runs[runs.status == "ok"].groupby("head")[[f"wordsim_B{b}" for b in range(13)]].mean()
    for r in t.itertuples():
        assert r.wins == int((means.loc[r.head_i] > means.loc[r.head_j]).sum())
        assert r.wins + r.losses + r.ties == r.n_benchmarks == 13
        back = t[(t.head_i == r.head_j) & (t.head_j == r.head_i)].iloc[0]
        assert back.wins == r.losses
    assert t[t.head_i == "mos"].n_failed_i.iloc[0] == 1
    assert wins_table(runs.drop(columns=[c for c in runs if c.startswith("wordsim_")])).empty


def _pairs(noise, n_pairs=60, seeds=6, corpus="ptb", bench="EN-X", seed=0, common=0.0):
    """Per-pair rows: cosine = gold-derived signal + shared noise + head-specific noise."""
    rng = np.random.default_rng(seed)
    gold = np.round(rng.uniform(0, 10, n_pairs))                 # integer ratings: ties
    shared = rng.normal(0, common, n_pairs)
    rows = []
    for head, sd in noise.items():
        for s in range(seeds):
            cos = gold / 10 + shared + rng.normal(0, sd, n_pairs)
            rows += [dict(corpus=corpus, head=head, seed=str(s), benchmark=bench, word1=f"a{i}",
                          word2=f"b{i}", gold=g, cosine=c) for i, (g, c) in enumerate(zip(gold, cos))]
    return pd.DataFrame(rows)


def test_point_estimates_are_mean_spearman_over_seeds():
    pairs = _pairs({"softmax": 0.2, "mos": 0.6})
    t = diffs_table(pairs, FAST)
    assert list(t.columns) == DIFF_COLUMNS and len(t) == 1
    row = t.iloc[0]
    # Spearman as the Pearson correlation of average ranks (the module calls scipy's spearmanr)
    spearman = lambda g: np.corrcoef(stats.rankdata(g.gold), stats.rankdata(g.cosine))[0, 1]
    rho = {h: np.mean([spearman(g) for _, g in d.groupby("seed")])
           for h, d in pairs.groupby("head")}
    assert (row.rho_a, row.rho_b) == pytest.approx((rho["softmax"], rho["mos"]))
    assert row.diff_ci_low < row["diff"] < row.diff_ci_high
    assert row.verdict == "a_better" and row.p_adj < 0.05
    assert (row.n_pairs, row.n_seeds_a, row.bootstrap_seed) == (60, 6, 12345)


def test_resampled_spearman_equals_scipy_on_the_expanded_resample():
    rng = np.random.default_rng(1)
    gold = np.round(rng.uniform(0, 5, 30))                       # tied ratings
    cos = rng.normal(size=(2, 30))
    cos[1, :6] = 0.25                                            # tied cosines too
    idx = rng.integers(0, 30, size=(5, 30))                      # duplicates add more ties
    weights = np.stack([np.bincount(i, minlength=30) for i in idx]).astype(float)
    got = resampled_spearman(gold, cos, weights)
    want = [[stats.spearmanr(gold[i], cos[s][i]).statistic for s in range(2)] for i in idx]
    assert got == pytest.approx(np.array(want), abs=1e-12)


def test_p_value_is_bootstrap_se_z_test():
    row = diffs_table(_pairs({"softmax": 0.2, "mos": 0.6}), FAST).iloc[0]
    # the percentile CI and the z-test agree on the sign and on significance here
    assert row.boot_p < 0.05 and row.diff_ci_low > 0
    assert 0 < row.boot_p < 2 / (FAST.bootstrap_resamples + 1)   # not floored like a count p
    # z from the normal approximation: the CI half-width is about 1.96 SE
    se = (row.diff_ci_high - row.diff_ci_low) / (2 * 1.96)
    assert row.boot_p == pytest.approx(2 * stats.norm.sf(abs(row["diff"]) / se), rel=0.5)


def test_paired_bootstrap_keeps_the_dependence():
    # two heads that share almost all their noise: their rhos move together across word-pair
    # resamples, so the paired CI of the difference is far narrower than an unpaired one
    pairs = _pairs({"softmax": 0.02, "sigsoftmax": 0.02}, common=0.5, seeds=5)
    row = diffs_table(pairs, FAST).iloc[0]
    paired_width = row.diff_ci_high - row.diff_ci_low
    rng = np.random.default_rng(0)
    heads = {h: d for h, d in pairs.groupby("head")}
    unpaired = []
    for _ in range(300):
        vals = []
        for h in ("softmax", "sigsoftmax"):
            d = heads[h][heads[h].seed == "0"]
            i = rng.integers(0, len(d), len(d))                  # resampled independently
            vals.append(stats.spearmanr(d.gold.to_numpy()[i], d.cosine.to_numpy()[i]).statistic)
        unpaired.append(vals[0] - vals[1])
    unpaired_width = np.subtract(*np.percentile(unpaired, [97.5, 2.5]))
    assert paired_width < unpaired_width / 3
    assert row.diff_ci_low < 0 < row.diff_ci_high


def test_failed_runs_missing_pairs_and_too_few_seeds():
    pairs = _pairs({"softmax": 0.2, "mos": 0.3}, seeds=6)
    pairs = pairs[~((pairs["head"] == "mos") & (pairs["seed"] == "0") & (pairs["word1"] == "a5"))]  # one gap
    runs = pd.DataFrame([dict(corpus="ptb", head="mos", seed=str(s), status="failed" if s < 2 else "ok")
                         for s in range(6)])
    row = diffs_table(pairs, FAST, runs).iloc[0]
    assert (row.n_seeds_b, row.n_failed_b) == (4, 2)
    assert (row.n_pairs, row.n_pairs_dropped) == (60, 0)       # the gap was in a failed run
    assert row.verdict == "inconclusive" and row.reason.startswith("too few seeds")
    assert np.isnan(row.p_adj) and row.family_dropped == 1
    row = diffs_table(pairs, FAST).iloc[0]
    assert (row.n_pairs, row.n_pairs_dropped) == (59, 1)


def test_a_seed_with_constant_cosines_makes_the_row_undefined_not_insignificant():
    # issue 20: its Spearman rho is undefined, so the head's mean rho is NaN; the verdict says so
    pairs = _pairs({"softmax": 0.2, "mos": 0.3}, seeds=6)
    pairs.loc[(pairs["head"] == "mos") & (pairs["seed"] == "3"), "cosine"] = 0.5
    row = diffs_table(pairs, FAST).iloc[0]
    assert np.isnan(row.rho_b) and np.isnan(row.boot_p) and np.isnan(row.p_adj) and row.family_dropped == 1
    assert row.verdict == "inconclusive"
    assert row.reason == ("undefined: Spearman rho has no value for mos in 1 of 6 seed(s) (constant cosines "
                          "or gold ratings over the common word pairs)")


def test_empty_pairs_give_header_only():
    empty = pd.DataFrame(columns=["corpus", "head", "seed", "benchmark", "word1", "word2", "gold", "cosine"])
    assert list(diffs_table(empty, FAST).columns) == DIFF_COLUMNS
