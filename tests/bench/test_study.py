"""Tests for audit.bench.study: the CPU-share table of a study, from hand-made run folders."""

import json
import math
import sys

import pytest

from audit.bench import study
from audit.errors import AuditError

BENCH_HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _run(root, head, seed, steps, train_cpu, evaluate_cpu, field="train_cpu_seconds"):
    folder = root / "runs" / "ptb" / head / str(seed)
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({field: steps, "wall_seconds": steps + 100.0}))
    for name, cpu in (("train", train_cpu), ("evaluate", evaluate_cpu)):
        if cpu is not None:
            (folder / f"benchmark_{name}.tsv").write_text(BENCH_HEADER + f"1.0\t0:00:01\t1\t1\t1\t1\t0\t0\t50\t{cpu}\n")


def test_parts_and_shares_are_summed_by_hand(tmp_path):
    _run(tmp_path, "softmax", 1, 30.0, 34.0, 8.0)
    _run(tmp_path, "mos", 1, 50.0, 55.0, 10.0)
    parts = study.run_parts(tmp_path)
    assert (parts["runs"], parts["training"], parts["train_jobs"], parts["evaluate_jobs"]) == (2, 80.0, 89.0, 18.0)
    table = study.share_table(parts, 125.0)
    # training 80, rest of train jobs 9, evaluate 18, everything else 125 - 89 - 18 = 18
    assert list(table["cpu_seconds"]) == [80.0, 9.0, 18.0, 18.0, 125.0]
    assert list(table["share"]) == ["64.0%", "7.2%", "14.4%", "14.4%", "100.0%"]


def test_runs_without_the_cpu_field_fall_back_to_wall_seconds_and_say_so(tmp_path):
    _run(tmp_path, "softmax", 1, 30.0, 134.0, None, field="other")
    parts = study.run_parts(tmp_path)
    assert parts["training"] == 130.0 and parts["training_source"].startswith("wall_seconds")
    assert parts["missing"] == 1
    _run(tmp_path, "mos", 1, 30.0, 90.0, None, field="other")   # wall 130 s of steps, 90 CPU-s of job
    assert study.run_parts(tmp_path)["training"] == 130.0 + 90.0


def test_a_run_without_its_train_benchmark_is_left_to_everything_else(tmp_path):
    _run(tmp_path, "softmax", 1, 30.0, 34.0, 8.0)
    _run(tmp_path, "mos", 1, 50.0, None, 10.0)      # its train job's figure is missing
    parts = study.run_parts(tmp_path)
    assert (parts["training"], parts["train_jobs"], parts["missing"]) == (30.0, 34.0, 1)
    assert list(study.share_table(parts, 100.0)["cpu_seconds"])[1] == 4.0   # never negative


def test_the_jobs_own_cpu_is_preferred_to_the_sampled_benchmark_files(tmp_path):
    _run(tmp_path, "softmax", 1, 30.0, 20.0, 8.0)      # the train benchmark missed its last seconds
    folder = tmp_path / "runs" / "ptb" / "softmax" / "1"
    metrics = json.loads((folder / "metrics.json").read_text())
    (folder / "metrics.json").write_text(json.dumps({**metrics, "job_cpu_seconds": 36.5}))
    (folder / "eval.json").write_text(json.dumps({"job_cpu_seconds": 9.5}))
    parts = study.run_parts(tmp_path)
    assert (parts["train_jobs"], parts["evaluate_jobs"], parts["sampled"]) == (36.5, 9.5, set())
    assert list(study.share_table(parts, 100.0)["cpu_seconds"]) == [30.0, 6.5, 9.5, 54.0, 100.0]


def test_a_sampled_train_job_below_its_steps_gives_no_negative_rest(tmp_path, capsys):
    _run(tmp_path, "softmax", 1, 30.0, 20.0, 8.0)      # benchmark files only, undercounting
    parts = study.run_parts(tmp_path)
    assert parts["sampled"] == {"train", "evaluate"}
    table = study.share_table(parts, 100.0)
    assert math.isnan(table["cpu_seconds"][1]) and table["share"][1] == "n/a"
    assert list(table["cpu_seconds"])[2:] == [8.0, 72.0, 100.0]
    assert study.main(["--results", str(tmp_path), "--total-cpu", "100"]) == 0
    assert "lower bounds" in capsys.readouterr().out


def test_command_mode_counts_the_cpu_of_the_children(tmp_path, capsys):
    _run(tmp_path, "softmax", 1, 0.1, 0.2, 0.1)
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
    assert study.main(["--results", str(tmp_path), "--", sys.executable, "-c", burn]) == 0
    out = capsys.readouterr().out
    total = float(out.split("CPU ")[1].split(" s")[0])
    assert total >= 0.5          # the child's busy loop alone
    assert "training share" in out


def test_bad_input_is_one_line(tmp_path):
    with pytest.raises(AuditError, match="no run folder with a metrics.json"):
        study.run_parts(tmp_path)
    with pytest.raises(AuditError, match="either --total-cpu S or a command"):
        study.main(["--results", str(tmp_path)])
