"""The sequential-design simulation: error rate under the null, power and seeds under LK's effects."""

import io
import math
from contextlib import redirect_stdout

import numpy as np
import pandas as pd
import pytest

from audit.bench import sequential as bench, sequential_sim
from audit.stats.sequential import stopping


def run(*args) -> pd.DataFrame:
    out = io.StringIO()
    with redirect_stdout(out):
        assert bench.main(list(args)) == 0
    return pd.read_csv(io.StringIO(out.getvalue()))


def test_prefix_stats_are_means_and_sample_variances():
    x = np.random.default_rng(0).normal(size=(3, 2, 12))
    mean, var = sequential_sim.prefix_stats(x, [2, 5, 12])
    for j, n in enumerate([2, 5, 12]):
        np.testing.assert_allclose(mean[..., j], x[..., :n].mean(-1))
        np.testing.assert_allclose(var[..., j], x[..., :n].var(-1, ddof=1))


@pytest.mark.parametrize("futility", [0.1, 0.0])
def test_family_wise_error_under_the_null_stays_at_alpha(futility):
    sims = 3000
    design = stopping.Design(futility_power=futility)  # the default design
    for corpus in ("ptb", "wt2"):
        means, sds = zip(*bench.EFFECTS["table1"][corpus])
        res = bench.simulate([means[0]] * 5, sds, design, sims, np.random.default_rng(7))
        fwer = res["out"]["rejected"].any(-1).mean()
        assert fwer <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / sims), (corpus, fwer)


def test_csv_rows_power_and_seeds_under_lk_effects():
    df = run("--sims", "1500", "--seed", "3")
    assert {"scenario", "sims", "reject_rate", "mc_se", "power", "mean_seeds_per_arm",
            "fixed_seeds_same_power"} <= set(df.columns)
    assert set(df["scenario"]) == {"ptb-null", "ptb-table1", "wt2-null", "wt2-table1"}
    assert len(df) == 4 * 5 and (df["sims"] == 1500).all()
    np.testing.assert_allclose(df["mc_se"], np.sqrt(df["reject_rate"] * (1 - df["reject_rate"]) / 1500),
                               rtol=0, atol=2e-6)  # printed to 6 significant digits
    assert df.loc[df["scenario"].str.endswith("null"), "power"].isna().all()
    mos = df[(df["scenario"] == "ptb-table1") & (df["comparison"] == "mos-vs-softmax")].iloc[0]
    # MoS is 2.2 ppl (about 11 SE at 5 seeds) better: always found, never with all 30 seeds
    assert mos["power"] > 0.99 and mos["mean_seeds_per_arm"] < 15
    ss = df[(df["scenario"] == "ptb-table1") & (df["comparison"] == "ss-vs-softmax")].iloc[0]
    assert ss["power"] < 0.5  # 0.05 ppl at SD 0.1-0.15: no design of <= 30 seeds finds it reliably
    fam = df[df["comparison"] == "family"]
    assert (fam["seeds_study_fixed10"] == 50).all()
    assert np.all(fam["mean_seeds_per_arm"] <= 30) and np.all(fam["mean_seeds_per_arm"] >= stopping.Design().initial)


def test_same_seed_same_numbers():
    a = run("--sims", "300", "--seed", "5", "--spending", "pocock", "--margin", "0.3")
    b = run("--sims", "300", "--seed", "5", "--spending", "pocock", "--margin", "0.3")
    pd.testing.assert_frame_equal(a, b)
    assert a["stops"].str.contains("equivalence").any()  # with a margin, near-null heads stop as equivalent
