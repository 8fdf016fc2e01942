"""``python -m audit gpu-check`` as a child process on the simulated CUDA device."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def gpu_check(tmp_path, mirror):
    """run(args, site) -> (CompletedProcess, wall seconds): ``python -m audit gpu-check ARGS``
    with ``site`` (a folder holding a sitecustomize, e.g. ``simulated_python.install``'s) first
    on PYTHONPATH, this checkout next, the data mirror, and slot locks of its own."""

    def run(args: list[str], site: Path, timeout: float = 900) -> tuple[subprocess.CompletedProcess, float]:
        env = {**os.environ, "AUDIT_DATA_MIRROR": os.fspath(mirror),
               "AUDIT_GPU_LOCK_DIR": os.fspath(tmp_path / "gpu-locks"),
               "PYTHONPATH": os.pathsep.join(filter(None, [os.fspath(site), os.fspath(REPO),
                                                           os.environ.get("PYTHONPATH")]))}
        for name in ("AUDIT_SIM_GPU_BYTES", "AUDIT_GPUS", "AUDIT_RUNS_PER_GPU", "CUDA_VISIBLE_DEVICES"):
            env.pop(name, None)
        started = time.time()
        proc = subprocess.run([sys.executable, "-m", "audit", "gpu-check", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=timeout)
        return proc, time.time() - started

    return run
