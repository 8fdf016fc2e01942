"""The smoke study on a GPU: `--resources gpu=1` with one run per GPU, then with three.

Skipped without CUDA. The job logs carry the assignment line of audit.device.resolve_device
("GPU assignment: cuda:0 (device 0, slot k)"): with one run per GPU every job holds slot 0;
with three, jobs overlap on the GPU (two cores: two at a time), so some job holds slot 1.
"""

import re

import pandas as pd
import pytest
import torch
import yaml

from helpers import copy_workflow
from test_pipeline import snakemake

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (smoke study on a GPU)")]


@pytest.mark.parametrize("runs_per_gpu", [1, 3])
def test_smoke_study_on_one_gpu(tmp_path, mirror, runs_per_gpu):
    workdir = copy_workflow(tmp_path)
    config = yaml.safe_load((workdir / "configs" / "smoke.yaml").read_text())
    config["train"].update(device="cuda", runs_per_gpu=runs_per_gpu)
    (workdir / "configs" / "gpu.yaml").write_text(yaml.safe_dump(config))
    proc = snakemake(workdir, "--configfile", "configs/gpu.yaml", "--resources", "gpu=1", mirror=mirror)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"GPU pool: gpu=1 GPU(s) x {runs_per_gpu} run(s) per GPU = {runs_per_gpu} concurrent GPU jobs" in proc.stderr
    runs = pd.read_csv(workdir / "reports" / "smoke" / "runs.csv")
    assert len(runs) == 6 and (runs["status"] == "ok").all()
    assert (runs.loc[runs["head"] == "softmax", "press_rank"] == config["model"]["emb_size"] + 2).all()
    logs = list((workdir / "logs" / "smoke" / "train").rglob("*.log"))
    slots = [int(m) for log in logs for m in re.findall(r"GPU assignment: cuda:0 \(device \S+, slot (\d+)\)", log.read_text())]
    assert len(slots) == 6
    assert max(slots) == 0 if runs_per_gpu == 1 else max(slots) >= 1
