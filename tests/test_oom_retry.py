"""Out of GPU memory is retried, never a silent failure (issue 22).

A tiny two-epoch run is trained by Snakemake in a temporary copy of the workflow with the
trainer's test hook AUDIT_INJECT_OOM_ONCE set: the first attempt raises torch's out-of-memory
error before epoch 2 (after epoch 1's checkpoint). The job must exit non-zero with the one-line
error, Snakemake's ``retries:`` must rerun it, the rerun must resume and end with exactly the
metrics of an uninterrupted run, and metrics.json must record the event.
"""

import json
import os

import pytest

from audit.errors import AuditError
from helpers import comparable, copy_workflow
from test_pipeline import snakemake
from test_resume_dag import ARGS, CONFIG, LOG, TARGET, clean_run, write_config

TWO_EPOCHS = {**CONFIG, "train": {**CONFIG["train"], "epochs": 2}}


def without_retries(metrics: dict) -> dict:
    return {k: v for k, v in comparable(metrics).items() if k != "gpu_oom_retries"}


@pytest.mark.slow
def test_oom_exits_non_zero_and_the_snakemake_retry_resumes_to_the_same_metrics(tmp_path, mirror, monkeypatch):
    (tmp_path / "wd").mkdir()
    workdir = copy_workflow(tmp_path / "wd")
    write_config(workdir, TWO_EPOCHS)
    marker = tmp_path / "oom-injected"
    monkeypatch.setenv("AUDIT_INJECT_OOM_ONCE", str(marker))
    proc = snakemake(workdir, *ARGS, mirror=mirror)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert marker.is_file()  # the first attempt did run out of memory
    assert "Trying to restart job" in output  # Snakemake retried the failed job
    metrics = json.loads((workdir / TARGET).read_text())
    assert metrics["status"] == "ok" and metrics["epochs_run"] == 2
    [event] = metrics["gpu_oom_retries"]
    assert event["epoch"] == 2 and "injected by AUDIT_INJECT_OOM_ONCE" in event["error"]
    assert "resumed checkpoint" in (workdir / LOG).read_text()  # the retry's log
    monkeypatch.delenv("AUDIT_INJECT_OOM_ONCE")
    assert without_retries(metrics) == without_retries(clean_run(workdir, tmp_path))


def test_oom_raises_one_line_error_keeps_checkpoint_and_writes_no_metrics(tmp_path, ptb_corpus, monkeypatch):
    from audit.config import run_settings
    from audit.config import check_study
    from audit.train.run import train

    settings = run_settings(check_study(json.loads(json.dumps(TWO_EPOCHS)), "test"), "ptb", "softmax", 1)
    monkeypatch.setenv("AUDIT_INJECT_OOM_ONCE", str(tmp_path / "marker"))
    with pytest.raises(AuditError, match=r"^out of GPU memory: softmax seed 1 at epoch 2 on cpu .*checkpoint after "
                                         r"epoch 1 is kept"):
        train(settings, str(ptb_corpus), tmp_path / "run", log=lambda m: None)
    assert not (tmp_path / "run" / "metrics.json").exists()
    assert (tmp_path / "run" / "work" / "last.pt").is_file()
    assert json.loads((tmp_path / "run" / "work" / "oom.json").read_text())[0]["epoch"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("cuda_graphs", [False, True], ids=["eager", "cuda-graphs"])
def test_oom_on_the_simulated_gpu_is_retried_by_snakemake_with_the_gpu_to_itself(cuda_graphs, tmp_path, mirror,
                                                                                  monkeypatch):
    """The jobs run on the simulated CUDA device (tests/support/simulated_python.py), a GPU shared
    by runs_per_gpu = 2 runs: on its first attempt the training job may use half the device's
    memory, which its real peak exceeds, so the simulated allocator raises torch's out-of-memory
    error; the job exits non-zero, Snakemake retries it holding both slots (the whole GPU), and
    the retry ends with the numbers of a run that never ran out of memory. Eagerly and with
    ``train.cuda_graphs`` (issue 47; graphs replaced by tests/support/graph_standin.py in every job
    and in the reference: the retry resumes, captures afresh and replays)."""
    from audit.config import load_study, settings_json
    from audit.train import graphs
    from audit.train.run import train
    from support import simulated_python
    from support.fake_cuda import simulated_cuda
    from support.graph_standin import ReplayStandIn

    (tmp_path / "wd").mkdir()
    workdir = copy_workflow(tmp_path / "wd")
    config = {**CONFIG, "train": {**CONFIG["train"], "device": "cuda", "runs_per_gpu": 2, "oom_retries": 1,
                                  **({"cuda_graphs": True} if cuda_graphs else {})}}
    monkeypatch.setattr(graphs, "default_backend", ReplayStandIn)
    monkeypatch.setenv("AUDIT_SIM_GRAPHS", "standin")
    write_config(workdir, config)
    corpus = "results/data/ptb/corpus.pt"
    proc = snakemake(workdir, corpus, "--configfile", "configs/resume.yaml", mirror=mirror)
    assert proc.returncode == 0, proc.stderr[-3000:]

    # the run's own peak device memory, in-process on the simulated device with the rule's settings
    monkeypatch.setenv("AUDIT_GPU_LOCK_DIR", str(tmp_path / "locks-ref"))
    monkeypatch.setattr("audit.device._HELD", None)
    settings = json.loads(settings_json(load_study(workdir / "configs" / "resume.yaml"), "ptb", "softmax", 1))
    with simulated_cuda() as sim:
        reference = train(settings, str(workdir / corpus), tmp_path / "ref", log=lambda m: None)
    peak = sim.peak
    assert reference["status"] == "ok" and reference["device"] == "cuda:0" and peak > 0

    # a GPU of 1.5 x that peak: half of it (one of two slots) is too little, all of it enough
    monkeypatch.setenv("AUDIT_SIM_GPU_BYTES", str(int(1.5 * peak)))
    monkeypatch.setenv("AUDIT_GPU_LOCK_DIR", str(tmp_path / "locks"))
    site = simulated_python.install(tmp_path / "site")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    proc = snakemake(workdir, *ARGS, "--resources", "gpu=1", mirror=mirror)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "Trying to restart job" in output
    metrics = json.loads((workdir / TARGET).read_text())
    assert metrics["status"] == "ok" and metrics["device"] == "cuda:0"
    [event] = metrics["gpu_oom_retries"]
    assert event["gpu_slots"] == 1 and event["device"].startswith("cuda")
    assert "CUDA out of memory (simulated)" in event["error"], event  # the allocator's, not a hook
    log = (workdir / LOG).read_text()   # the retry's log
    assert "holding 2 slots: the whole GPU" in log, log[-2000:]
    assert without_retries(metrics) == without_retries(reference)
    assert all(row.get("graph_steps", 0) > 0 for row in metrics["log"]) == cuda_graphs
