"""audit/train/run.py: the train job: deterministic, resumable after a kill, a diverged run a failed
one with its reason, a crash one error line."""

import json
import os
import signal
import subprocess
import sys
import time

import torch

from audit.train.run import train
from helpers import comparable, tiny_settings


def weights(run_dir):
    return torch.load(run_dir / "model.pt", weights_only=False)["state"]


def test_same_seed_gives_identical_metrics_and_weights(ptb_corpus, tmp_path):
    a = train(tiny_settings(seed=3), ptb_corpus, tmp_path / "a", log=lambda m: None)
    b = train(tiny_settings(seed=3), ptb_corpus, tmp_path / "b", log=lambda m: None)
    c = train(tiny_settings(seed=4), ptb_corpus, tmp_path / "c", log=lambda m: None)
    assert a["status"] == "ok" and comparable(a) == comparable(b)
    assert all(torch.equal(x, y) for x, y in zip(weights(tmp_path / "a").values(), weights(tmp_path / "b").values()))
    assert a["valid_ppl"] != c["valid_ppl"]
    assert a["log"][-1]["averaging"] or len(a["log"]) == 2
    assert json.loads((tmp_path / "a" / "metrics.json").read_text())["valid_ppl"] == a["valid_ppl"]
    # the job's own CPU covers its training steps (audit.bench.study reads both)
    assert a["job_cpu_seconds"] >= a["train_cpu_seconds"] > 0


def test_killed_run_resumes_to_exactly_the_uninterrupted_metrics(ptb_corpus, tmp_path):
    settings = tiny_settings(seed=5, epochs=4)
    reference = train(settings, ptb_corpus, tmp_path / "ref", log=lambda m: None)
    run_dir = tmp_path / "killed"
    cmd = [sys.executable, "-m", "audit", "train", "--settings", json.dumps(settings),
           "--corpus", str(ptb_corpus), "--out-dir", str(run_dir)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = run_dir / "work" / "last.pt"
    deadline = time.time() + 120
    while not checkpoint.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)  # mid-way through epoch 2 (or later), never after the end
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not (run_dir / "metrics.json").exists()
    resumed = train(settings, ptb_corpus, run_dir, log=lambda m: None)
    assert comparable(resumed) == comparable(reference)
    assert all(torch.equal(x, y) for x, y in zip(weights(run_dir).values(), weights(tmp_path / "ref").values()))


def test_divergence_is_a_failed_run_with_its_reason(ptb_corpus, tmp_path):
    metrics = train(tiny_settings(lr=1e30, clip=1e30), ptb_corpus, tmp_path / "d", log=lambda m: None)
    assert metrics["status"] == "failed"
    assert metrics["error"].startswith("Divergence: non-finite training loss at epoch 1")
    assert (tmp_path / "d" / "model.pt").is_file()
    assert json.loads((tmp_path / "d" / "metrics.json").read_text())["status"] == "failed"


def test_a_crash_of_train_ends_its_log_with_one_error_line(tmp_path):
    # settings without a train section: a KeyError inside the trainer, not an AuditError
    proc = subprocess.run([sys.executable, "-m", "audit", "train", "--settings", json.dumps({"seed": 1}),
                           "--corpus", str(tmp_path / "none.pt"), "--out-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr  # the traceback stays in the log for whoever debugs it
    assert proc.stderr.splitlines()[-1] == "error: train crashed: KeyError: 'train'"
