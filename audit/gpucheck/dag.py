"""The smoke study through Snakemake on this GPU, against the same study on the CPU.

``configs/smoke.yaml`` with dropout off (CPU and CUDA draw different masks from one seed; without
dropout both follow one trajectory up to rounding) runs to its runs table three times: with
``--resources gpu=1`` at ``runs_per_gpu`` 1 (the default) and then 4 in one copy of the workflow,
and meanwhile on the CPU in another copy (its jobs use the cores the GPU jobs leave idle; two
copies, because two Snakemakes in one folder would share the data rule's outputs).
Every run must be ok, the GPU pool line must say what was asked, softmax's Press rank must be
d + 2, and each run's test perplexity must equal the CPU run's within ``PPL_RTOL``: rounding
differences (cuBLAS/cuDNN against the CPU BLAS, float32 with TF32 off) grow over a run's ~300
steps, so the bound is wider than the one-step checks of ``correctness``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from audit.gpucheck.common import copy_workflow, run_in_session

PPL_RTOL = 0.01
RUNS_PER_GPU = [1, 4]


def snakemake_cmd(target: str, config: str, *args: str) -> list[str]:
    # the target first: --configfile and --resources take every word after them
    return [sys.executable, "-m", "snakemake", target, "--cores", str(os.cpu_count() or 2), "--configfile", config, *args]


def study_config(workdir: Path, name: str, device: str, runs_per_gpu: int) -> str:
    import yaml

    from audit.gpucheck.common import NO_DROPOUT

    config = yaml.safe_load((workdir / "configs" / "smoke.yaml").read_text())
    config["study"] = name
    config["model"].update(NO_DROPOUT)
    config["train"].update(device=device, runs_per_gpu=runs_per_gpu)
    path = workdir / "configs" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return f"configs/{name}.yaml"


def progress(log: str | None) -> str:
    """How far a Snakemake run got, from the last "N of M steps (P%) done" line of its log."""
    done = re.findall(r"^(\d+) of (\d+) steps \(", log or "", flags=re.M)
    return f"{done[-1][0]} of {done[-1][1]} jobs done" if done else "no job done"


def finished(result, label: str, code: int, log: str, workdir: Path, seconds: float, tables: dict) -> bool:
    """Record one study's end: its wall time, exit code and runs table; False if it failed."""
    import pandas as pd

    result.figure(f"{label}_wall_seconds", round(seconds, 1))
    if not result.check(f"Snakemake {label} exits 0", code, "0", code == 0, stderr_tail=log[-1500:] if code else ""):
        return False
    table = pd.read_csv(workdir / "reports" / f"smoke-{label}" / "runs.csv")
    tables[label] = table
    result.check(f"{label}: every run ok", f"{(table['status'] == 'ok').sum()} of {len(table)}", "all",
                 len(table) > 0 and (table["status"] == "ok").all())
    return True


def run(result, budget: float, simulated: bool) -> None:
    import importlib.util

    import yaml

    from audit.bench import picks
    from audit.gpucheck.common import REPO

    if importlib.util.find_spec("snakemake") is None:
        result.data["skipped"] = "snakemake is not installed (scripts/bootstrap --offline installs it from a wheelhouse)"
        return
    if not os.environ.get("AUDIT_DATA_MIRROR"):
        result.note("AUDIT_DATA_MIRROR is not set: the data rule downloads PTB")
    deadline = time.time() + budget
    with tempfile.TemporaryDirectory(prefix="audit-gpu-check-dag-") as tmp:
        tables = {}
        cpu_dir = copy_workflow(Path(tmp) / "cpu")
        cpu_config = study_config(cpu_dir, "smoke-cpu", "cpu", 1)
        cpu_log = open(Path(tmp) / "cpu.log", "w+")
        started = {"cpu": time.time()}
        cpu = subprocess.Popen(snakemake_cmd("reports/smoke-cpu/runs.csv", cpu_config), cwd=cpu_dir, stdout=cpu_log,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
        ended = {}   # the CPU study's own end, not when the GPU studies let us look
        threading.Thread(target=lambda: (cpu.wait(), ended.setdefault("cpu", time.time())), daemon=True).start()
        try:
            gpu_dir = copy_workflow(Path(tmp) / "gpu")
            for runs in RUNS_PER_GPU:
                label = f"gpu{runs}"
                config = study_config(gpu_dir, f"smoke-{label}", "cuda", runs)
                started[label] = time.time()
                try:
                    proc = run_in_session(snakemake_cmd(f"reports/smoke-{label}/runs.csv", config, "--resources", "gpu=1"),
                                          max(deadline - time.time(), 1), cwd=gpu_dir, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True)
                except subprocess.TimeoutExpired as cut:
                    result.note(f"{label}: out of time after {time.time() - started[label]:.0f} s, "
                                f"{progress(cut.stderr)}")
                    result.data["incomplete"] = True
                    break
                if not finished(result, label, proc.returncode, proc.stderr, gpu_dir, time.time() - started[label], tables):
                    break
                line = f"GPU pool: gpu=1 GPU(s) x {runs} run(s) per GPU = {runs} concurrent GPU jobs"
                result.check(f"{label}: GPU pool as asked", line if line in proc.stderr else "missing", line,
                             line in proc.stderr)
            try:
                code = cpu.wait(timeout=max(deadline - time.time(), 1))
            except subprocess.TimeoutExpired:
                cpu_log.seek(0)
                result.note(f"cpu: out of time, {progress(cpu_log.read())}")
                result.data["incomplete"] = True
            else:
                cpu_log.seek(0)
                finished(result, "cpu", code, cpu_log.read(), cpu_dir, ended.get("cpu", time.time()) - started["cpu"], tables)
        finally:
            if cpu.poll() is None:   # its jobs too: they would write into a folder being removed
                os.killpg(cpu.pid, signal.SIGKILL)
                cpu.wait()
            cpu_log.close()
        cpu = tables.get("cpu")
        for label, table in tables.items():
            if label == "cpu" or cpu is None:
                continue
            both = table.merge(cpu, on=["head", "seed"], suffixes=("", "_cpu"))
            gap = ((both["test_ppl"] - both["test_ppl_cpu"]).abs() / both["test_ppl_cpu"]).max()
            result.check(f"{label}: test ppl against the CPU study", f"max relative gap {gap:.2g} over {len(both)} runs",
                         f"<= {PPL_RTOL:g}", len(both) == len(cpu) and gap <= PPL_RTOL)
            base = picks.baseline()  # the plain softmax: its log-P has rank d + 2
            softmax = both[both["head"] == base]
            d = int(yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text())["model"]["emb_size"])
            result.check(f"{label}: {base} Press rank", sorted(set(softmax["press_rank"].astype(int))),
                         f"d + 2 = {d + 2}", len(softmax) > 0 and (softmax["press_rank"] == d + 2).all())
            result.figure(f"{label}_runs", both[["head", "seed", "test_ppl", "test_ppl_cpu", "press_rank"]]
                          .to_dict(orient="records"))
