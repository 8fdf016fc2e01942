"""Grid sweeps in the report: per-point table (golden means/SDs), grid groups, figures, CLI."""

from __future__ import annotations

import math
import re
import statistics
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from audit.report import grid
from audit.report.cli import main as report_main
from audit.plots import EMPTY_MARK
from audit.stats.io import load_runs

C_VALUES, K_VALUES, SEEDS = (-1.0, 0.5), (2.0, 2.5), ("1", "2")


def _runs(seed: int = 7) -> pd.DataFrame:
    """A 2x2 (c, k) gss grid over two seeds, a softmax baseline, one failed run (with a finite but
    absurd test perplexity, which must not reach any mean) and a corpus without a grid."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in C_VALUES:
        for k in K_VALUES:
            for s in SEEDS:
                train = 60 + 10 * rng.random()
                rows.append({"corpus": "ptb", "head": f"gss_c{grid.value_label(c)}_k{grid.value_label(k)}",
                             "seed": s, "status": "ok", "arm_group": "gss", "grid_c": c, "grid_k": k,
                             "n_params": 1000.0 + 10 * k, "train_ppl": train, "valid_ppl": train + 30 * rng.random(),
                             "test_ppl": train + 35 + rng.random(), "press_rank": float(rng.integers(300, 900))})
    rows.append({**rows[-1], "seed": "3", "status": "failed", "test_ppl": 1e6, "press_rank": 1.0})
    for corpus in ("ptb", "wt2"):
        for s in SEEDS:
            rows.append({"corpus": corpus, "head": "softmax", "seed": s, "status": "ok", "arm_group": "softmax",
                         "grid_c": math.nan, "grid_k": math.nan, "n_params": 900.0, "train_ppl": 70.0 + int(s),
                         "valid_ppl": 105.0, "test_ppl": 100.0 + 3 * int(s), "press_rank": 400.0})
    return pd.DataFrame(rows)


def _texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def test_grid_groups_name_each_sweep_and_its_options():
    runs = _runs()
    assert grid.grid_groups(runs) == [("ptb", "gss", ["c", "k"])]
    # a second sweep of one option in another corpus; options listed in the table's column order
    mos = pd.DataFrame([{"corpus": "wt2", "head": f"mos_K{K}", "seed": "1", "status": "ok", "arm_group": "mos",
                         "grid_experts": float(K), "test_ppl": 90.0} for K in (2, 4)])
    both = pd.concat([runs, mos], ignore_index=True)
    assert grid.grid_groups(both) == [("ptb", "gss", ["c", "k"]), ("wt2", "mos", ["experts"])]
    assert grid.grid_groups(runs.drop(columns=["grid_c", "grid_k"])) == []


def test_grid_table_matches_means_and_sds_computed_by_hand():
    """Golden values from the statistics module: ok runs only, gap = test - train per run."""
    runs = _runs()
    table = grid.grid_table(runs)
    assert list(table.columns[:9]) == ["corpus", "group", "head", "c", "k", "n_ok", "n_failed",
                                       "test_ppl_mean", "test_ppl_sd"]
    # sorted by corpus, group, options; the baseline of the grid's corpus only (wt2 has no grid)
    assert list(zip(table["group"], table["c"].fillna(99), table["k"].fillna(99))) == \
        [("gss", c, k) for c in C_VALUES for k in K_VALUES] + [("softmax", 99, 99)]
    assert set(table["corpus"]) == {"ptb"}
    for row in table.to_dict("records"):
        arm = runs[(runs["corpus"] == "ptb") & (runs["head"] == row["head"])]
        ok = arm[arm["status"] == "ok"]
        assert row["n_ok"] == len(ok) == 2
        assert row["n_failed"] == (1 if row["head"] == "gss_c0.5_k2.5" else 0)
        columns = {"test_ppl": ok["test_ppl"], "valid_ppl": ok["valid_ppl"], "train_ppl": ok["train_ppl"],
                   "gap": ok["test_ppl"] - ok["train_ppl"], "press_rank": ok["press_rank"],
                   "n_params": ok["n_params"]}
        for metric, values in columns.items():
            values = [float(v) for v in values]
            assert row[f"{metric}_mean"] == pytest.approx(statistics.fmean(values), rel=1e-12)
            assert row[f"{metric}_sd"] == pytest.approx(statistics.stdev(values), rel=1e-12, abs=1e-12)
    base = table[table["head"] == "softmax"].iloc[0]
    assert base["gap_mean"] == pytest.approx(33.0) and base["gap_sd"] == pytest.approx(math.sqrt(2))


def test_failed_cell_is_counted_and_a_single_seed_has_no_sd():
    runs = _runs()
    cell = runs["head"] == "gss_c-1_k2"
    runs.loc[cell & (runs["seed"] == "1"), "status"] = "failed"
    table = grid.grid_table(runs).set_index("head")
    assert table.loc["gss_c-1_k2", "n_ok"] == 1 and table.loc["gss_c-1_k2", "n_failed"] == 1
    assert np.isnan(table.loc["gss_c-1_k2", "test_ppl_sd"])
    runs.loc[cell, "status"] = "failed"
    table = grid.grid_table(runs).set_index("head")
    assert table.loc["gss_c-1_k2", "n_ok"] == 0 and table.loc["gss_c-1_k2", "n_failed"] == 2
    assert np.isnan(table.loc["gss_c-1_k2", "test_ppl_mean"])
    assert grid.grid_table(runs.drop(columns=["grid_c", "grid_k"])).empty


def test_figures_are_deterministic_svg_with_the_cell_labels():
    runs = _runs()
    for draw in (grid.grid_rank_vs_ppl, grid.grid_heatmaps, grid.grid_lines):
        svg = draw(runs)
        ET.fromstring(svg.encode())  # well-formed XML
        assert EMPTY_MARK not in svg and svg == draw(runs) and "<dc:date>" not in svg
    texts = _texts(grid.grid_rank_vs_ppl(runs))
    assert {"(-1, 2)", "(-1, 2.5)", "(0.5, 2)", "(0.5, 2.5)", "softmax"} <= set(texts)
    lines = _texts(grid.grid_lines(runs))
    assert {"k=2", "k=2.5", "softmax (off grid)"} <= set(lines)


def test_heatmap_cells_hold_the_means_and_mark_failed_cells():
    runs = _runs()
    runs.loc[runs["head"] == "gss_c-1_k2", "status"] = "failed"
    table = grid.grid_table(runs).set_index("head")
    texts = _texts(grid.grid_heatmaps(runs))
    assert texts.count("failed") == 2  # one cell in each of the two heatmaps
    for head in ("gss_c-1_k2.5", "gss_c0.5_k2"):
        assert f"{table.loc[head, 'test_ppl_mean']:.1f}" in texts
        assert f"{table.loc[head, 'press_rank_mean']:.0f}" in texts
    assert "(1 failed)" in texts  # the cell with a failed seed beside its ok ones


def test_heatmaps_skip_grids_that_are_not_two_dimensional():
    one = _runs().drop(columns="grid_k")
    one = one[~one["head"].str.endswith("k2.5")]
    assert grid.grid_groups(one) == [("ptb", "gss", ["c"])]
    svg = grid.grid_heatmaps(one)
    assert EMPTY_MARK in svg and "exactly two swept options" in svg
    assert EMPTY_MARK not in grid.grid_lines(one) and EMPTY_MARK not in grid.grid_rank_vs_ppl(one)
    assert EMPTY_MARK in grid.grid_lines(one.drop(columns="grid_c"))


def test_cli_writes_the_grid_table_and_figure(tmp_path):
    runs_path, out = tmp_path / "runs.csv", tmp_path / "tables" / "grid.csv"
    _runs().to_csv(runs_path, index=False)
    assert report_main(["table", "--name", "grid", "--runs", str(runs_path), "--out", str(out)]) == 0
    written = pd.read_csv(out)
    expected = grid.grid_table(load_runs(runs_path))
    pd.testing.assert_frame_equal(written, expected, check_dtype=False)
    assert written.loc[written["head"] == "gss_c0.5_k2.5", "n_failed"].item() == 1
    figure = tmp_path / "grid_heatmaps.svg"
    assert report_main(["figure", "--name", "grid_heatmaps", "--runs", str(runs_path), "--out", str(figure)]) == 0
    assert "failed" not in _texts(figure.read_text()) and "c" in _texts(figure.read_text())
