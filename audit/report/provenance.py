"""Provenance of a study: what ran, on what code, data, software and hardware.

``collect`` returns a JSON-serialisable dict that ``python -m audit report provenance`` writes to
``reports/<study>/provenance.json`` and the HTML audit prints. Nothing here fails on a machine
without git, a GPU or a commit: each item then says why it is unknown.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from audit.data.fetch import pins
from audit.files import digest_of, sha256_of

PACKAGES = ["bottleneck-audit", "torch", "numpy", "scipy", "pandas", "statsmodels", "matplotlib",
            "jinja2", "snakemake", "pyyaml", "jsonschema", "tokenizers"]
SOURCES = Path(__file__).resolve().parent.parent / "data" / "sources.yaml"


def config_hash(config: dict) -> str:
    """SHA-256 of the config as canonical JSON (sorted keys), so key order does not matter."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _git(args: list[str], cwd: Path) -> tuple[int, str]:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        return 127, str(err)
    return done.returncode, (done.stdout if done.returncode == 0 else done.stderr).strip()


def git_state(repo: Path) -> dict:
    """{commit, dirty, note}: commit is None outside a repository or before the first commit;
    dirty means tracked changes or untracked, non-ignored files."""
    if shutil.which("git") is None:
        return {"commit": None, "dirty": None, "note": "git is not installed"}
    code, out = _git(["rev-parse", "--is-inside-work-tree"], repo)
    if code != 0 or out != "true":
        return {"commit": None, "dirty": None, "note": f"{repo} is not a git repository"}
    code, status = _git(["status", "--porcelain"], repo)
    dirty = bool(status) if code == 0 else None
    code, commit = _git(["rev-parse", "HEAD"], repo)
    if code != 0:
        return {"commit": None, "dirty": dirty, "note": "the repository has no commit yet"}
    return {"commit": commit, "dirty": dirty, "note": ""}


def software() -> dict:
    """Python version and the installed versions of the packages the audit depends on."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {"python": sys.version.split()[0], "implementation": platform.python_implementation(),
            "platform": platform.platform(), "packages": versions}


def hardware() -> dict:
    """CPU model (from /proc/cpuinfo where it exists), logical CPUs, and GPU names (nvidia-smi)."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    gpus: list[str] = []
    note = "nvidia-smi not found: no NVIDIA GPU visible"
    if shutil.which("nvidia-smi"):
        try:
            done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=20)
            gpus = [g.strip() for g in done.stdout.splitlines() if g.strip()]
            note = "" if gpus else f"nvidia-smi found no GPU ({done.stderr.strip()[:200]})"
        except (OSError, subprocess.TimeoutExpired) as err:
            note = f"nvidia-smi failed: {err}"
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "gpus": gpus, "gpu_note": note}


def run_times(run_dirs: list[Path]) -> list[dict]:
    """Per run: corpus, head, seed, status, device, epochs and wall seconds from ``metrics.json``."""
    rows = []
    for run_dir in run_dirs:
        path = Path(run_dir) / "metrics.json"
        if not path.is_file():
            continue
        m = json.loads(path.read_text())
        rows.append({"corpus": m.get("corpus"), "head": m.get("head"), "seed": m.get("seed"),
                     "status": m.get("status"), "device": m.get("device", ""),
                     "epochs_run": m.get("epochs_run"), "wall_seconds": m.get("wall_seconds")})
    return rows


# Snakemake's `benchmark:` files of a run's jobs (rules/train.smk, rules/evaluate.smk), in its folder
BENCHMARK_FILES = {"train": "benchmark_train.tsv", "evaluate": "benchmark_evaluate.tsv"}


def _number(text: str | None) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):  # Snakemake writes NA where it could not measure
        return None


