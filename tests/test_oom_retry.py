"""Out of GPU memory is retried, never a silent failure (issue 22).

A tiny two-epoch run is trained by Snakemake in a temporary copy of the workflow with the
trainer's test hook AUDIT_INJECT_OOM_ONCE set: the first attempt raises torch's out-of-memory
error before epoch 2 (after epoch 1's checkpoint). The job must exit non-zero with the one-line
error, Snakemake's ``retries:`` must rerun it, the rerun must resume and end with exactly the
metrics of an uninterrupted run, and metrics.json must record the event.
"""

import json

import pytest

from audit.errors import AuditError
from helpers import comparable
from test_pipeline import copy_workflow, snakemake
from test_resume_dag import ARGS, CONFIG, LOG, RUN, TARGET, clean_run, write_config

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
    from audit.train.trainer import train

    settings = run_settings(check_study(json.loads(json.dumps(TWO_EPOCHS)), "test"), "ptb", "softmax", 1)
    monkeypatch.setenv("AUDIT_INJECT_OOM_ONCE", str(tmp_path / "marker"))
    with pytest.raises(AuditError, match=r"^out of GPU memory: softmax seed 1 at epoch 2 on cpu .*checkpoint after "
                                         r"epoch 1 is kept"):
        train(settings, str(ptb_corpus), tmp_path / "run", log=lambda m: None)
    assert not (tmp_path / "run" / "metrics.json").exists()
    assert (tmp_path / "run" / "work" / "last.pt").is_file()
    assert json.loads((tmp_path / "run" / "work" / "oom.json").read_text())[0]["epoch"] == 2
