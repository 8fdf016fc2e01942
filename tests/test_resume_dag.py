"""Resuming through the Snakemake DAG: a training job resumes its checkpoint only when that
checkpoint belongs to the run now asked for (audit/train/checkpoint.py).

One tiny run (a few thousand PTB tokens, one seed, one or two epochs) is trained by Snakemake in
a temporary copy of the workflow; each test edits the config (or the checkpoint) of its own copy
of that finished workdir, reruns Snakemake and compares metrics.json with a clean in-process run
of the settings the rule was given.
"""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from helpers import comparable
from test_pipeline import copy_workflow, job_counts, snakemake

CONFIG = {
    "study": "resume",
    "data": {"corpora": ["ptb"], "max_tokens": {"train": 4000, "valid": 1000, "test": 1000}},
    "seeds": [1],
    "heads": [{"name": "softmax"}],
    "model": {"emb_size": 8, "hidden_size": 16, "n_layers": 2, "dropoute": 0.0, "dropouti": 0.1,
              "dropouth": 0.1, "dropout": 0.2, "wdrop": 0.1},
    "train": {"epochs": 1, "batch_size": 10, "bptt": 20, "lr": 20.0, "asgd": "nt", "nonmono": 1,
              "threads": 1, "device": "cpu"},
    "evaluate": {"contexts": 100},
}
RUN = "results/resume/runs/ptb/softmax/1"
TARGET = f"{RUN}/metrics.json"
LOG = "logs/resume/train/ptb/softmax/1.log"
ARGS = (TARGET, "--configfile", "configs/resume.yaml")  # --configfile takes every word after it


def write_config(workdir: Path, config: dict) -> None:
    (workdir / "configs" / "resume.yaml").write_text(yaml.safe_dump(config))


def rerun(workdir: Path, mirror: Path, *extra: str) -> dict[str, int]:
    proc = snakemake(workdir, *extra, *ARGS, mirror=mirror)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return job_counts(proc.stdout + proc.stderr)


def metrics(workdir: Path) -> dict:
    return json.loads((workdir / TARGET).read_text())


def clean_run(workdir: Path, tmp_path: Path) -> dict:
    """The run of the workdir's current config, trained from scratch in-process on the DAG's own
    corpus cache, with the settings the train rule passes (audit.config.settings_json)."""
    from audit.config import load_study, settings_json
    from audit.train.run import train

    settings = json.loads(settings_json(load_study(workdir / "configs" / "resume.yaml"), "ptb", "softmax", 1))
    return train(settings, str(workdir / "results/data/ptb/corpus.pt"), tmp_path / "clean", log=lambda m: None)


@pytest.fixture(scope="module")
def finished(tmp_path_factory, mirror) -> Path:
    workdir = copy_workflow(tmp_path_factory.mktemp("resume-dag"))
    write_config(workdir, CONFIG)
    assert rerun(workdir, mirror).get("train") == 1
    assert metrics(workdir)["status"] == "ok" and (workdir / RUN / "work" / "last.pt").is_file()
    return workdir


@pytest.fixture
def workdir(finished, tmp_path) -> Path:
    """A copy of the finished workdir (Snakemake's metadata and mtimes included)."""
    return shutil.copytree(finished, tmp_path / "wd", symlinks=True)


@pytest.mark.slow
def test_changed_lr_and_dropout_retrain_from_scratch(workdir, mirror, tmp_path):
    old = metrics(workdir)
    config = json.loads(json.dumps(CONFIG))
    config["train"]["lr"], config["model"]["dropout"] = 1.0, 0.5
    write_config(workdir, config)
    assert rerun(workdir, mirror).get("train") == 1  # Snakemake sees the changed params
    new, clean = metrics(workdir), clean_run(workdir, tmp_path)
    assert comparable(new) == comparable(clean)
    assert new["valid_ppl"] != old["valid_ppl"] and new["settings"]["train"]["lr"] == 1.0
    log = (workdir / LOG).read_text()
    assert "was written under other settings: model.dropout 0.2 -> 0.5; train.lr 20.0 -> 1.0: " \
           "discarded, training afresh" in log
    assert "epoch    1 |" in log


@pytest.mark.slow
def test_forcing_a_finished_run_verifies_its_checkpoint_and_keeps_its_numbers(workdir, mirror):
    # Decision (docs/running.md): `snakemake -f` on a finished run does not retrain; the
    # checkpoint must carry the run's identity and reproduce its logged validation loss, and the
    # outputs are rewritten from it with the same numbers (a mismatch retrains from scratch).
    before = metrics(workdir)
    assert rerun(workdir, mirror, "-f").get("train") == 1
    after = metrics(workdir)
    # timings included: no epoch was trained again (job_cpu_seconds is the CPU of the job that
    # wrote the file, here the verifying rerun, so it alone may differ)
    assert after.pop("job_cpu_seconds") > 0 and before.pop("job_cpu_seconds") > 0
    assert after == before
    log = (workdir / LOG).read_text()
    assert "validation loss reproduced); nothing left to train" in log and "epoch    1 |" not in log


@pytest.mark.slow
def test_raising_epochs_continues_to_exactly_the_longer_run(workdir, mirror, tmp_path):
    config = json.loads(json.dumps(CONFIG))
    config["train"]["epochs"] = 2
    write_config(workdir, config)
    assert rerun(workdir, mirror).get("train") == 1
    assert comparable(metrics(workdir)) == comparable(clean_run(workdir, tmp_path))
    log = (workdir / LOG).read_text()
    assert "after epoch 1 of 2" in log and "epoch    2 |" in log and "epoch    1 |" not in log


@pytest.mark.slow
def test_a_truncated_checkpoint_is_discarded_with_a_warning(workdir, mirror):
    before = metrics(workdir)
    last = workdir / RUN / "work" / "last.pt"
    last.write_bytes(last.read_bytes()[:1000])
    assert rerun(workdir, mirror, "-f").get("train") == 1
    assert comparable(metrics(workdir)) == comparable(before)
    log = (workdir / LOG).read_text()
    assert f"warning: checkpoint {RUN}/work/last.pt is unreadable (" in log and "epoch    1 |" in log


@pytest.mark.slow
def test_changed_evaluate_options_rerun_only_the_evaluate_job(workdir, mirror):
    # users' story: refresh one table without retraining anything. The train rule's params hold
    # no evaluate option (audit.config.train_settings); the evaluate rule's --options hold them all.
    target = (f"{RUN}/eval.json", "--configfile", "configs/resume.yaml")
    proc = snakemake(workdir, *target, mirror=mirror)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = job_counts(proc.stdout + proc.stderr)
    assert counts["evaluate"] == 1 and "train" not in counts   # (and the word-similarity files)
    assert json.loads((workdir / RUN / "eval.json").read_text())["contexts"] == 100
    before = metrics(workdir)
    config = json.loads(json.dumps(CONFIG))
    config["evaluate"] = {"contexts": 50, "argmax": {"lp_budget": 3}}
    write_config(workdir, config)
    proc = snakemake(workdir, *target, mirror=mirror)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = job_counts(proc.stdout + proc.stderr)
    assert counts["evaluate"] == 1 and "train" not in counts, counts   # no train job
    assert metrics(workdir) == before
    result = json.loads((workdir / RUN / "eval.json").read_text())
    assert result["contexts"] == 50 and result["argmax_lp_tokens"] <= 3
