"""Workflow hygiene: parsing the Snakefile imports no torch; a failed job's one-line error reaches
Snakemake's console (profiles/default: show-failed-logs); `run:` rules write their logs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import copy_workflow
from tests.test_pipeline import job_counts

# Runs Snakemake in this interpreter and says at exit whether torch was ever imported.
GUARD = """
import atexit, sys
atexit.register(lambda: print("TORCH_IMPORTED=" + str("torch" in sys.modules), file=sys.stderr))
from snakemake.cli import main
sys.argv = ["snakemake"] + sys.argv[1:]
main()
"""


def guarded_snakemake(workdir: Path, *args: str, mirror: Path) -> tuple[subprocess.CompletedProcess, bool]:
    env = {**os.environ, "AUDIT_DATA_MIRROR": str(mirror)}
    proc = subprocess.run([sys.executable, "-c", GUARD, "--cores", "1", *args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=600)
    flags = [line for line in proc.stderr.splitlines() if line.startswith("TORCH_IMPORTED=")]
    assert len(flags) == 1, proc.stderr[-2000:]
    return proc, flags[0] == "TORCH_IMPORTED=True"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("workflow"))
    config = yaml.safe_load((workdir / "configs" / "smoke.yaml").read_text())
    config["train"]["device"] = "cpu"
    config["study"] = "smoke-cpu"
    (workdir / "configs" / "smoke-cpu.yaml").write_text(yaml.safe_dump(config))
    return workdir


@pytest.mark.parametrize("study", ["smoke-cpu", "synthetic"])
def test_planning_a_cpu_study_imports_no_torch(workdir, mirror, study):
    """A dry run parses the Snakefile and evaluates every job's resources (train_gpus,
    synthetic_gpus): none of it may import torch (seconds of import per Snakemake call)."""
    proc, torch_imported = guarded_snakemake(workdir, "-n", "--configfile", f"configs/{study}.yaml", mirror=mirror)
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts = job_counts(proc.stdout + proc.stderr)
    assert counts["report"] == 1 and counts.get("train", 0) + counts.get("synthetic_fit", 0) > 0
    assert not torch_imported


def test_the_torch_guard_sees_an_import(tmp_path, mirror):
    """Control: the same guard reports torch when a Snakefile imports it."""
    (tmp_path / "Snakefile").write_text("import torch\n\nrule all:\n    output: 'x'\n    shell: 'touch {output}'\n")
    proc, torch_imported = guarded_snakemake(tmp_path, "-n", mirror=mirror)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert torch_imported


def _corrupt_mirror(mirror: Path, dest: Path) -> Path:
    """A mirror whose ptb/valid.txt is damaged; the other files link to the real ones."""
    for path in (mirror / "ptb").iterdir():
        (dest / "ptb").mkdir(parents=True, exist_ok=True)
        (dest / "ptb" / path.name).symlink_to(path)
    (dest / "ptb" / "valid.txt").unlink()
    (dest / "ptb" / "valid.txt").write_text("not the Penn Treebank\n")
    return dest


@pytest.mark.parametrize("profile", ["default", "none"])
def test_failed_job_prints_its_one_line_error(workdir, mirror, tmp_path, profile):
    """With the workflow profile (show-failed-logs) the failed fetch's `error: checksum mismatch`
    line is on the console; without it (control) Snakemake only points at the log file."""
    bad = _corrupt_mirror(mirror, tmp_path / "mirror")
    target = "results/data/ptb/valid.txt"
    env = {**os.environ, "AUDIT_DATA_MIRROR": str(bad)}
    proc = subprocess.run([sys.executable, "-m", "snakemake", target, "--cores", "1", "--workflow-profile", profile,
                           "--configfile", "configs/smoke-cpu.yaml"], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    log = (workdir / "logs" / "data" / "fetch" / "ptb" / "valid.log").read_text()
    assert f"error: checksum mismatch for {bad}/ptb/valid.txt" in log
    console = [line.strip() for line in (proc.stdout + proc.stderr).splitlines()]
    shown = [line for line in console if line.startswith("error: checksum mismatch")]
    assert len(shown) == (1 if profile == "default" else 0), "\n".join(console[-40:])
    assert not (workdir / target).exists()


def test_run_rules_write_their_logs(workdir, mirror):
    """resolved_config and stats_config are `run:` rules: each writes its log."""
    targets = ["results/smoke-cpu/config.resolved.yaml", "results/smoke-cpu/stats_config.yaml"]
    env = {**os.environ, "AUDIT_DATA_MIRROR": str(mirror)}
    proc = subprocess.run([sys.executable, "-m", "snakemake", *targets, "--cores", "1", "--configfile",
                           "configs/smoke-cpu.yaml"], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    logs = workdir / "logs" / "smoke-cpu"
    assert (logs / "resolved_config.log").read_text() == f"resolved config -> {targets[0]}\n"
    assert (logs / "stats_config.log").read_text() == f"stats config -> {targets[1]}\n"
    assert yaml.safe_load((workdir / targets[0]).read_text())["study"] == "smoke-cpu"
