"""audit/memory.py: the analytic GPU memory model against the simulated device's peak bytes, the
plan of the paper configs and the refusal of an oversubscribed study."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from audit import memory
from audit.config import load_study
from audit.errors import AuditError
from helpers import tiny_settings
from support.fake_cuda import simulated_cuda
from support.gpu_budget import HEADS

REPO = Path(__file__).resolve().parent.parent
SIZES = {"small": {"batch_size": 10, "bptt": 10}, "larger": {"batch_size": 20, "bptt": 20}}


@pytest.fixture(autouse=True)
def gpu_locks(tmp_path, monkeypatch):
    monkeypatch.setenv("AUDIT_GPU_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr("audit.device._HELD", None)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("head", HEADS)
def test_model_is_within_a_factor_of_the_simulated_peak(head, size, ptb_corpus):
    """Peak live device bytes of a training epoch (SGD, then averaging) and of the validation
    forward, measured by the simulated device's tracker, against train_bytes / evaluate's chunk."""
    from audit.train import trainer as T

    settings = tiny_settings(head=head, epochs=2, train_tokens=3000, asgd="et", switch_epoch=1,
                             device="cuda", max_seq_len_delta=5, **SIZES[size])
    with simulated_cuda() as sim:
        trainer = T.Trainer(settings, str(ptb_corpus), log=lambda m: None)
        sim.reset_peak()
        trainer.train_epoch()
        trainer.start_averaging()
        trainer.train_epoch()
        measured_train = sim.peak
    predicted = memory.train_bytes(settings)
    ratio = predicted / measured_train
    assert 1 / memory.MEASURED_FACTOR <= ratio <= memory.MEASURED_FACTOR, (predicted, measured_train)


def _paper_wt2(**train):
    config = load_study(REPO / "configs" / "paper-wt2.yaml")
    config["train"].update(device="cuda", **train)
    return config


def test_oversubscribed_plan_is_refused_in_one_line():
    """paper-wt2's evaluation: 2 x 33,278^2 float64 (Gram + eigensolver copy) + the 512 MB row
    buffer + 0.6 GB context + model and test split = 19.0 GB; 4 per GPU need 76 GB > 90% of 80 GB."""
    rows = {(r["arm"], r["job"]): r for r in memory.plan(_paper_wt2())}
    expected = (2 * 33_278 ** 2 * 8 + 2 ** 29 + 0.6e9) / 1e9
    assert expected < rows["softmax", "evaluate"]["gb"] < expected + 0.2
    with pytest.raises(AuditError) as err:
        memory.check_plan(_paper_wt2(runs_per_gpu=4), "configs/paper-wt2.yaml")
    message = str(err.value)
    assert "\n" not in message and message.startswith("configs/paper-wt2.yaml: evaluate job of")
    assert "4 per GPU" in message and "72.0 GB" in message and "runs_per_gpu <= 3" in message
    memory.check_plan(_paper_wt2(runs_per_gpu=3), "configs/paper-wt2.yaml")
    memory.check_plan(_paper_wt2(runs_per_gpu=4, gpu_memory_gb=141), "configs/paper-wt2.yaml")  # an H200
    cpu = load_study(REPO / "configs" / "paper-wt2.yaml")
    cpu["train"].update(device="cpu", runs_per_gpu=16)
    memory.check_plan(cpu, "cpu")  # no GPU job: nothing to plan


def test_snakemake_refuses_the_oversubscribed_study(tmp_path):
    config = yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text())
    config.setdefault("train", {}).update(device="cuda", runs_per_gpu=8, gpu_memory_gb=0.5)
    path = tmp_path / "over.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", str(path)],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode != 0
    assert f"{path}: train job of" in proc.stdout + proc.stderr or f"{path}: evaluate job of" in proc.stdout + proc.stderr
