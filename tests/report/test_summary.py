"""Report tables: golden values from scipy/numpy computed independently inside the tests."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from audit.report import summary


def _runs() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    rows = []
    for head, mu in (("softmax", 100.0), ("mos", 95.0)):
        for seed in range(1, 6):
            rows.append({"corpus": "ptb", "head": head, "seed": str(seed), "status": "ok",
                         "n_params": 1000, "wall_seconds": 100.0 + seed, "epochs_run": 4,
                         "train_ppl": mu - 20, "valid_ppl": mu + 3, "test_ppl": mu + rng.standard_normal(),
                         "press_rank": 40 + seed, "wordsim_EN-RG-65": 0.2 + 0.3 * rng.random()})
    rows.append({"corpus": "ptb", "head": "mos", "seed": "6", "status": "failed", "n_params": 1000})
    return pd.DataFrame(rows)


def test_describe_matches_scipy_t_interval():
    x = np.array([3.1, 2.7, 3.9, 3.3, 2.8])
    low, high = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    d = summary.describe(x)
    assert d["n"] == 5 and d["mean"] == pytest.approx(x.mean()) and d["sd"] == pytest.approx(x.std(ddof=1))
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((low, high))
    assert np.isnan(summary.describe([4.0])["sd"]) and summary.describe([np.nan])["n"] == 0


def test_results_table_counts_failed_runs_and_places_heads():
    runs = _runs()
    table = summary.results_table(runs).set_index("head")
    assert table.loc["mos", "n"] == 5 and table.loc["mos", "failed"] == 1
    ok = runs[(runs["head"] == "softmax")]
    assert table.loc["softmax", "test_ppl_mean"] == pytest.approx(ok["test_ppl"].mean())
    assert table.loc["softmax", "seconds_per_epoch_mean"] == pytest.approx((ok["wall_seconds"] / 4).mean())
    assert table.loc["mos", "place"] == 1 and table.loc["softmax", "place"] == 2


def test_n_counts_only_runs_with_a_finite_value_of_the_metric():
    # issue 20: an ok run without a test perplexity is left out of the mean, so out of n too
    runs = _runs()
    runs.loc[(runs["head"] == "softmax") & (runs["seed"] == "2"), ["test_ppl", "press_rank"]] = np.nan
    table = summary.results_table(runs).set_index("head")
    assert (table.loc["softmax", "n"], table.loc["softmax", "n_ok"], table.loc["softmax", "test_ppl_n"]) == (4, 5, 4)
    assert table.loc["softmax", "valid_ppl_n"] == 5 and table.loc["mos", "n"] == 5
    ranks = summary.ranks_table(runs).set_index("head")
    assert ranks.loc["softmax", "n"] == ranks.loc["softmax", "press_rank_n"] == 4
    assert ranks.loc["softmax", "press_rank_mean"] == pytest.approx((41 + 43 + 44 + 45) / 4)


def test_ranks_table_mean_and_sd():
    table = summary.ranks_table(_runs()).set_index("head")
    assert table.loc["softmax", "press_rank_mean"] == pytest.approx(43.0)
    assert table.loc["softmax", "press_rank_sd"] == pytest.approx(np.std([41, 42, 43, 44, 45], ddof=1))
    assert summary.ranks_table(_runs().drop(columns="press_rank")).empty


def test_wordsim_rho_interval_on_fisher_z_scale_stays_inside_one():
    runs = _runs()
    table = summary.wordsim_rho_table(runs).set_index("head")
    rho = runs[(runs["head"] == "mos") & (runs["status"] == "ok")]["wordsim_EN-RG-65"].to_numpy()
    z = np.arctanh(rho)
    low, high = stats.t.interval(0.95, len(z) - 1, loc=z.mean(), scale=stats.sem(z))
    assert table.loc["mos", "mean"] == pytest.approx(rho.mean())
    assert (table.loc["mos", "ci_low"], table.loc["mos", "ci_high"]) == pytest.approx((np.tanh(low), np.tanh(high)))
    wide = summary.describe_correlation([0.99, 0.2, 0.95])
    assert -1 < wide["ci_low"] < wide["ci_high"] < 1


def test_coverage_table_from_eval_json(tmp_path):
    for head, found in (("softmax", 50), ("mos", 50)):
        run = tmp_path / "ptb" / head / "1"
        run.mkdir(parents=True)
        (run / "eval.json").write_text(json.dumps({"wordsim_pairs": {"EN-RG-65": 65},
                                                   "wordsim_found": {"EN-RG-65": found}}))
    table = summary.coverage_table(sorted(tmp_path.glob("ptb/*/1")))
    row = table.iloc[0]
    assert (row["corpus"], row["pairs"], row["found"], row["oov_pairs"], row["runs"]) == ("ptb", 65, 50, 15, 2)
    assert row["coverage"] == pytest.approx(50 / 65) and bool(row["consistent"])


def test_topk_table_counts_seeds_and_skips_failed_runs(tmp_path):
    columns = "position,context,target,target_rank,in_top_k,top\n"
    rows = {("softmax", 1): "3,the cat,sat,2,True,on sat the a in\n7,a dog,ran,9,False,the a in on of\n",
            ("softmax", 2): "3,the cat,sat,7,False,on the a in of\n7,a dog,ran,1,True,ran the a in on\n",
            ("mos", 1): ""}  # a failed run writes only the header
    dirs = []
    for (head, seed), body in rows.items():
        run_dir = tmp_path / "ptb" / head / str(seed)
        run_dir.mkdir(parents=True)
        (run_dir / "topk.csv").write_text(columns + body)
        dirs.append(run_dir)
    table = summary.topk_table(dirs)
    assert list(table["head"]) == ["softmax", "softmax"] and list(table["position"]) == [3, 7]
    first = table.iloc[0]
    assert (first["seeds"], first["in_top_k"], first["median_rank"]) == (2, 1, 4.5)
    assert first["top"] == "on sat the a in" and first["context"] == "the cat" and first["target"] == "sat"
