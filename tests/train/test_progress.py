"""Run progress (audit.train.progress) and the progress verb (audit.report.progress): what runs wrote -> epochs, best ppl, s/epoch, ETA."""

import json
import math

import yaml

from audit.report import progress as progress_verb
from audit.train import progress
from audit.train.run import train
from helpers import tiny_settings


def _write(run_dir, planned, seconds, ppl):
    (run_dir / "work").mkdir(parents=True)
    epochs = [{"epoch": i + 1, "valid_ppl": p, "seconds": s} for i, (s, p) in enumerate(zip(seconds, ppl))]
    (run_dir / "work" / "progress.json").write_text(json.dumps({"planned": planned, "epochs": epochs}))


def test_running_run_eta_is_epochs_left_times_median_seconds(tmp_path):
    run = tmp_path / "ptb" / "softmax" / "1"
    _write(run, 10, [10.0, 12.0, 11.0, 13.0], [300.0, 250.0, 260.0, 240.0])
    row = progress.run_status(run, 99)
    assert (row["state"], row["done"], row["planned"]) == ("running", 4, 10)
    assert row["best_valid_ppl"] == 240.0
    assert row["seconds_per_epoch"] == 11.5           # median of 10, 11, 12, 13
    assert row["eta_seconds"] == 6 * 11.5
    assert row["run"] == "ptb/softmax/1"


def test_median_uses_the_last_window_and_skips_non_finite_ppl(tmp_path):
    run = tmp_path / "r"
    seconds = [100.0] * 5 + [2.0] * progress.WINDOW
    _write(run, 40, seconds, [float("nan")] + [50.0] * (len(seconds) - 1))
    row = progress.run_status(run, 40)
    assert row["seconds_per_epoch"] == 2.0 and row["best_valid_ppl"] == 50.0
    assert progress.run_status(tmp_path / "absent", 7)["state"] == "not started"


def test_trainer_records_every_epoch_and_cli_prints_the_study(ptb_corpus, tmp_path, capsys):
    settings = tiny_settings(seed=2, epochs=3)
    run_dir = tmp_path / "results" / "tiny" / "runs" / "ptb" / "softmax" / "2"
    metrics = train(settings, ptb_corpus, run_dir, log=lambda m: None)
    body = json.loads(progress.progress_path(run_dir).read_text())
    assert body["planned"] == 3 and [r["epoch"] for r in body["epochs"]] == [1, 2, 3]
    assert [r["valid_ppl"] for r in body["epochs"]] == [r["valid_ppl"] for r in metrics["log"]]
    assert all(r["seconds"] > 0 for r in body["epochs"])
    done = progress.run_status(run_dir, 3)
    assert done["state"] == "done" and done["eta_seconds"] == 0.0
    assert math.isclose(done["best_valid_ppl"], min(r["valid_ppl"] for r in metrics["log"]))
    config = {"study": "tiny", "seeds": [2, 5], "heads": [{"name": "softmax"}],
              "train": {"epochs": 3}, "data": {"corpora": ["ptb"]}}
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(config))
    assert progress_verb.main(["--configfile", str(tmp_path / "tiny.yaml"), "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ptb/softmax/2 done" in out and "ptb/softmax/5 not started" in out
    assert "1/2 runs finished; 3/6 epochs" in out
