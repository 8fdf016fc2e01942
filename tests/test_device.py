"""GPU planning and assignment (audit.device), checked on the CPU against stated device lists.

The assignment only touches lock files, so many concurrent processes can claim "devices" on a
machine without any GPU; the invariants: no device holds more than runs_per_gpu processes,
every process takes the least-loaded device, and a killed holder frees its slot.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audit import device
from audit.errors import AuditError

REPO = Path(__file__).resolve().parent.parent

# One worker: take a slot on the listed devices, report it, hold it for `hold` seconds.
WORKER = """
import sys, time
from audit.device import acquire_slot
lock_dir, devices, runs, hold, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
slot = acquire_slot([int(d) for d in devices.split(",")], runs, lock_dir, poll=0.02)
with open(log, "a") as out:
    out.write(f"take {slot.device} {time.time()!r}\\n"); out.flush()
    time.sleep(hold)
    out.write(f"drop {slot.device} {time.time()!r}\\n")
slot.release()
"""


def spawn(tmp_path, devices, runs, hold, log):
    return subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path / "locks"), devices, str(runs), str(hold),
                             str(log)], cwd=REPO)


def test_job_gpus_decides_from_the_config_not_the_host(monkeypatch):
    device.local_gpu_count.cache_clear()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # this host has no GPU
    try:
        assert device.job_gpus("cuda") == 1   # a login node plans GPU jobs all the same
        assert device.job_gpus("auto") == 0
        assert device.job_gpus("cpu") == 0
    finally:
        device.local_gpu_count.cache_clear()


def test_visible_devices_parsing(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1,-1,2")
    assert device._visible_entries() == ["3", "1"]   # CUDA stops at the first invalid entry
    assert device.device_keys([0, 1]) == ["3", "1"]  # lock names: the physical GPUs
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert device._visible_entries() is None and device.device_keys([0, 2]) == ["0", "2"]


def test_pool_size_scales_gpus_by_runs_per_gpu():
    assert device.pool_size(1, 1) == 1
    assert device.pool_size(3, 4) == 12
    assert device.pool_size(2, "auto") == 2 * device.AUTO_MAX_RUNS_PER_GPU


def test_job_devices_from_environment(monkeypatch):
    monkeypatch.delenv("AUDIT_GPUS", raising=False)
    monkeypatch.setenv("AUDIT_GPU_COUNT", "2")
    assert device.job_devices(4) == [0, 1]    # --resources gpu=2 on a 4-GPU host: the first two
    monkeypatch.delenv("AUDIT_GPU_COUNT")
    assert device.job_devices(3) == [0, 1, 2]
    monkeypatch.setenv("AUDIT_GPUS", "2,0")
    assert device.job_devices(3) == [2, 0]
    monkeypatch.setenv("AUDIT_GPUS", "5")
    with pytest.raises(AuditError, match="AUDIT_GPUS='5': device 5"):
        device.job_devices(3)


def test_least_loaded_first_and_full_devices_skipped(tmp_path):
    held = [device.acquire_slot([0, 1, 2], 2, tmp_path) for _ in range(6)]
    # round robin over equal loads, lowest index first: 0, 1, 2, 0, 1, 2
    assert [s.device for s in held] == [0, 1, 2, 0, 1, 2]
    assert sorted((s.device, s.slot) for s in held) == [(d, k) for d in range(3) for k in range(2)]
    with pytest.raises(AuditError, match="stayed busy"):
        device.acquire_slot([0, 1, 2], 2, tmp_path, poll=0.01, timeout=0.05)
    held[4].release()  # device 1 drops to one run: the next job goes there
    again = device.acquire_slot([0, 1, 2], 2, tmp_path)
    assert (again.device, again.slot) == (1, held[4].slot)
    for slot in held + [again]:
        slot.release()


def test_runs_per_gpu_one_keeps_one_run_per_gpu(tmp_path):
    a, b = device.acquire_slot([0, 1], 1, tmp_path), device.acquire_slot([0, 1], 1, tmp_path)
    assert {a.device, b.device} == {0, 1}
    with pytest.raises(AuditError):
        device.acquire_slot([0, 1], 1, tmp_path, poll=0.01, timeout=0.05)
    a.release(), b.release()


def test_auto_joins_a_busy_device_only_with_room(tmp_path):
    memory = {"0": (29000.0, 20000.0), "1": (50000.0, 10000.0)}   # (free MB, largest process MB)
    first = device.acquire_slot([0, 1], "auto", tmp_path, free_memory=memory.get)
    second = device.acquire_slot([0, 1], "auto", tmp_path, free_memory=memory.get)
    assert (first.device, second.device) == (0, 1)   # empty devices are always joined
    # device 0: 29000 < 1.5 x 20000 -> full; device 1: 50000 >= 15000 -> room
    assert device.acquire_slot([0, 1], "auto", tmp_path, free_memory=memory.get).device == 1
    memory["1"] = (1000.0, 10000.0)
    with pytest.raises(AuditError):
        device.acquire_slot([0, 1], "auto", tmp_path, free_memory=memory.get, poll=0.01, timeout=0.05)


def test_many_processes_never_oversubscribe(tmp_path):
    """12 processes on 3 devices x 2 slots: never more than 2 at once on a device, all finish."""
    log = tmp_path / "events.log"
    procs = [spawn(tmp_path, "0,1,2", 2, 0.3, log) for _ in range(12)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    events = sorted((float(t), kind, int(d)) for kind, d, t in (line.split() for line in log.read_text().splitlines()))
    assert sum(kind == "take" for _, kind, _ in events) == 12
    running = {0: 0, 1: 0, 2: 0}
    peak = dict(running)
    for _, kind, d in events:   # the log's take follows the lock and its drop precedes the unlock
        running[d] += 1 if kind == "take" else -1
        peak[d] = max(peak[d], running[d])
        assert running[d] <= 2
    assert all(p >= 1 for p in peak.values())  # every device was used


def test_concurrent_holders_spread_evenly_and_crash_frees_the_slot(tmp_path):
    log = tmp_path / "events.log"
    procs = [spawn(tmp_path, "0,1,2", 4, 60, log) for _ in range(6)]
    deadline = time.time() + 60
    while (not log.exists() or len(log.read_text().splitlines()) < 6) and time.time() < deadline:
        time.sleep(0.05)
    taken = sorted(int(line.split()[1]) for line in log.read_text().splitlines())
    assert taken == [0, 0, 1, 1, 2, 2]   # least-loaded first: 2 per device, not 4 + 2 + 0
    victim = procs[0]
    os.kill(victim.pid, signal.SIGKILL)  # no cleanup runs: the kernel drops the flock
    victim.wait(timeout=30)
    busy = device.device_loads(["0", "1", "2"], 4, tmp_path / "locks")
    assert sum(len(v) for v in busy.values()) == 5
    for proc in procs[1:]:
        proc.kill()
        proc.wait(timeout=30)
    assert device.device_loads(["0", "1", "2"], 4, tmp_path / "locks") == {"0": [], "1": [], "2": []}


# ----- the plan: snakemake -n on this CPU-only host ------------------------------------------------
def _dry_run(tmp_path, mirror, device_setting, *extra):
    import yaml

    from test_pipeline import copy_workflow

    workdir = copy_workflow(tmp_path)
    config = yaml.safe_load((workdir / "configs" / "smoke.yaml").read_text())
    config["train"].update(device=device_setting, runs_per_gpu=3)
    (workdir / "configs" / "plan.yaml").write_text(yaml.safe_dump(config))
    # torch on the path raises on import: planning must never ask torch where it runs
    poison = tmp_path / "poison" / "torch"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('torch imported while planning')\n")
    # the poison first, then the caller's path (so the package under test is the one planning)
    path = [str(poison.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "AUDIT_DATA_MIRROR": str(mirror), "PYTHONPATH": os.pathsep.join(path),
           "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--configfile",
                           "configs/plan.yaml", *extra], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _job_resources(output: str) -> dict[str, list[str]]:
    """rule name -> the resources line of each of its planned jobs."""
    jobs = {}
    for block in output.split("\nrule ")[1:]:
        name = block.split(":", 1)[0].strip()
        line = next((ln for ln in block.splitlines() if ln.strip().startswith("resources:")), "")
        jobs.setdefault(name, []).append(line)
    return jobs


def test_cuda_study_plans_gpu_jobs_on_a_host_without_cuda(tmp_path, mirror):
    output = _dry_run(tmp_path, mirror, "cuda", "--resources", "gpu=2")
    jobs = _job_resources(output)
    assert len(jobs["train"]) == len(jobs["evaluate"]) == 6
    assert all("gpu=1" in line for line in jobs["train"] + jobs["evaluate"])
    assert not any("gpu=1" in line for line in jobs["stats_comparisons"] + jobs["runs_table"])
    assert "GPU pool: gpu=2 GPU(s) x 3 run(s) per GPU = 6 concurrent GPU jobs" in output


def test_auto_on_a_host_without_gpus_plans_cpu_jobs(tmp_path, mirror):
    jobs = _job_resources(_dry_run(tmp_path, mirror, "auto"))
    assert len(jobs["train"]) == 6 and all("gpu=0" in line for line in jobs["train"] + jobs["evaluate"])


def test_runs_per_gpu_is_study_wide_and_outside_run_settings():
    from audit.config import check_study, run_settings

    base = {"study": "s", "seeds": [1], "heads": [{"name": "softmax"}]}
    config = check_study({**base, "train": {"runs_per_gpu": "auto"}})
    assert config["train"]["runs_per_gpu"] == "auto"
    assert check_study(base)["train"]["runs_per_gpu"] == 1      # the default: the H200's best N
    assert "runs_per_gpu" not in run_settings(config, "ptb", "softmax", 1)["train"]   # no rerun when it changes
    with pytest.raises(AuditError, match=r"heads\[0\]\.train\.runs_per_gpu: a study-wide setting"):
        check_study({**base, "heads": [{"name": "softmax", "train": {"runs_per_gpu": 2}}]})
    with pytest.raises(AuditError, match="runs_per_gpu"):
        check_study({**base, "train": {"runs_per_gpu": 0}})


def test_inside_a_slurm_job_the_scheduler_assigns_the_gpu(monkeypatch):
    """SLURM jobs see only their own GPU(s) as device 0: no per-host slot locks there, unless a
    lock folder is set explicitly (one whole-node allocation running several runs per GPU)."""
    monkeypatch.delenv("AUDIT_GPU_LOCK_DIR", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert not device.scheduler_assigned()
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    assert device.scheduler_assigned()
    monkeypatch.setenv("AUDIT_GPU_LOCK_DIR", "/tmp/node-locks")
    assert not device.scheduler_assigned()


def test_a_slurm_allocation_with_several_gpus_spreads_runs_over_them(monkeypatch, tmp_path):
    """A local Snakemake inside `salloc --gpus=4` (SLURM_JOB_ID inherited by every job): pinning
    every run to cuda:0 would put all of them on one GPU and leave three idle."""
    monkeypatch.delenv("AUDIT_GPU_LOCK_DIR", raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    assert device.scheduler_assigned(1)          # the executor's one-GPU job: SLURM's device 0
    assert not device.scheduler_assigned(4)      # an allocation of 4 GPUs: the slot locks spread runs
    assert device.default_lock_dir().name.endswith("-slurm4242")   # per allocation: keys restart at 0
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    held = [device.acquire_slot([0, 1, 2, 3], 2) for _ in range(4)]
    assert sorted(s.device for s in held) == [0, 1, 2, 3]
    for slot in held:
        slot.release()


def test_nvidia_smi_free_memory_reads_N_A_as_unknown(monkeypatch):
    """nvidia-smi prints "[N/A]" for free memory on MIG slices: unknown, not a crash (issue 22)."""
    from types import SimpleNamespace

    from audit import device

    answers = {"--query-gpu=index,uuid,memory.free": "0, GPU-abc, [N/A]\n1, GPU-def, 1234\n",
               "--query-compute-apps=gpu_uuid,used_memory": "GPU-def, 500\n"}
    monkeypatch.setattr(device.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(device.subprocess, "run",
                        lambda cmd, **kw: SimpleNamespace(stdout=answers[cmd[1]]))
    assert device.nvidia_smi_free_memory("0") is None
    assert device.nvidia_smi_free_memory("GPU-def") == (1234.0, 500.0)


def test_a_retry_holds_every_slot_of_one_gpu_locally_but_not_under_a_cluster():
    assert device.job_gpu_slots("cuda", 4, attempt=1) == 1
    assert device.job_gpu_slots("cuda", 4, attempt=2) == 4
    assert device.job_gpu_slots("cuda", "auto", attempt=3) == device.AUTO_MAX_RUNS_PER_GPU
    assert device.job_gpu_slots("cuda", 4, attempt=2, local=False) == 1  # SLURM: more would ask for 4 GPUs
    assert device.job_gpu_slots("cpu", 4, attempt=2) == 0


def test_a_whole_gpu_request_takes_an_empty_device_and_keeps_others_off_it(tmp_path):
    shared = device.acquire_slot([0, 1], 3, tmp_path)  # device 0, one of its three slots
    whole = device.acquire_slot([0, 1], 3, tmp_path, count=3)
    assert (shared.device, whole.device, len(whole.more)) == (0, 1, 2)
    assert device.acquire_slot([0, 1], 3, tmp_path).device == 0  # device 1 is full
    with pytest.raises(AuditError, match="stayed busy"):  # device 0 has free slots, but not three
        device.acquire_slot([0, 1], 3, tmp_path, count=3, poll=0.01, timeout=0.05)
    whole.release()
    assert device.acquire_slot([0, 1], 3, tmp_path).device == 1  # all three of its locks were dropped
