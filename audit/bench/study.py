"""Where a study's CPU goes (``python -m audit bench study``).

Issue 21's target: at least 60% of a study's CPU-seconds are spent inside training steps. Two
ways to get the total:

- ``python -m audit bench study --results results/default -- snakemake --cores all`` runs the
  command (any Snakemake invocation) and takes its total CPU from the operating system: user +
  system time of every process it started and waited for (``getrusage(RUSAGE_CHILDREN)``), the
  Snakemake process itself included;
- ``--total-cpu S`` takes the total of a run measured otherwise (``/usr/bin/time -v``'s user +
  system seconds).

The parts come from the runs' own files: training steps from each run's ``metrics.json``
(``train_cpu_seconds``, the process CPU time around the training loop; runs written before that
field existed fall back to ``wall_seconds``, and the table says so), whole train and evaluate
jobs from the jobs' own ``job_cpu_seconds`` (``metrics.json``, ``eval.json``: the process's CPU
time when it writes them). Runs written before that field fall back to Snakemake's
``benchmark_*.tsv`` (``cpu_time``), a lower bound: Snakemake samples a job's CPU every 30 s after
its first 15 s, so a job's last seconds are missed (measured: 67 default-study train jobs summed
to 523 CPU-s less than their training steps alone). The rest (Snakemake's own scheduling, data,
statistics, report) is the total minus those.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from audit.errors import AuditError

TARGET_SHARE = 0.60


def benchmark_cpu(path: Path) -> float:
    """CPU seconds of one Snakemake ``benchmark:`` file (its ``cpu_time`` column; NaN if absent)."""
    if not path.is_file():
        return math.nan
    table = pd.read_csv(path, sep="\t")
    if "cpu_time" not in table or table.empty:
        raise AuditError(f"{path}: no cpu_time column; not a Snakemake benchmark file")
    return float(table["cpu_time"].iloc[-1])   # the last attempt (a resumed job)


def job_cpu(run_dir: Path, name: str, own: dict | None, sampled: set) -> float:
    """CPU seconds of a run's ``name`` job (train or evaluate): its own ``job_cpu_seconds`` when
    its JSON has one, else its benchmark file's (a lower bound; ``sampled`` collects the names
    that fell back to it). NaN when neither exists."""
    value = (own or {}).get("job_cpu_seconds")
    if value is not None and math.isfinite(value):
        return float(value)
    cpu = benchmark_cpu(run_dir / f"benchmark_{name}.tsv")
    if not math.isnan(cpu):
        sampled.add(name)
    return cpu


def run_parts(results: Path) -> dict:
    """CPU seconds per part, summed over every run folder under ``results/runs``.

    Returns:
        {"runs", "training", "training_source", "train_jobs", "evaluate_jobs", "missing",
        "sampled"}: ``training`` is the training steps' CPU, ``train_jobs``/``evaluate_jobs`` the
        whole jobs' (their own figure, else the benchmark file's), ``missing`` the run folders
        with neither, ``sampled`` the job kinds read from benchmark files (lower bounds).
    """
    metrics = sorted((results / "runs").glob("*/*/*/metrics.json"))
    if not metrics:
        raise AuditError(f"{results}/runs: no run folder with a metrics.json; is this a study's results folder?")
    training = train_jobs = evaluate_jobs = 0.0
    sources, missing, sampled = set(), 0, set()
    for path in metrics:
        data = json.loads(path.read_text())
        result = path.parent / "eval.json"
        train_cpu = job_cpu(path.parent, "train", data, sampled)
        evaluate_cpu = job_cpu(path.parent, "evaluate", json.loads(result.read_text()) if result.is_file() else None,
                               sampled)
        steps = data.get("train_cpu_seconds")
        if steps is None or not math.isfinite(steps):
            # wall time of the steps: on a loaded machine it exceeds the job's own CPU, which
            # bounds the steps' CPU from above
            steps, source = min(data["wall_seconds"], train_cpu), "wall_seconds capped by the job's CPU (runs without train_cpu_seconds)"
        else:
            source = "train_cpu_seconds"
        missing += math.isnan(train_cpu) or math.isnan(evaluate_cpu)
        if not math.isnan(train_cpu):   # a run without its job's figure counts as "everything else" whole
            sources.add(source)
            training += steps
        train_jobs += 0.0 if math.isnan(train_cpu) else train_cpu
        evaluate_jobs += 0.0 if math.isnan(evaluate_cpu) else evaluate_cpu
    return {"runs": len(metrics), "training": training, "training_source": ", ".join(sorted(sources)),
            "train_jobs": train_jobs, "evaluate_jobs": evaluate_jobs, "missing": missing, "sampled": sampled}


def share_table(parts: dict, total: float) -> pd.DataFrame:
    """The table the command prints: part, CPU-seconds, share of ``total``."""
    if not total > 0:
        raise AuditError(f"total CPU seconds must be positive, got {total}")
    n = parts["runs"]
    # a sampled train job can read less than its own training steps: the rest is then unknown
    # (NaN), never negative, and "everything else" keeps the undercount
    rest = parts["train_jobs"] - parts["training"]
    rows = [
        (f"training steps ({n} runs, {parts['training_source']})", parts["training"]),
        (f"rest of the {n} train jobs (start-up, validation, checkpoints)", rest if rest >= 0 else math.nan),
        (f"{n} evaluate jobs", parts["evaluate_jobs"]),
        ("everything else (Snakemake itself, data, statistics, report)",
         total - parts["train_jobs"] - parts["evaluate_jobs"]),
        ("total", total),
    ]
    return pd.DataFrame([{"part": p, "cpu_seconds": round(s, 1), "share": f"{s / total:.1%}" if math.isfinite(s) else "n/a"}
                         for p, s in rows])


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv, command = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    else:
        command = []
    parser = argparse.ArgumentParser(prog="python -m audit bench study", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", required=True, help="the study's results folder (results/<study>)")
    parser.add_argument("--total-cpu", type=float, help="the study's total CPU seconds, measured otherwise")
    args = parser.parse_args(argv)
    if bool(command) == (args.total_cpu is not None):
        raise AuditError("bench study: give either --total-cpu S or a command after --, not both or neither")
    wall = math.nan
    if command:
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
        code = subprocess.call(command)
        after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic() - start
        if code != 0:
            raise AuditError(f"bench study: {' '.join(command)} exited with {code}")
        total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    else:
        total = args.total_cpu
    parts = run_parts(Path(args.results))
    table = share_table(parts, total)
    print(table.to_string(index=False))
    share = parts["training"] / total
    if math.isfinite(wall):
        print(f"wall {wall:.0f} s; CPU {total:.0f} s")
    if parts["sampled"]:
        print(f"note: {' and '.join(sorted(parts['sampled']))} jobs without job_cpu_seconds are read from Snakemake's "
              "benchmark files, which sample a job's CPU every 30 s and miss its last seconds: lower bounds")
    if parts["missing"]:
        print(f"note: {parts['missing']} run(s) without a benchmark file: their jobs count as 'everything else'")
    if "wall_seconds" in parts["training_source"]:   # an upper bound only: no verdict on it
        print(f"training share at most {share:.1%} (wall-based upper bound; target >= {TARGET_SHARE:.0%}): "
              f"{'not established' if share >= TARGET_SHARE else 'NOT met'}")
    else:
        print(f"training share {share:.1%} (target >= {TARGET_SHARE:.0%}): {'met' if share >= TARGET_SHARE else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
