"""Figures: deterministic SVG bytes, one mark per run, escaped text, clean 'no data' output."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from audit.plots import EMPTY_MARK
from audit.report import figures


def _runs(rng: np.random.Generator, heads=("softmax", "sigsoftmax"), seeds=(1, 2, 3, 4)) -> pd.DataFrame:
    rows = [{"corpus": "ptb", "head": h, "seed": str(s), "status": "ok",
             "test_ppl": 100 + i + rng.standard_normal(), "press_rank": 400 + 100 * i + s}
            for i, h in enumerate(heads) for s in seeds]
    rows.append({"corpus": "ptb", "head": heads[0], "seed": "9", "status": "failed",
                 "test_ppl": np.nan, "press_rank": np.nan})
    return pd.DataFrame(rows)


def _marks(svg: str) -> int:
    """Scatter points: each marker of a PathCollection (scatter, legend handle) is one <use>."""
    groups = re.findall(r'<g id="PathCollection_\d+">(.*?)</g>', svg, flags=re.S)
    return sum(group.count("<use ") for group in groups)


RENDER = """
import sys
import numpy as np
from audit.report import figures
sys.path.insert(0, {tests!r})
from report.test_figures import _runs
curves = {{("ptb", "softmax"): [np.linspace(5, 1, 30)], ("ptb", "mos"): [np.linspace(9, 0, 30)]}}
sys.stdout.write(figures.seed_strip(_runs(np.random.default_rng(1))) + "\\0" + figures.rank_decay(curves))
"""


def test_same_inputs_give_identical_bytes_in_another_process():
    """Byte-identical SVG from a second process with another hash seed: matplotlib's ids come
    from svg.hashsalt, not a random uuid, and no date is written (same machine and versions)."""
    runs = _runs(np.random.default_rng(1))
    curves = {("ptb", "softmax"): [np.linspace(5, 1, 30)], ("ptb", "mos"): [np.linspace(9, 0, 30)]}
    here = [figures.seed_strip(runs), figures.rank_decay(curves)]
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    code = RENDER.format(tests=str(Path(__file__).resolve().parents[1]))
    there = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           check=True).stdout.split("\0")
    assert there == here
    assert "<dc:date>" not in here[1]


def test_strip_shows_every_successful_seed():
    """One point per ok run; the failed run is not drawn; head labels are text (fonttype none)."""
    runs = _runs(np.random.default_rng(2))
    svg = figures.seed_strip(runs)
    assert _marks(svg) == int((runs["status"] == "ok").sum())
    assert "sigsoftmax" in svg and "(n=4)" in svg


def test_rank_vs_ppl_prints_the_correlation_row():
    """The unrestricted run-level Pearson r of the correlations table appears in the panel."""
    runs = _runs(np.random.default_rng(3))
    corr = pd.DataFrame([{"corpus": "ptb", "x": "press_rank", "y": "test_ppl", "level": "runs",
                          "restriction": "none", "pearson_r": 0.4321, "pearson_ci_low": 0.1,
                          "pearson_ci_high": 0.7, "pearson_perm_p": 0.012, "spearman_rho": 0.3,
                          "spearman_ci_low": 0.0, "spearman_ci_high": 0.6, "n": 8}])
    svg = figures.rank_vs_metric(runs, corr)
    assert "Pearson r = 0.43 [0.10, 0.70]" in svg
    assert _marks(svg) == 8 + 2  # 8 runs and one legend marker per head
    assert "no correlation declared" in figures.rank_vs_metric(runs, None)


def test_markup_in_a_head_name_is_escaped():
    runs = _runs(np.random.default_rng(4), heads=("softmax", "<b>evil</b>"))
    svg = figures.seed_strip(runs)
    assert "<b>" not in svg and "&lt;b&gt;evil&lt;/b&gt;" in svg


def test_wins_heatmap_cells():
    wins = pd.DataFrame([{"corpus": "ptb", "head_i": "a", "head_j": "b", "wins": 11, "n_benchmarks": 13},
                         {"corpus": "ptb", "head_i": "b", "head_j": "a", "wins": 7, "n_benchmarks": 13}])
    svg = figures.wins_heatmap(wins)
    assert "benchmarks (of 13) where i beats j" in svg
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    # the two off-diagonal counts (odd, so no colour-bar tick label can match; the diagonal is blank)
    assert "11" in texts and "7" in texts


def test_no_data_gives_an_empty_marked_figure():
    """Figures without data are small SVGs carrying EMPTY_MARK, so the page leaves them out."""
    runs = _runs(np.random.default_rng(5))
    failed = runs.assign(status="failed")
    for svg in (figures.seed_strip(failed), figures.rank_decay({("ptb", "softmax"): [np.array([])]}),
                figures.wins_heatmap(pd.DataFrame()), figures.rank_vs_metric(runs.drop(columns="press_rank"), None)):
        assert EMPTY_MARK in svg and svg.lstrip().startswith("<?xml")
    assert EMPTY_MARK not in figures.seed_strip(runs)


def test_jacobian_figure_draws_one_line_per_head_and_the_threshold():
    curves = {("ptb", "softmax"): [np.array([1.0, 0.5, 1e-5]), np.array([1.0, 0.3, 1e-6])],
              ("ptb", "mos"): [np.array([1.0, 0.9, 0.2])]}
    svg = figures.jacobian_spectra(curves, threshold=1e-3)
    assert "softmax (n=2)" in svg and "mos (n=1)" in svg and "threshold 0.001" in svg
    assert EMPTY_MARK in figures.jacobian_spectra({})


def test_forest_marks_holm_significance_and_draws_the_multibootstrap_ci_only_when_present():
    """A filled marker exactly for a difference, read from the row's decision record (its verdict,
    never a level re-read here); the multi-bootstrap legend entry only with mb_* columns."""
    import pandas as pd

    from audit.report.forest import forest, significant

    assert significant({"verdict": "a_better", "p_adj": 0.049}) and significant({"verdict": "b_better"})
    assert not significant({"verdict": "inconclusive", "p_adj": 0.01, "alpha": 0.05})   # the verdict rules
    assert not significant({"verdict": "equivalent"})
    # a table without verdicts: its interval, which excludes 0 exactly where Holm rejects
    assert significant({"diff_ci_low": 0.1, "diff_ci_high": 0.5}) and not significant({"diff_ci_low": -0.1, "diff_ci_high": 0.5})
    assert not significant({"p_adj": float("nan")})
    rows = pd.DataFrame(dict(family="f", metric="test_ppl", corpus="ptb", head_a=["a", "b"], head_b="s",
                             diff=[-1.0, 0.1], diff_ci_low=[-1.5, -0.2], diff_ci_high=[-0.5, 0.4],
                             p_adj=[0.01, 0.6], alpha=0.05, equivalence_margin=0.2))
    assert "multi-bootstrap" not in forest(rows, "t")
    assert "multi-bootstrap" in forest(rows.assign(mb_ci_low=[-2.0, -0.5], mb_ci_high=[0.0, 0.7]), "t")


def test_forest_draws_a_guarded_row_as_not_informative_whatever_its_p():
    """A row the guard labelled (audit.stats.guard) is a grey cross named "not informative", never
    a filled marker, though its p_adj is below alpha (issue 33: markers were filled from p_adj alone)."""
    import pandas as pd

    from audit.report.forest import forest, mark

    rows = pd.DataFrame(dict(family="f", metric="test_ppl", corpus="ptb", head_a=["a", "b"], head_b="s",
                             diff=[-1.0, 0.1], diff_ci_low=[-1.5, -0.2], diff_ci_high=[-0.5, 0.4],
                             p_adj=[0.01, 0.6], alpha=0.05, verdict=["a_better", "inconclusive"]))
    guarded = rows.assign(verdict=["not_informative", "inconclusive"])
    assert [mark(r) for r in rows.to_dict("records")] == ["significant", "not_significant"]
    assert [mark(r) for r in guarded.to_dict("records")] == ["not_informative", "not_significant"]
    plain, svg = forest(rows, "t"), forest(guarded, "t")
    assert "not informative" not in plain
    assert "ptb: a vs s · not informative" in svg and "not informative (the guard; any p)" in svg
    # the filled blue marker is left only in the legend: one fewer than without the guard
    assert svg.count("fill: #1d4e89") == plain.count("fill: #1d4e89") - 1
