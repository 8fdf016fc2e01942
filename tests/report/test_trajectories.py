"""The trajectory tables and figure as the report rules build them (audit.report.builders through
the registry's CLI), from constructed run folders: no training, no statistics tables needed."""

from __future__ import annotations

import pandas as pd
import pytest

from audit.report import cli, levels
from audit.report.trajectories import page_marks
from tests.support.trajectory_study import fast_and_worse, slow_and_better, study_config, write_study


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The constructed fast-but-worse study, its two trajectory tables and the figure, each written
    by ``python -m audit report`` as its Snakemake rule runs it."""
    root = tmp_path_factory.mktemp("trajectory")
    _, dirs = write_study(root, {"fast": fast_and_worse, "slow": slow_and_better})
    study_config(root, "fast", "slow")
    common = ["--runs", str(root / "runs.csv"), "--config", str(root / "study.yaml"), "--run-dirs", *dirs]
    out = {name: root / f"{name}.{ext}" for name, ext in (("trajectories", "csv"), ("trajectory_marks", "csv"),
                                                          ("figure", "svg"))}
    assert cli.main(["table", "--name", "trajectories", *common, "--out", str(out["trajectories"])]) == 0
    assert cli.main(["table", "--name", "trajectory_marks", *common, "--trajectories", str(out["trajectories"]),
                     "--out", str(out["trajectory_marks"])]) == 0
    assert cli.main(["figure", "--name", "trajectories", "--runs", str(root / "runs.csv"), "--run-dirs", *dirs,
                     "--trajectories", str(out["trajectories"]), "--trajectory-marks", str(out["trajectory_marks"]),
                     "--out", str(out["figure"])]) == 0
    return out


def test_the_rules_write_the_trajectory_and_its_marks(built):
    table = pd.read_csv(built["trajectories"])
    assert sorted(table["epoch"].unique()) == list(range(1, 9))
    assert set(table["data"]) == {"validation, descriptive: a verdict per budget, not corrected over budgets"}
    marks = pd.read_csv(built["trajectory_marks"])
    claim = marks[marks["trace"] == "a-lowers-ppl"].iloc[0]
    assert claim["mark"] == "changed" and claim["since_tokens"] == 900_000
    # read back from CSV (empty look and claim_id cells), the page finds every claim's mark
    said = page_marks(marks)
    assert said["by_claim"][("a-lowers-ppl", "ptb")]["mark_head"].startswith("changed at 900,000 tokens")
    assert said["by_claim"][("a-raises-rank", "ptb")]["mark"] == "not traced"
    assert said["counts"] == {"changed": 1} and said["n_traced"] == 1
    assert [r["trace"] for r in said["comparisons"]] == ["pair: fast - slow"]


def test_the_figure_draws_one_small_multiple_per_traced_claim_with_its_mark(built):
    svg = built["figure"].read_text()
    assert svg.count("a-lowers-ppl (ptb)") == 1 and "a-raises-rank" not in svg
    assert "changed at 900,000 tokens" in svg
    level = pd.read_csv(built["trajectories"])["ci_level"].iloc[0]
    assert "fast − slow" in svg and f"band {levels.level(level)})" in svg   # the band's level, from the rows
    # one point per budget in each verdict's colour: 5 supported (green), 3 contradicted (red)
    assert svg.count("#1e8a44") >= 5 and svg.count("#c0282d") >= 3


def test_a_study_without_a_traced_claim_draws_an_empty_figure():
    from audit.plots import EMPTY_MARK
    from audit.report.trajectories import trajectory_figure

    empty = pd.DataFrame(columns=["kind", "claim_id", "corpus", "look", "epoch"])
    assert EMPTY_MARK in trajectory_figure(empty, pd.DataFrame(), pd.DataFrame(), None)
