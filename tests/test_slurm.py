"""The smoke study on a real one-node SLURM cluster, through Snakemake's SLURM executor.

One module-scoped run (618 s on an idle two-core machine when it still ran its own local study
too, issue 48; now the two SLURM invocations and a copy; plus the first apt-get install):

1. the local reference: the session's finished smoke study (tests/conftest.py's ``smoke_study``,
   run once without SLURM and shared with tests/test_pipeline.py; issue 48), copied, its
   ``runs.csv`` kept as the reference and its ``results/smoke``, ``reports/smoke`` and
   ``logs/smoke`` removed, so the copy keeps the prepared data and the cluster run starts at
   training. This test used to run the same study locally to ``runs.csv`` itself; the shared
   study is the same six runs of the same settings (``train.oom_retries``, set to 0 below, is
   study-wide, outside every run's settings), still trained by separate processes without SLURM,
   so the comparisons below still catch a cluster run or a resumed run that differs from an
   uninterrupted local one;
2. the whole study through ``--workflow-profile profiles/slurm`` (squeue status checks: this
   cluster has no accounting) with one training job cancelled with ``scancel`` right after its
   first epoch checkpoint; that invocation fails for that run only (keep-going);
3. the same command again: the cancelled run is resubmitted, resumes from its checkpoint, and
   the audit completes.

Skips only where SLURM cannot be installed (or a real SLURM configuration is in the way), saying
why. The daemons are stopped by pid in the fixture's finalizer, which fails if any process is left.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

import helpers
from support import slurm
from support import smoke

REPO = Path(__file__).resolve().parent.parent


def timing_columns(table: pd.DataFrame) -> list[str]:
    """The columns measured per run (wall clock, throughput, each argmax tier's CPU seconds), not
    computed from the data: by name, so a new ``*_seconds*`` column is never compared bitwise."""
    return [c for c in table.columns if "seconds" in c or c == "tokens_per_second"]


# test-only speed-ups on top of the profile: check job states every 2 s instead of 40 s, keep the
# job logs of successful jobs (evidence), and leave a cancelled job failed instead of retrying it,
# so that the *next invocation* has to resume it
SLURM_ARGS = ["--workflow-profile", "profiles/slurm", "--configfile", "configs/smoke.yaml",
              "--slurm-init-seconds-before-status-checks", "2", "--slurm-keep-successful-logs", "--retries", "0"]



def copy_workflow(dest: Path) -> Path:
    helpers.copy_workflow(dest)
    return no_job_retries(dest)


def no_job_retries(dest: Path) -> Path:
    # the train and evaluate rules' own `retries:` (train.oom_retries, for out-of-GPU-memory
    # reruns) take precedence over --retries 0: set it to 0 so the cancelled job stays failed.
    # A study-wide key, outside every run's settings: the runs are the same as with the default.
    smoke = dest / "configs" / "smoke.yaml"
    config = yaml.safe_load(smoke.read_text())
    config["train"]["oom_retries"] = 0
    smoke.write_text(yaml.safe_dump(config, sort_keys=False))
    return dest


def snakemake_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", *args]


def env(mirror: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}, "AUDIT_DATA_MIRROR": str(mirror)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    start = time.monotonic()
    reason = slurm.install() or slurm.foreign_conf()
    print(f"SLURM installed or found in {time.monotonic() - start:.0f} s")
    if reason:
        print(f"skipping the SLURM test: {reason}")
        pytest.skip(reason)
    node = slurm.Cluster(tmp_path_factory.mktemp("slurm"))
    try:
        node.start()
        yield node
    finally:
        left = node.stop()
        assert all(p.poll() is not None for p in node.procs.values()), "a SLURM daemon is still running"
        assert not left, f"SLURM processes left behind (killed now): {left}"


def train_logs(workdir: Path) -> dict[tuple[str, str], Path]:
    return {(p.parent.name, p.stem): p for p in (workdir / "logs" / "smoke" / "train" / "ptb").glob("*/*.log")}


def cancel_after_first_epoch(cluster, workdir: Path, proc: subprocess.Popen, timeout: float = 900):
    """Wait for a training job to log epoch 1 (its checkpoint is written just before), then
    scancel it while epoch 2 runs. Returns (head, seed, SLURM job id)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        for (head, seed), path in train_logs(workdir).items():
            text = path.read_text()
            if re.search(r"^epoch\s+1 \|", text, re.M) and not re.search(r"^epoch\s+2 \|", text, re.M):
                comment = f"rule_train_wildcards_ptb_{head}_{seed}"
                running = [j["JobId"] for j in cluster.jobs()
                           if j.get("Comment") == comment and j.get("JobState") == "RUNNING"]
                assert len(running) == 1, (comment, cluster.jobs())
                assert (workdir / "results/smoke/runs/ptb" / head / seed / "work" / "last.pt").is_file()
                cluster.run("scancel", running[0])
                return head, seed, running[0]
        time.sleep(0.2)
    pytest.fail(f"no training job reached epoch 1 while running (snakemake rc {proc.poll()})")


@pytest.fixture(scope="module")
def study(cluster, smoke_study, tmp_path_factory, mirror):
    timings = {}

    start = time.monotonic()
    # the local reference run: the session's smoke study (its own seconds are not counted here)
    workdir = no_job_retries(smoke.copy(smoke_study, tmp_path_factory.mktemp("slurm-smoke")))
    timings["copy of the local smoke study"] = time.monotonic() - start
    reference = workdir.parent / "local-runs.csv"
    shutil.copy(workdir / "reports/smoke/runs.csv", reference)
    for sub in ("results/smoke", "reports/smoke", "logs/smoke"):  # keep results/data: shared by studies
        shutil.rmtree(workdir / sub)

    start = time.monotonic()
    with open(workdir.parent / "slurm-1.out", "w") as out:
        first = subprocess.Popen(snakemake_cmd(*SLURM_ARGS), cwd=workdir, env=env(mirror), stdout=out,
                                 stderr=subprocess.STDOUT, text=True)
        try:
            cancelled = cancel_after_first_epoch(cluster, workdir, first)
            first.wait(timeout=1800)
        finally:
            if first.poll() is None:
                first.terminate()
                first.wait(timeout=60)
    timings["SLURM run with one job cancelled"] = time.monotonic() - start
    first_log = (workdir.parent / "slurm-1.out").read_text()

    start = time.monotonic()
    second = subprocess.run(snakemake_cmd(*SLURM_ARGS), cwd=workdir, env=env(mirror), capture_output=True,
                            text=True, timeout=1800)
    timings["SLURM rerun"] = time.monotonic() - start
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:] + cluster.logs()
    print("SLURM test timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    return {"workdir": workdir, "reference": reference, "cancelled": cancelled, "first_rc": first.returncode,
            "first_log": first_log, "second_log": second.stdout + second.stderr, "timings": timings}


