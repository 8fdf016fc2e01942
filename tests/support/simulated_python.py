"""Snakemake's jobs on the simulated CUDA device: ``python -m audit ...`` inside ``fake_cuda.simulated_cuda``.

A test that puts ``install(folder)`` on PYTHONPATH makes every ``python -m audit ...`` job of the
workflow (rules/*.smk) start inside ``fake_cuda.simulated_cuda`` through a ``sitecustomize``
module, which Python imports at start-up: the job sees one CUDA device, and its allocations count
against the device memory its GPU slots give it. (Not a ``python`` first on PATH:
rules/common.smk puts Snakemake's own interpreter first, on purpose.) Other processes, Snakemake
itself included, start as usual.

Memory: the simulated GPU has ``AUDIT_SIM_GPU_BYTES`` bytes (environment). A job holding ``s`` of
the GPU's ``runs_per_gpu`` slots (``AUDIT_GPU_SLOTS``, ``AUDIT_RUNS_PER_GPU``: what the workflow
itself hands the job) may use ``s / runs_per_gpu`` of it: the other slots' runs hold the rest, as
on a GPU shared by that many runs. So a job that runs out of memory on a shared GPU is rerun by
Snakemake's ``retries:`` holding every slot (``audit.device.job_gpu_slots``), and then fits.

CUDA graphs: with ``AUDIT_SIM_GRAPHS=standin`` a job's ``train.cuda_graphs`` runs on the graph
stand-in of tests/support/graph_standin.py (a CPU cannot capture a real graph).
"""

from __future__ import annotations

import os
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def memory_limit(env) -> int | None:
    """Device bytes this job may use (None: no limit); see the module docstring."""
    total = env.get("AUDIT_SIM_GPU_BYTES")
    if not total:
        return None
    runs = env.get("AUDIT_RUNS_PER_GPU") or "1"
    runs = 1 if runs == "auto" else max(1, int(runs))
    slots = min(max(1, int(env.get("AUDIT_GPU_SLOTS") or 1)), runs)
    return int(total) * slots // runs


def install(folder: Path) -> Path:
    """Write ``sitecustomize.py`` into ``folder`` (put it on PYTHONPATH); returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        "import sys\n"
        "if sys.orig_argv[1:3] == ['-m', 'audit']:\n"
        f"    sys.path.append({os.fspath(TESTS)!r})\n"
        "    from support.simulated_python import start\n"
        "    start()\n")
    return folder


def start() -> None:
    """Enter the simulated device for the rest of this process (left at exit)."""
    import atexit

    from support.fake_cuda import simulated_cuda

    total = int(os.environ.get("AUDIT_SIM_GPU_BYTES") or 80 * 2 ** 30)
    context = simulated_cuda(memory_limit=memory_limit(os.environ), total_memory=total)
    context.__enter__()
    atexit.register(context.__exit__, None, None, None)
    if os.environ.get("AUDIT_SIM_GRAPHS") == "standin":
        from audit.train import graphs
        from support.graph_standin import ReplayStandIn

        graphs.default_backend = ReplayStandIn
