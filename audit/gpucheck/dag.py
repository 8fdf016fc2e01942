"""The smoke study through Snakemake on this GPU, against the same study on the CPU.

``configs/smoke.yaml`` with dropout off (CPU and CUDA draw different masks from one seed; without
dropout both follow one trajectory up to rounding) runs to its runs table three times in one
copy of the workflow: on the CPU, then with ``--resources gpu=1`` at ``runs_per_gpu`` 4 and 1.
Every run must be ok, the GPU pool line must say what was asked, softmax's Press rank must be
d + 2, and each run's test perplexity must equal the CPU run's within ``PPL_RTOL``: rounding
differences (cuBLAS/cuDNN against the CPU BLAS, float32 with TF32 off) grow over a run's ~300
steps, so the bound is wider than the one-step checks of ``correctness``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from audit.gpucheck.common import run_in_session

PPL_RTOL = 0.01
RUNS_PER_GPU = [4, 1]


def snakemake(workdir: Path, target: str, config: str, timeout: float, *args: str) -> subprocess.CompletedProcess:
    # the target first: --configfile and --resources take every word after them
    return run_in_session([sys.executable, "-m", "snakemake", target, "--cores", str(os.cpu_count() or 2),
                           "--configfile", config, *args], max(timeout, 1), cwd=workdir,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


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


def run(result, budget: float, simulated: bool) -> None:
    import importlib.util

    import pandas as pd
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
        workdir = Path(tmp)
        for name in ("Snakefile", "rules", "configs", "profiles", "captions"):
            source = REPO / name
            (shutil.copytree if source.is_dir() else shutil.copy)(source, workdir / name)
        tables = {}
        for label, device, runs in [("cpu", "cpu", 1)] + [(f"gpu{r}", "cuda", r) for r in RUNS_PER_GPU]:
            study = f"smoke-{label}"
            config = study_config(workdir, study, device, runs)
            args = ["--resources", "gpu=1"] if device == "cuda" else []
            started = time.time()
            try:
                proc = snakemake(workdir, f"reports/{study}/runs.csv", config, deadline - time.time(), *args)
            except subprocess.TimeoutExpired:
                result.note(f"{label}: out of time")
                result.data["incomplete"] = True
                break
            result.figure(f"{label}_wall_seconds", round(time.time() - started, 1))
            if not result.check(f"Snakemake {label} exits 0", proc.returncode, "0", proc.returncode == 0,
                                stderr_tail=proc.stderr[-1500:] if proc.returncode else ""):
                break
            if device == "cuda":
                line = f"GPU pool: gpu=1 GPU(s) x {runs} run(s) per GPU = {runs} concurrent GPU jobs"
                result.check(f"{label}: GPU pool as asked", line if line in proc.stderr else "missing", line,
                             line in proc.stderr)
            table = pd.read_csv(workdir / "reports" / study / "runs.csv")
            tables[label] = table
            result.check(f"{label}: every run ok", f"{(table['status'] == 'ok').sum()} of {len(table)}", "all",
                         len(table) > 0 and (table["status"] == "ok").all())
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
            d = int(yaml.safe_load((workdir / "configs" / "smoke.yaml").read_text())["model"]["emb_size"])
            result.check(f"{label}: {base} Press rank", sorted(set(softmax["press_rank"].astype(int))),
                         f"d + 2 = {d + 2}", len(softmax) > 0 and (softmax["press_rank"] == d + 2).all())
            result.figure(f"{label}_runs", both[["head", "seed", "test_ppl", "test_ppl_cpu", "press_rank"]]
                          .to_dict(orient="records"))
