"""End to end: the Snakemake DAG on configs/smoke.yaml in a temporary directory.

The finished study is the session's (tests/conftest.py's ``smoke_study``, run once and shared with
tests/test_slurm.py; issue 48): the two tests that read it read it there, and the test that
forces a table again does so in a copy of it (support/smoke.py), whose files keep their times, so
Snakemake sees the same finished study the module's own run used to leave behind.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from helpers import copy_workflow
from support.smoke import copy as copy_study


REPO = Path(__file__).resolve().parent.parent


def snakemake(workdir: Path, *args: str, mirror: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "AUDIT_DATA_MIRROR": str(mirror)}
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="module")
def smoke(smoke_study):
    """The session's finished smoke study (read only: copy it before changing it)."""
    return smoke_study


def job_counts(output: str) -> dict[str, int]:
    """Snakemake's 'Job stats' table as {rule: count}; empty when there is nothing to do."""
    if "Job stats:" not in output:
        assert "Nothing to be done" in output, output[-2000:]
        return {}
    block = output.split("Job stats:")[1].split("\n\n")[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}


@pytest.mark.slow
def test_runs_table_has_one_row_per_run_and_softmax_rank_is_d_plus_2(smoke):
    config = yaml.safe_load((smoke / "configs" / "smoke.yaml").read_text())
    runs = pd.read_csv(smoke / "reports" / "smoke" / "runs.csv")
    assert len(runs) == len(config["heads"]) * len(config["seeds"]) == 6
    assert sorted(zip(runs["head"], runs["seed"])) == sorted(
        (h["name"], s) for h in config["heads"] for s in config["seeds"])
    assert (runs["status"] == "ok").all()
    d = config["model"]["emb_size"]
    softmax = runs[runs["head"] == "softmax"]
    assert softmax["press_rank"].tolist() == [d + 2] * 3   # log-P = W h + b - lse: rank d + 2
    assert (softmax["f_logits_press_rank"] == d + 1).all()  # the logits alone: rank d + 1
    assert (runs.loc[runs["head"] == "sigsoftmax", "press_rank"] > d + 2).all()
    wordsim = [c for c in runs if c.startswith("wordsim_")]
    assert len(wordsim) == 13 and runs[wordsim].notna().all().all()


@pytest.mark.slow
def test_report_contains_the_p_values(smoke):
    from audit.report.render import fmt_p

    html = (smoke / "reports" / "smoke" / "audit.html").read_text()
    comparisons = pd.read_csv(smoke / "reports" / "smoke" / "tables" / "comparisons.csv")
    row = comparisons[(comparisons["head_a"] == "sigsoftmax") & (comparisons["metric"] == "test_ppl")].iloc[0]
    assert row["n_a"] == 3 and row["n_b"] == 3
    for column in ("welch_p", "student_p"):
        assert 0 <= row[column] <= 1
        assert fmt_p(float(row[column])) in html
    assert "Provenance" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # nothing fetched from the network


@pytest.mark.slow
def test_refreshing_one_table_reruns_no_training(smoke, mirror, tmp_path):
    """Forcing one table in a finished study plans that table's job alone, and running it and then
    the whole study again retrains nothing (a copy of the session's study: this test changes it)."""
    smoke = copy_study(smoke, tmp_path / "smoke")
    target = "reports/smoke/tables/comparisons.csv"
    plan = snakemake(smoke, "--configfile", "configs/smoke.yaml", "-f", target, "-n", mirror=mirror)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert job_counts(plan.stdout + plan.stderr) == {"stats_comparisons": 1, "total": 1}
    runs_dir = smoke / "results" / "smoke" / "runs"
    before = {p: p.stat().st_mtime_ns for p in runs_dir.rglob("*") if p.is_file()}
    table_before = (smoke / target).stat().st_mtime_ns
    done = snakemake(smoke, "--configfile", "configs/smoke.yaml", "-f", target, mirror=mirror)
    assert done.returncode == 0, done.stderr[-2000:]
    report = snakemake(smoke, "--configfile", "configs/smoke.yaml", mirror=mirror)
    assert report.returncode == 0, report.stderr[-2000:]
    assert "train" not in job_counts(report.stdout + report.stderr)
    assert (smoke / target).stat().st_mtime_ns > table_before
    assert {p: p.stat().st_mtime_ns for p in runs_dir.rglob("*") if p.is_file()} == before


def test_bad_config_stops_snakemake_with_one_line(tmp_path, mirror):
    workdir = copy_workflow(tmp_path)
    config = yaml.safe_load((workdir / "configs" / "smoke.yaml").read_text())
    config["heads"].append({"name": "softmaxx"})
    (workdir / "configs" / "bad.yaml").write_text(yaml.safe_dump(config))
    proc = snakemake(workdir, "--configfile", "configs/bad.yaml", "-n", mirror=mirror)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1
    assert "config key heads[2].head: unknown head 'softmaxx'; known heads:" in lines[0]
    assert "configs/bad.yaml" in lines[0]


def test_a_config_key_written_twice_stops_snakemake_with_one_line(tmp_path, mirror):
    """Snakemake's --configfile reader keeps the last of two equal keys; the workflow refuses it."""
    workdir = copy_workflow(tmp_path)
    text = (workdir / "configs" / "smoke.yaml").read_text()
    (workdir / "configs" / "twice.yaml").write_text(text + "seeds: [1]\n")
    proc = snakemake(workdir, "--configfile", "configs/twice.yaml", "-n", mirror=mirror)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    first = next(n for n, row in enumerate(text.splitlines(), 1) if row.startswith("seeds:"))
    assert len(lines) == 1 and lines[0].endswith(
        f"configs/twice.yaml: line {len(text.splitlines()) + 1} not valid YAML "
        f"(key 'seeds' written twice (first on line {first}))"), proc.stderr[-2000:]
