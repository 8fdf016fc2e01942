"""The registry of report tables and figures: entries well-formed, the tables and figures each
study draws, the rule commands it generates, and its loaders."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audit.config import load_study
from audit.errors import AuditError
from audit.report import registry
from audit.report.registry import INPUTS, OPTIONS, REGISTRY, Sources

REPO = Path(__file__).resolve().parents[2]

LM_TABLES = ["cross_scale", "baselines", "comparisons", "correlations", "wordsim_wins", "wordsim_diffs", "claims",
             "results", "ranks", "wordsim_rho", "wordsim_coverage", "warnings", "topk", "trajectories",
             "trajectory_marks"]
LM_FIGURES = ["rank_decay", "learning_curves", "saturation", "rank_vs_ppl", "strip", "trajectories"]


def names(entries):
    return [e.name for e in entries]


def test_registry_invariants_hold_and_every_caption_exists():
    registry.check()
    for entry in REGISTRY:
        if entry.caption_file:
            assert (REPO / "captions" / entry.caption_file).is_file(), entry.name
        assert set(entry.inputs) <= set(INPUTS)
    report = registry.entries(made_by="report")
    assert all(e.caption_file == f"{e.kind}_{e.name}.rst" for e in report)
    assert all(e.builder is not None for e in report)
    assert {e.rule for e in report} == {f"report_{e.kind}_{e.name}" for e in report}


def test_check_rejects_a_duplicate_or_an_unknown_input(monkeypatch):
    duplicate = REGISTRY + (registry.Output("results", "table", lambda src: None, ("runs",)),)
    monkeypatch.setattr(registry, "REGISTRY", duplicate)
    with pytest.raises(AuditError, match="table results is listed twice"):
        registry.check()
    unknown = REGISTRY + (registry.Output("new", "table", lambda src: None, ("nope",)),)
    monkeypatch.setattr(registry, "REGISTRY", unknown)
    with pytest.raises(AuditError, match=r"new: unknown inputs \['nope'\]"):
        registry.check()


def test_stats_entries_are_the_stats_verb_tables_in_order():
    from audit.stats.cli import EVIDENCE_TABLES, TABLES

    assert names(registry.entries("table", "stats")) == list(TABLES + EVIDENCE_TABLES)


def test_smoke_study_draws_the_lm_tables_jacobian_and_wins():
    config = load_study(REPO / "configs" / "smoke.yaml")
    assert names(registry.drawn(config, "table")) == LM_TABLES
    assert names(registry.drawn(config, "figure")) == LM_FIGURES + ["jacobian", "wordsim_wins", "forest"]


def test_one_head_without_jacobian_draws_neither_figure():
    config = copy.deepcopy(load_study(REPO / "configs" / "smoke.yaml"))
    config["heads"] = config["heads"][:1]
    config["evaluate"]["jacobian"]["contexts"] = 0
    assert names(registry.drawn(config, "figure")) == LM_FIGURES + ["forest"]
    assert names(registry.drawn(config, "table")) == LM_TABLES  # the stats tables are written even if empty


def test_grid_study_draws_the_grid_table_and_its_figures():
    config = load_study(REPO / "configs" / "gss-grid.yaml")
    assert names(registry.drawn(config, "table")) == LM_TABLES + ["grid"]
    assert names(registry.drawn(config, "figure"))[-3:] == ["grid_rank_vs_ppl", "grid_heatmaps", "grid_lines"]


def test_synthetic_only_study_draws_only_the_synthetic_outputs():
    config = load_study(REPO / "configs" / "synthetic-gpu.yaml")
    assert [e.path("R") for e in registry.drawn(config)] == [
        "R/tables/synthetic_summary.csv", "R/figures/synthetic_mode_match.svg", "R/figures/synthetic_kl.svg"]


def test_every_option_an_entry_passes_is_a_cli_option():
    for study in ("smoke.yaml", "gss-grid.yaml", "default.yaml"):
        config = load_study(REPO / "configs" / study)
        for entry in registry.entries(made_by="report"):
            assert set(entry.options(config)) <= set(OPTIONS), entry.name


def test_rule_arguments_name_inputs_run_dirs_and_options():
    config = load_study(REPO / "configs" / "smoke.yaml")
    dirs = ["results/s/runs/ptb/softmax/1", "results/s/runs/ptb/mos/1"]
    jacobian = registry.entry("figure", "jacobian")
    assert jacobian.arguments(config, "reports/s", "results/s", dirs) == (
        "--run-dirs results/s/runs/ptb/softmax/1 results/s/runs/ptb/mos/1 --threshold 0.001")
    warnings = registry.entry("table", "warnings")
    assert warnings.arguments(config, "reports/s", "results/s", dirs) == (
        "--runs reports/s/runs.csv --config results/s/stats_config.yaml "
        "--comparisons reports/s/tables/comparisons.csv --correlations reports/s/tables/correlations.csv")
    assert warnings.input_paths("reports/s", "results/s", dirs) == {
        "runs": "reports/s/runs.csv", "stats_config": "results/s/stats_config.yaml",
        "comparisons": "reports/s/tables/comparisons.csv", "correlations": "reports/s/tables/correlations.csv"}
    topk = registry.entry("table", "topk")
    assert topk.per_run and topk.input_paths("r", "s", ["a/1", "a/2"]) == {"topk": ["a/1/topk.csv", "a/2/topk.csv"]}
    rank_vs_ppl = registry.entry("figure", "rank_vs_ppl")
    assert rank_vs_ppl.arguments(config, "r", "s", dirs) == (
        "--runs r/runs.csv --correlations r/tables/correlations.csv --x press_rank --metric test_ppl")
    odd = registry.Output("odd", "figure", lambda src: "", options=lambda c: {"metric": "a b; rm"})
    assert odd.arguments(config, "r", "s", []) == "--metric 'a b; rm'"  # shell-quoted


def test_unknown_entry_names_the_known_ones():
    with pytest.raises(AuditError, match="unknown report figure 'nope'; known: rank_decay, learning_curves, saturation, rank_vs_ppl"):
        registry.entry("figure", "nope")


def test_importing_the_registry_imports_no_heavy_library():
    """Snakemake imports it to parse the Snakefile: no torch, pandas, numpy or matplotlib."""
    code = ("import sys, audit.report.registry; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'pandas', 'numpy', 'matplotlib'}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def _spectrum(run_dir: Path, **arrays) -> None:
    run_dir.mkdir(parents=True)
    np.savez(run_dir / "spectrum.npz", **arrays)


def test_spectra_groups_by_corpus_and_head_in_seed_order_and_skips_failed_runs(tmp_path):
    a10, a2, b1 = tmp_path / "ptb/softmax/10", tmp_path / "ptb/softmax/2", tmp_path / "ptb/mos/1"
    _spectrum(a10, log_p_sv=np.array([3.0, 1.0]))
    _spectrum(a2, log_p_sv=np.array([2.0, 1.0]))
    _spectrum(b1, log_p_sv=np.array([]))  # a failed run writes an empty array
    curves = Sources({}, [str(a10), str(b1), str(a2)]).spectra()
    assert list(curves) == [("ptb", "softmax")]
    assert [c.tolist() for c in curves[("ptb", "softmax")]] == [[2.0, 1.0], [3.0, 1.0]]  # seed 2 before 10
    assert Sources({}, [str(a2)]).spectra("jacobian_mean_normalised_sv") == {}
    with pytest.raises(AuditError, match="missing .*ptb/mos/7/spectrum.npz: the run was not evaluated"):
        Sources({}, [str(tmp_path / "ptb/mos/7")]).spectra()


def test_sources_optional_inputs(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("a,b\n")
    src = Sources({"comparisons": str(empty), "correlations": str(tmp_path / "gone.csv"), "stats_config": None},
                  options={"metric": None, "x": "valid_ppl"})
    assert src.csv("comparisons") is None and src.csv("wins") is None and src.yaml("stats_config") == {}
    assert src.option("metric", "test_ppl") == "test_ppl" and src.option("x", "press_rank") == "valid_ppl"
    with pytest.raises(AuditError, match="table not found: .*gone.csv"):
        src.csv("correlations")
    with pytest.raises(AuditError, match="runs table was not given"):
        src.runs()