def benchmarks(run_dirs: list[Path]) -> list[dict]:
    """Per run and job (train, evaluate): Snakemake's benchmark of the job as it ran.

    Returns:
        [{corpus, head, seed, job, seconds, max_rss_mb, cpu_seconds}] for the benchmark files
        present (wall seconds ``s``, peak resident memory ``max_rss`` in MB and ``cpu_time`` of
        the job's processes); a run made before benchmarks were recorded has none. Values
        Snakemake could not measure are None.
    """
    rows = []
    for run_dir in map(Path, run_dirs):
        for job, name in BENCHMARK_FILES.items():
            path = run_dir / name
            if not path.is_file():
                continue
            with path.open(newline="") as handle:
                record = next(csv.DictReader(handle, delimiter="\t"), None) or {}
            rows.append({"corpus": run_dir.parent.parent.name, "head": run_dir.parent.name,
                         "seed": int(run_dir.name) if run_dir.name.isdigit() else run_dir.name, "job": job, "seconds": _number(record.get("s")),
                         "max_rss_mb": _number(record.get("max_rss")), "cpu_seconds": _number(record.get("cpu_time"))})
    return rows


USER_DATASET = "(your file)"  # the dataset column of a user corpus's file (data.files)


def data_checksums(data_files: list[Path], data_dir: Path, sources: Path = SOURCES) -> list[dict]:
    """SHA-256 of each data file next to the one pinned in ``sources.yaml`` (a file pinned by
    SHA-1 alone, WikiText-103's: ``pinned`` is ``"sha1 <hex>"``, ``match`` compares that digest).

    Args:
        data_files: files under ``data_dir`` laid out as ``<dataset>/<file>``, and the files of
            a user corpus (``data.files``) elsewhere: ``dataset`` ``(your file)``, the path as
            ``file``, ``match`` None (nothing pins them; their SHA-256 is in their runs' settings).
        data_dir: the verified-data folder (``results/data``).
        sources: the pinned sources file.

    Returns:
        [{dataset, file, url, pinned, actual, match}] sorted by dataset and file.
    """
    pinned = yaml.safe_load(sources.read_text()) if sources.is_file() else {}
    rows = []
    for path in sorted(map(Path, data_files)):
        if not path.is_relative_to(data_dir):  # a user corpus's file: not pinned anywhere
            rows.append({"dataset": USER_DATASET, "file": str(path), "url": "", "pinned": "",
                         "actual": sha256_of(path), "match": None})
            continue
        rel = path.relative_to(data_dir)
        dataset, name = (rel.parts[0], "/".join(rel.parts[1:])) if len(rel.parts) > 1 else ("", rel.name)
        source = (pinned.get(dataset) or {}).get(name) or {}
        actual = sha256_of(path)
        # the SHA-256 where one is pinned; else the pin there is (WikiText-103: SHA-1), named
        algorithm, pin = next(iter(pins(source).items()), ("sha256", ""))
        match = actual == pin if algorithm == "sha256" else digest_of(path, algorithm) == pin
        rows.append({"dataset": dataset, "file": name, "url": source.get("url", ""),
                     "pinned": pin if algorithm == "sha256" else f"{algorithm} {pin}", "actual": actual,
                     "match": match})
    return sorted(rows, key=lambda r: (r["dataset"], r["file"]))


def collect(config_path: Path, run_dirs: list[Path], data_files: list[Path], data_dir: Path,
            command: str, repo: Path) -> dict:
    """Everything the Provenance section prints.

    Args:
        config_path: the resolved study config (YAML).
        run_dirs: run folders holding ``metrics.json``.
        data_files: data files the study read (under ``data_dir``).
        data_dir: the verified-data folder.
        command: the shell command that reproduces the study.
        repo: the working directory whose git state is recorded.

    Returns:
        {config, config_sha256, git, software, hardware, runs, benchmarks, data, command}.
    """
    config = yaml.safe_load(Path(config_path).read_text())
    return {"config": config, "config_sha256": config_hash(config), "git": git_state(Path(repo)),
            "software": software(), "hardware": hardware(), "runs": run_times(run_dirs),
            "benchmarks": benchmarks(run_dirs),
            "data": data_checksums(data_files, Path(data_dir)), "command": command}