def runs() -> list[tuple[str, int]]:
    config = yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text())
    return [(h["name"], s) for h in config["heads"] for s in config["seeds"]]


def tres_mem_mb(tres: str) -> float:
    """The mem= entry of scontrol's TRES field (e.g. ``mem=1.50G``) in MB (SLURM's M = MiB)."""
    value = re.search(r"(?:^|,)mem=([0-9.]+)([MGT])", tres)
    return float(value.group(1)) * {"M": 1, "G": 1024, "T": 1024**2}[value.group(2)]


@pytest.mark.slow
def test_every_train_and_evaluate_job_ran_as_a_slurm_job_with_the_computed_resources(cluster, study):
    from audit.plan import resources
    from audit.config import check_study, run_settings

    config = check_study(yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text()), "configs/smoke.yaml")
    jobs = cluster.jobs()
    completed = [j for j in jobs if j.get("JobState") == "COMPLETED"]
    for rule, minutes, mem in (("train", resources.train_minutes, resources.train_mem_mb),
                               ("evaluate", resources.evaluate_minutes, resources.evaluate_mem_mb)):
        for head, seed in runs():
            comment = f"rule_{rule}_wildcards_ptb_{head}_{seed}"
            mine = [j for j in completed if j.get("Comment") == comment]
            assert len(mine) == 1, (comment, [j.get("Comment") for j in jobs])
            job = mine[0]
            assert job["ExitCode"] == "0:0" and job["NodeList"] == cluster.host
            assert job["NumCPUs"] == "1"  # threads: 1 in the smoke study
            settings = run_settings(config, "ptb", head, seed)
            assert job["TimeLimit"] == f"{minutes(settings) // 60:02d}:{minutes(settings) % 60:02d}:00"
            assert tres_mem_mb(job["TRES"]) == mem(settings), job["TRES"]
            assert "gres/gpu" not in job["TRES"]  # device auto on a host without a GPU: CPUs only
            log = Path(job["StdOut"])
            assert log.is_file() and log.is_relative_to(study["workdir"] / ".snakemake" / "slurm_logs")
            assert f"rule {rule}:" in log.read_text()
            # the estimate covers what the job used (Snakemake's benchmark of it: wall s, peak RSS MB)
            bench = pd.read_csv(study["workdir"] / f"results/smoke/runs/ptb/{head}/{seed}/benchmark_{rule}.tsv", sep="\t")
            assert bench["max_rss"].iloc[0] < mem(settings) and bench["s"].iloc[0] < 60 * minutes(settings)
    # nothing of the study ran outside SLURM: every job Snakemake reported finished was submitted
    submitted = set(re.findall(r"submitted with SLURM jobid (\d+)", study["first_log"] + study["second_log"]))
    assert {j["JobId"] for j in jobs} >= submitted and len(submitted) >= 12


