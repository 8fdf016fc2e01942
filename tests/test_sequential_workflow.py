"""The group-sequential seeds schedule through the Snakemake DAG (rules/sequential.smk).

A tiny study in a temporary copy of the workflow: softmax, sigsoftmax and "twin" (softmax again
under another name, so that every seed gives it exactly softmax's numbers: a true null whose
Welch p is 1 at every look), seeds {initial: 2, step: 1, max: 4}, futility off. sigsoftmax vs
softmax is decided at stage 1 (a difference of about 200 perplexity points against seed SDs of
about 3); twin vs softmax can only end at max. So stage 1 trains 2 seeds of all three heads,
and stages 2 and 3 give seeds 3 and 4 to softmax and twin only.
"""

import collections
import json
import re

import pandas as pd
import pytest
import yaml

from helpers import copy_workflow
from test_pipeline import job_counts, snakemake

CONFIG = {
    "study": "seqtiny",
    "data": {"corpora": ["ptb"], "max_tokens": {"train": 4000, "valid": 1000, "test": 1000}},
    "seeds": {"initial": 2, "step": 1, "max": 4, "futility_power": 0.0},
    "heads": [{"name": "softmax"}, {"name": "sigsoftmax"}, {"name": "twin", "head": "softmax"}],
    "model": {"emb_size": 8, "hidden_size": 16, "n_layers": 2, "dropoute": 0.0, "dropouti": 0.1,
              "dropouth": 0.1, "dropout": 0.2, "wdrop": 0.1},
    "train": {"epochs": 1, "batch_size": 10, "bptt": 20, "lr": 20.0, "asgd": "nt", "nonmono": 1,
              "threads": 1, "device": "cpu"},
    "evaluate": {"contexts": 100, "jacobian": {"contexts": 0}},
    "comparisons": [{"family": "f", "baseline": "softmax", "against": ["sigsoftmax", "twin"],
                     "metrics": ["test_ppl"]}],
    "stats": {"min_seeds": 2, "bootstrap_resamples": 200},
}
ARGS = ("--configfile", "configs/seqtiny.yaml")
STAGE1 = "results/seqtiny/sequential/stage1.json"


def workflow(dest):
    workdir = copy_workflow(dest)
    (workdir / "configs" / "seqtiny.yaml").write_text(yaml.safe_dump(CONFIG))
    return workdir


def run(workdir, mirror, *extra):
    """Jobs per rule: planned (a dry run), else executed. A checkpoint re-plans the DAG while the
    run goes on, so the 'Job stats' Snakemake prints first would miss later stages' jobs."""
    proc = snakemake(workdir, *extra, *ARGS, mirror=mirror)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stdout + proc.stderr
    if "-n" in extra:
        return job_counts(log)
    job_counts(log)   # checks "Nothing to be done" when no job ran
    return dict(collections.Counter(re.findall(r"^(?:local)?(?:checkpoint|rule) (\w+):$", log, re.M)))


def test_dry_run_plans_the_first_stage_only(tmp_path, mirror):
    counts = run(workflow(tmp_path), mirror, "-n")
    # 3 heads x the 2 seeds of stage 1; the rest waits for the interim checkpoint
    assert counts["train"] == counts["evaluate"] == 6
    assert counts["interim"] == 1 and counts["sequential_decisions"] == 1
    assert counts["report_table_sequential"] == 1 and counts["report"] == 1


def test_a_fixed_seeds_list_plans_no_interim_analysis(tmp_path, mirror):
    workdir = workflow(tmp_path)
    (workdir / "configs" / "seqtiny.yaml").write_text(yaml.safe_dump({**CONFIG, "seeds": [1, 2, 3]}))
    counts = run(workdir, mirror, "-n")
    assert counts["train"] == 9 and "interim" not in counts and "report_table_sequential" not in counts


@pytest.fixture(scope="module")
def finished(tmp_path_factory, mirror):
    """Stage 1 alone (its checkpoint as the target), then the whole study by the same command."""
    workdir = workflow(tmp_path_factory.mktemp("seq"))
    first = run(workdir, mirror, STAGE1)
    runs_dir = workdir / "results" / "seqtiny" / "runs"
    stage1_files = {p: p.stat().st_mtime_ns for p in runs_dir.rglob("*") if p.is_file()}
    rest = run(workdir, mirror)
    again = run(workdir, mirror)
    return workdir, first, rest, again, stage1_files


@pytest.mark.slow
def test_stage_1_decides_and_only_needed_arms_get_seeds(finished):
    workdir, first, *_ = finished
    assert first["train"] == 6 and first["interim"] == 1
    record = json.loads((workdir / STAGE1).read_text())
    decisions = {c["head_a"]: c["final_decision"] for c in record["comparisons"]}
    assert decisions == {"sigsoftmax": "efficacy", "twin": "continue"} and not record["done"]
    assert {a["head"]: (a["n"], a["next"]) for a in record["arms"]} == {
        "softmax": (2, 3), "twin": (2, 3), "sigsoftmax": (2, 2)}


@pytest.mark.slow
def test_rerunning_continues_and_retrains_nothing(finished):
    workdir, _, rest, again, stage1_files = finished
    # stages 2 and 3 add seeds 3 and 4 of softmax and twin: 4 runs, 2 more analyses
    assert rest["train"] == 4 and rest["interim"] == 2
    assert again == {}   # the same command once more: nothing to be done
    now = {p: p.stat().st_mtime_ns for p in stage1_files}
    assert now == stage1_files   # stage 1's runs were not retrained or rewritten
    runs = pd.read_csv(workdir / "reports" / "seqtiny" / "runs.csv")
    assert sorted(zip(runs["head"], runs["seed"])) == sorted(
        [("sigsoftmax", 1), ("sigsoftmax", 2)] + [(h, s) for h in ("softmax", "twin") for s in (1, 2, 3, 4)])


@pytest.mark.slow
def test_the_audit_shows_the_history_and_the_sequential_numbers(finished):
    workdir = finished[0]
    decisions = json.loads((workdir / "results/seqtiny/sequential/decisions.json").read_text())
    assert decisions["done"] and decisions["stage"] == 3 and decisions["runs"] == 10
    twin = next(c for c in decisions["comparisons"] if c["head_a"] == "twin")
    assert twin["final_decision"] == "max" and twin["diff"] == 0 and twin["repeated_p"] == 1.0
    table = pd.read_csv(workdir / "reports" / "seqtiny" / "tables" / "sequential.csv")
    assert list(zip(table["head_a"], table["stage"], table["seeds_per_arm"], table["decision"])) == [
        ("sigsoftmax", 1, 2, "efficacy"), ("twin", 1, 2, "continue"), ("twin", 2, 3, "continue"),
        ("twin", 3, 4, "max")]
    html = (workdir / "reports" / "seqtiny" / "audit.html").read_text()
    assert 'id="sequential"' in html and 'id="comparisons-not-sequential"' in html
    assert "seq-f-ptb-test-ppl-twin-softmax-3" in html
