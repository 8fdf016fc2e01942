"""``python -m audit report table|figure``: the CLI builds each registry entry with its builder,
refuses a missing required input, and takes a new entry without any change of its own."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audit.errors import AuditError
from audit.report import registry, summary
from audit.report.cli import build_parser, main
from audit.stats.io import load_runs
from support.demo import fabricate_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return fabricate_study(tmp_path_factory.mktemp("cli"), np.random.default_rng(11))


def test_name_choices_are_the_registry_report_entries():
    sub = build_parser()._subparsers._group_actions[0].choices
    for kind in ("table", "figure"):
        name = next(a for a in sub[kind]._actions if a.dest == "name")
        assert list(name.choices) == [e.name for e in registry.entries(kind, "report")]


def test_table_written_by_the_cli_is_the_builder_table(study, tmp_path):
    out = tmp_path / "results.csv"
    assert main(["table", "--name", "results", "--runs", str(study["runs"]), "--out", str(out)]) == 0
    expected = summary.results_table(load_runs(study["runs"]))
    pd.testing.assert_frame_equal(pd.read_csv(out), expected, check_dtype=False)
    assert len(expected) == 3  # one row per head of the fabricated study


def test_per_run_table_reads_the_run_folders(study, tmp_path):
    out = tmp_path / "coverage.csv"
    dirs = [str(d) for d in study["run_dirs"]]
    assert main(["table", "--name", "wordsim_coverage", "--run-dirs", *dirs, "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(out), summary.coverage_table(dirs), check_dtype=False)


def test_missing_runs_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "strip.svg"
    with pytest.raises(AuditError, match="report figure --name strip needs --runs"):
        main(["figure", "--name", "strip", "--out", str(out)])
    assert not out.exists()


def test_options_reach_the_builder(study, tmp_path, monkeypatch):
    seen = {}

    def fake_strip(runs, metric, level):
        seen["metric"] = metric
        return "<svg/>"

    monkeypatch.setattr("audit.report.figures.seed_strip", fake_strip)
    out = tmp_path / "strip.svg"
    main(["figure", "--name", "strip", "--runs", str(study["runs"]), "--metric", "valid_ppl", "--out", str(out)])
    assert seen == {"metric": "valid_ppl"} and out.read_text() == "<svg/>"
    main(["figure", "--name", "strip", "--runs", str(study["runs"]), "--out", str(out)])
    assert seen == {"metric": "test_ppl"}  # the builder's default when the option is not given


def test_a_new_registry_entry_is_a_new_cli_table(study, tmp_path, monkeypatch):
    """Adding a table is one entry + one builder: the CLI needs no change."""
    def heads(src):
        return src.runs().groupby("head", as_index=False).size()

    entry = registry.Output("head_counts", "table", heads, ("runs",))
    monkeypatch.setattr(registry, "REGISTRY", registry.REGISTRY + (entry,))
    out = tmp_path / "head_counts.csv"
    assert main(["table", "--name", "head_counts", "--runs", str(study["runs"]), "--out", str(out)]) == 0
    assert pd.read_csv(out).set_index("head")["size"].to_dict() == {"mos": 5, "sigsoftmax": 5, "softmax": 5}