@pytest.mark.slow
def test_runs_table_equals_the_local_run_on_every_metric(study):
    local = pd.read_csv(study["reference"], dtype=str, keep_default_na=False)
    cluster = pd.read_csv(study["workdir"] / "reports/smoke/runs.csv", dtype=str, keep_default_na=False)
    assert len(cluster) == len(runs())
    key = ["corpus", "head", "seed"]
    local, cluster = (t.drop(columns=timing_columns(t)).sort_values(key).reset_index(drop=True) for t in (local, cluster))
    assert list(local.columns) == list(cluster.columns)
    # as text: bitwise equality of every metric, as written
    pd.testing.assert_frame_equal(local, cluster)
    assert (cluster["status"] == "ok").all()
    assert (study["workdir"] / "reports/smoke/audit.html").is_file()


@pytest.mark.slow
def test_a_cancelled_training_job_resumes_from_its_checkpoint_on_the_next_invocation(cluster, study):
    head, seed, job_id = study["cancelled"]
    states = {j["JobId"]: j["JobState"] for j in cluster.jobs()}
    assert states[job_id] == "CANCELLED"
    assert study["first_rc"] != 0 and f"SLURM-job '{job_id}' failed" in study["first_log"]
    log = (study["workdir"] / "logs/smoke/train/ptb" / head / f"{seed}.log").read_text()
    assert re.search(r"^resumed .*last\.pt after epoch 1\b", log, re.M), log
    assert re.search(r"^epoch\s+2 \|", log, re.M) and not re.search(r"^epoch\s+1 \|", log, re.M)
    others = [p for (h, s), p in train_logs(study["workdir"]).items() if (h, s) != (head, seed)]
    assert len(others) == len(runs()) - 1 and not any("resumed" in p.read_text() for p in others)
    # the resumed run's final metrics are those of the uninterrupted local run
    local = pd.read_csv(study["reference"], dtype=str, keep_default_na=False)
    resumed = pd.read_csv(study["workdir"] / "reports/smoke/runs.csv", dtype=str, keep_default_na=False)
    pick = lambda t: t[(t["head"] == head) & (t["seed"] == seed)].drop(columns=timing_columns(t)).reset_index(drop=True)
    pd.testing.assert_frame_equal(pick(local), pick(resumed))
    assert pick(resumed)["epochs_run"].tolist() == ["2"]


def test_the_profile_plans_gpu_jobs_on_a_login_node_without_slurm_or_gpu(tmp_path, mirror):
    """A dry run (no cluster needed): partition and account from the variables (a numeric account
    stays a string), one GPU per training/evaluation job with `device: cuda` although this host
    has none, and the computed runtime and memory; CPU-only jobs get the profile's defaults."""
    from audit.plan import resources
    from audit.config import check_study, run_settings

    workdir = copy_workflow(tmp_path)
    config = yaml.safe_load((workdir / "configs/smoke.yaml").read_text())
    config["train"]["device"] = "cuda"
    (workdir / "configs/smoke-cuda.yaml").write_text(yaml.safe_dump(config))
    plan = subprocess.run(snakemake_cmd("-n", "--workflow-profile", "profiles/slurm", "--configfile",
                                        "configs/smoke-cuda.yaml"), cwd=workdir, capture_output=True, text=True,
                          env={**env(mirror), "AUDIT_SLURM_PARTITION": "gpu", "AUDIT_SLURM_ACCOUNT": "123456",
                               "CUDA_VISIBLE_DEVICES": ""}, timeout=600)
    assert plan.returncode == 0, plan.stderr[-3000:]
    blocks = re.findall(r"^rule (\w+):\n(.*?)(?=^\S|\Z)", plan.stdout, re.M | re.S)
    checked = set()
    settings = run_settings(check_study(config, "smoke-cuda"), "ptb", "softmax", 1)
    for rule, body in blocks:
        found = re.search(r"resources: (.*)", body)
        if not found:  # `all`
            continue
        res = dict(item.split("=", 1) for item in found.group(1).split(", "))
        assert res["slurm_partition"] == "gpu" and res["slurm_account"] == "123456", res
        if rule in ("train", "evaluate"):
            minutes = resources.train_minutes if rule == "train" else resources.evaluate_minutes
            mem = resources.train_mem_mb if rule == "train" else resources.evaluate_mem_mb
            assert res["gpu"] == "1" and int(res["runtime"]) == minutes(settings) and int(res["mem_mb"]) == mem(settings)
        else:
            assert "gpu" not in res or res["gpu"] == "0", (rule, res)
            assert res["runtime"] == "30" and res["mem_mb"] == "4000", (rule, res)
        checked.add(rule)
    assert {"train", "evaluate", "runs_table", "report"} <= checked, checked
