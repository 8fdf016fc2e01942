"""Every study config under configs/ plans the DAG it should: dry runs (`snakemake -n`), no training.

The paper-scale studies are GPU-sized (1000 epochs per run); a dry run checks that their DAG has
one train and one evaluate job per (corpus, arm, seed), the grid expanded, and the study's own
report targets, without running anything.
"""

import pytest
import yaml

from audit.config import load_study
from helpers import copy_workflow
from tests.test_pipeline import REPO, job_counts, snakemake

GRID_RULES = {"report_table_grid", "report_figure_grid_rank_vs_ppl", "report_figure_grid_lines"}
# config -> (runs = arms x seeds x corpora, grid rules expected, heatmaps expected)
STUDIES = {
    "gss-grid.yaml": (21 * 3, True, True),
    "gss-grid-paper-ptb.yaml": (73 * 1, True, True),
    "gss-grid-paper-wt2.yaml": (37 * 1, True, True),
    "mos-sweep.yaml": (8 * 2, True, True),
    "mos-sweep-paper-ptb.yaml": (18 * 11, True, True),
    "fair-comparison.yaml": (3 * 4, False, False),     # seeds on demand: stage 1 (3 heads x 4 seeds)
    "fair-comparison-paper.yaml": (3 * 10, False, False),
    "paper-ptb.yaml": (11 * 11, False, False),
    "paper-wt2.yaml": (9 * 11, False, False),
    "synthetic-gpu.yaml": (0, False, False),   # no language-model runs: 4 heads x 6 d x 3 alpha x 10 seeds fits
    "published.yaml": (0, False, False),       # no runs: the published record from audit/data/published.csv
    "sequential-smoke.yaml": (3 * 3, False, False),  # seeds on demand: stage 1 only (3 heads x 3 seeds) is planned
    "transformer.yaml": (10 * 4, False, False),        # the default's arms on a Transformer body
    "transformer-paper.yaml": (10 * 10, False, False),
    "subword.yaml": (10 * 4, False, False),            # the default's arms under a BPE of 8,000 tokens
    "pythia.yaml": (0, False, False),                  # no training: PolyPythias' checkpoints (issue 55)
    "pretrained-example.yaml": (0, False, False),      # no training: the constructed suite
    "precision.yaml": (4 * 10, False, False),          # softmax and MoS at fp32 and bf16_head (issue 57)
}
PRETRAINED_JOBS = {"pythia.yaml": 5 * 10 * 7, "pretrained-example.yaml": 2 * 5 * 5}   # models x seeds x checkpoints
SYNTHETIC_FITS = {"synthetic-gpu.yaml": 4 * 6 * 3 * 10}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("studies"))


def test_every_study_config_is_covered():
    configs = {p.name for p in (REPO / "configs").glob("*.yaml")} - {"schema.yaml", "claims.yaml"}
    assert set(STUDIES) | {"default.yaml", "smoke.yaml", "synthetic.yaml"} == configs


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_study_dry_run_plans_one_job_per_run_and_its_report(name, workdir, mirror):
    runs, grid, heatmaps = STUDIES[name]
    study = load_study(REPO / "configs" / name)
    seeds = study["seeds"]["initial"] if isinstance(study["seeds"], dict) else len(study["seeds"])
    assert len(study["heads"]) * seeds * len(study["data"]["corpora"]) == runs
    plan = snakemake(workdir, "--configfile", f"configs/{name}", "-n", mirror=mirror)
    assert plan.returncode == 0, plan.stderr[-2000:]
    counts = job_counts(plan.stdout + plan.stderr)
    assert counts.get("train", 0) == counts.get("evaluate", 0) == runs
    assert counts["report"] == 1 and counts.get("runs_table", 0) == (1 if runs else 0)
    assert counts.get("synthetic_fit", 0) == SYNTHETIC_FITS.get(name, 0)
    assert GRID_RULES <= set(counts) if grid else not GRID_RULES & set(counts)
    assert ("report_figure_grid_heatmaps" in counts) == heatmaps
    raw = yaml.safe_load((REPO / "configs" / name).read_text())
    if name in SYNTHETIC_FITS:
        assert study["synthetic"]["device"] == "auto" and not study["data"]["corpora"]
    elif name in PRETRAINED_JOBS:    # one job per (model, seed, checkpoint), no checkpoint needed to plan
        assert counts["pretrained_evaluate"] == PRETRAINED_JOBS[name] and not study["data"]["corpora"]
    elif name == "published.yaml":   # no training, no data: one rule makes the three published tables
        assert counts.get("stats_published") == 1 and not study["data"]["corpora"] and "synthetic" not in raw
    elif study["model"].get("body") == "transformer":  # AdamW with a fixed context, whole test split
        assert study["train"]["optimizer"] == "adamw" and not study["train"]["variable_bptt"]
        assert study["train"]["bptt"] <= study["model"]["context_size"] and not study["data"]["max_tokens"].get("test")
        assert (study["evaluate"]["contexts"] == "all") == ("paper" in name)
    elif "paper" in name:  # GPU-sized: every run trains for the published 1000 epochs, all contexts
        assert study["train"]["epochs"] == 1000 and study["evaluate"]["contexts"] == "all"
    else:                  # CPU variants name their own training budget; a learning one (data.vocab_size,
        # as the CPU default) scores the whole test split, the others a slice of it
        assert raw["train"]["epoch_tokens"] and (raw["data"].get("vocab_size") or raw["data"]["max_tokens"]["test"])
