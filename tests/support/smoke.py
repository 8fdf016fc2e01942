"""One finished smoke study per test session, for the tests that only need one (issue 48).

``configs/smoke.yaml`` through the whole Snakemake DAG (data, six training and evaluation jobs,
statistics, report) takes three to four minutes on two cores; tests/test_pipeline.py and
tests/test_slurm.py each ran it from scratch. ``finish`` runs it once, in a temporary copy of the
workflow (tests/conftest.py's session fixture ``smoke_study``); a test reads that folder, and
copies it with ``copy`` before it changes anything in it (the copy keeps every file's
modification time and Snakemake's ``.snakemake`` records, so Snakemake finds the copy up to
date). ``snapshot`` is what the fixture compares at the end of the session, so a test that
changed the shared folder instead of a copy fails there, naming the files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from audit.gpucheck.common import copy_workflow

CONFIG = "configs/smoke.yaml"


def snakemake(workdir: Path, *args: str, mirror: Path, timeout: float = 1800) -> subprocess.CompletedProcess:
    env = {**os.environ, "AUDIT_DATA_MIRROR": str(mirror)}
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=timeout)


def finish(dest: Path, mirror: Path) -> Path:
    """The smoke study run to its audit in a copy of the workflow in ``dest``; returns ``dest``."""
    workdir = copy_workflow(dest)
    proc = snakemake(workdir, "--configfile", CONFIG, mirror=mirror)
    if proc.returncode != 0:
        raise RuntimeError(f"the shared smoke study failed (snakemake exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return workdir


def copy(study: Path, dest: Path) -> Path:
    """A copy of the finished study ``study`` in ``dest`` (made if missing), returned: every file with
    its modification time (shutil.copy2), ``.snakemake`` included."""
    shutil.copytree(study, dest, symlinks=True, dirs_exist_ok=True)
    return Path(dest)


def snapshot(study: Path) -> dict[str, tuple[int, int]]:
    """{relative path: (size, mtime in ns)} of every file under ``study``."""
    return {os.fspath(p.relative_to(study)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in study.rglob("*") if p.is_file() and not p.is_symlink()}


def changed(before: dict, after: dict) -> list[str]:
    """The files of two snapshots that differ, or are in one only."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
