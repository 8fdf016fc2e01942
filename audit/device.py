"""Device choice and GPU assignment shared by training, evaluation and the synthetic fits.

``auto`` means CUDA when this process sees a GPU, else the CPU; ``cuda`` insists on a GPU and
fails in one line without one, so a study meant for GPUs never silently trains on a CPU.

Two halves, so that the plan never depends on where Snakemake runs:

- planning (torch-free, imported by rules/*.smk at parse time): ``job_gpus`` says whether a
  job requests one GPU slot from the config alone (``cuda``: always; ``auto``: when this host
  has a GPU, asked of ``nvidia-smi -L``, not of torch); ``pool_size`` scales Snakemake's
  ``--resources gpu=G`` to ``G x runs_per_gpu`` slots.
- assignment (in the job): Snakemake hands out resource *counts*, not device ids (snakemake
  issue #281), so a job that resolves to CUDA takes a free (device, slot) itself with an
  exclusive ``fcntl.flock`` on ``<lock dir>/gpu-<device>.slot-<k>.lock``, on the least-loaded
  device, decided under one global lock so two jobs never race for the same device. The lock
  is held for the life of the process; the kernel drops it when the process exits, crashed or
  not, so a killed job never leaves a device marked busy.

Environment (set by rules/common.smk in the Snakemake process; jobs inherit it):
``AUDIT_GPUS`` the devices to use, e.g. ``0,1,2`` (indices of the visible devices; default
the first ``AUDIT_GPU_COUNT`` visible ones, all when unset); ``AUDIT_RUNS_PER_GPU`` an integer
or ``auto``; ``AUDIT_GPU_LOCK_DIR`` the lock folder (default: per user under the system temp
folder, which is per host, as the GPUs are).
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from audit.errors import AuditError

# `runs_per_gpu: auto`: the Snakemake pool allows this many jobs per GPU; at run time a job
# joins a busy GPU only while its free memory covers AUTO_HEADROOM x the largest process on it.
AUTO_MAX_RUNS_PER_GPU = 8
AUTO_MIN_FREE_MB = 2048
AUTO_HEADROOM = 1.5

# Steps between two host reads of a loop's divergence check on a GPU (training, synthetic fits):
# a read blocks until the device has caught up, so a per-step read serialises host and device.
SYNC_EVERY = 50


# ----- planning (torch-free) -------------------------------------------------------------------
def _visible_entries() -> list[str] | None:
    """Entries of CUDA_VISIBLE_DEVICES, [] when it hides every GPU, None when unset."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    entries = [e.strip() for e in value.split(",") if e.strip()]
    # CUDA stops at the first invalid entry; "-1" is the usual way to hide every GPU
    valid = []
    for entry in entries:
        if entry.startswith("-"):
            break
        valid.append(entry)
    return valid


@functools.lru_cache(maxsize=1)
def local_gpu_count() -> int:
    """GPUs this host would give a job, without importing torch (``nvidia-smi -L``)."""
    visible = _visible_entries()
    if visible == []:
        return 0
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return 0
    count = sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU "))
    if listed.returncode != 0:
        return 0
    return count if visible is None else min(count, len(visible))


def job_gpus(device: str) -> int:
    """GPU slots a job with this ``device`` setting requests: 1 for ``cuda`` (even on a
    planning host without CUDA: a login node, a dry run), for ``auto`` 1 when this host has a
    GPU, 0 for ``cpu``."""
    if device == "cuda":
        return 1
    if device == "auto":
        return 1 if local_gpu_count() > 0 else 0
    return 0


def pool_runs_per_gpu(runs_per_gpu: int | str) -> int:
    """Jobs per GPU the Snakemake pool allows (``auto``: the cap, memory decides the rest)."""
    return AUTO_MAX_RUNS_PER_GPU if runs_per_gpu == "auto" else int(runs_per_gpu)


def job_gpu_slots(device: str, runs_per_gpu: int | str, attempt: int = 1, local: bool = True) -> int:
    """GPU slots a training or evaluation job holds: ``job_gpus`` on its first attempt; on a
    retry (Snakemake ``retries:`` after an out-of-memory exit) every slot of one GPU, so the
    rerun has that GPU to itself. Under a cluster executor (``local`` False) a job already owns
    its GPU(s), and more slots would ask the scheduler for more GPUs: it stays ``job_gpus``."""
    gpus = job_gpus(device)
    if gpus == 0 or attempt <= 1 or not local:
        return gpus
    return pool_runs_per_gpu(runs_per_gpu)


def pool_size(gpus: int, runs_per_gpu: int | str) -> int:
    """Concurrent GPU jobs for ``--resources gpu=<gpus>``: each job holds one slot."""
    return int(gpus) * pool_runs_per_gpu(runs_per_gpu)


# ----- assignment (in the job) -----------------------------------------------------------------
def default_lock_dir() -> Path:
    # inside a SLURM allocation, one folder per job: two allocations of one user on a node may
    # both see their own GPUs renumbered from 0 (cgroup-constrained devices), so the keys collide
    job = os.environ.get("SLURM_JOB_ID")
    return Path(os.environ.get("AUDIT_GPU_LOCK_DIR") or
                Path(tempfile.gettempdir()) / (f"audit-gpu-locks-{os.getuid()}" + (f"-slurm{job}" if job else "")))


@dataclass
class Slot:
    """A held (device, slot); ``device`` is the index among the visible devices."""

    device: int
    slot: int
    key: str
    path: Path
    fd: int
    more: tuple[int, ...] = ()  # further slots of the same device (a retry holding the whole GPU)

    def release(self) -> None:
        for fd in (self.fd, *self.more):
            if fd >= 0:
                os.close(fd)  # closing the descriptor drops the flock
        self.fd, self.more = -1, ()


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _slot_path(lock_dir: Path, key: str, slot: int) -> Path:
    return lock_dir / f"gpu-{key.replace('/', '_')}.slot-{slot}.lock"


def device_loads(keys: list[str], slots: int, lock_dir: Path) -> dict[str, list[int]]:
    """Busy slot numbers per device key (a slot is busy while some process holds its lock)."""
    busy = {}
    for key in keys:
        busy[key] = []
        for k in range(slots):
            fd = _try_lock(_slot_path(lock_dir, key, k))
            if fd is None:
                busy[key].append(k)
            else:
                os.close(fd)
    return busy


def acquire_slot(devices: list[int], runs_per_gpu: int | str, lock_dir: str | os.PathLike | None = None,
                 keys: list[str] | None = None, free_memory: Callable[[str], tuple[float, float] | None] | None = None,
                 poll: float = 2.0, timeout: float | None = None, log=None, count: int = 1) -> Slot:
    """Take ``count`` free slots of one device, the least-loaded, waiting while none has room.

    Args:
        devices: device indices as the job's torch sees them (``cuda:<index>``).
        runs_per_gpu: slots per device, or ``auto`` (``AUTO_MAX_RUNS_PER_GPU`` slots; a busy
            device is joined only while ``free_memory`` says it has room).
        keys: one name per device for the lock files: the same physical GPU must get the same
            key in every process (default: the CUDA_VISIBLE_DEVICES entry, else the index).
        free_memory: key -> (free MB, largest process MB) or None when unknown; ``auto`` only.
        poll: seconds between tries while full; timeout: give up (AuditError) after this long.
        count: slots to hold on that one device (capped at the slots per device: a retry after
            running out of memory asks for all of them, so no other run shares its GPU).

    Ties go to the lowest device index, so runs fill devices in the order listed.
    """
    if not devices:
        raise AuditError("GPU assignment: no CUDA device to assign")
    lock_dir = Path(lock_dir) if lock_dir is not None else default_lock_dir()
    lock_dir.mkdir(parents=True, exist_ok=True)
    keys = keys or device_keys(devices)
    slots = pool_runs_per_gpu(runs_per_gpu)
    if slots < 1:
        raise AuditError(f"train.runs_per_gpu must be at least 1, got {runs_per_gpu!r}")
    count = max(1, min(int(count), slots))
    started, said = time.monotonic(), False
    while True:
        # one decision at a time: without it two jobs could both see device 0 as the emptiest
        with open(lock_dir / "assign.lock", "a") as guard:
            fcntl.flock(guard, fcntl.LOCK_EX)
            busy = device_loads(keys, slots, lock_dir)
            for i in sorted(range(len(devices)), key=lambda i: (len(busy[keys[i]]), i)):
                key = keys[i]
                if len(busy[key]) + count > slots or not _has_room(runs_per_gpu, busy[key], key, free_memory):
                    continue
                held = []  # (slot, path, fd)
                for k in range(slots):
                    if k in busy[key] or len(held) == count:
                        continue
                    path = _slot_path(lock_dir, key, k)
                    fd = _try_lock(path)
                    if fd is not None:
                        os.ftruncate(fd, 0)
                        os.write(fd, f"{os.getpid()}\n".encode())  # who holds it, for people reading the folder
                        held.append((k, path, fd))
                if len(held) == count:
                    (k, path, fd), rest = held[0], held[1:]
                    return Slot(devices[i], k, key, path, fd, tuple(f for _, _, f in rest))
                for _, _, fd in held:  # a slot taken meanwhile (outside the guard): try again later
                    os.close(fd)
        if timeout is not None and time.monotonic() - started > timeout:
            raise AuditError(f"GPU assignment: every slot of devices {keys} stayed busy for {timeout:.0f} s "
                             f"(lock folder {lock_dir})")
        if log is not None and not said:
            log(f"waiting for a free GPU slot ({slots} per device on {keys}; lock folder {lock_dir})")
            said = True
        time.sleep(poll)


def _has_room(runs_per_gpu, busy: list[int], key: str, free_memory) -> bool:
    if runs_per_gpu != "auto" or not busy or free_memory is None:
        return True
    reading = free_memory(key)
    if reading is None:  # memory unknown: keep to one run per device rather than guess
        return False
    free_mb, largest_mb = reading
    return free_mb >= max(AUTO_MIN_FREE_MB, AUTO_HEADROOM * largest_mb)


def device_keys(devices: list[int]) -> list[str]:
    """Lock names of visible device indices: the CUDA_VISIBLE_DEVICES entry (a physical index
    or UUID) when set, so jobs with different masks still agree on which GPU is which."""
    visible = _visible_entries()
    return [visible[i] if visible is not None and i < len(visible) else str(i) for i in devices]


def nvidia_smi_free_memory(key: str) -> tuple[float, float] | None:
    """(free MB, largest compute process MB) of the GPU whose index or UUID is ``key``."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        gpus = subprocess.run([smi, "--query-gpu=index,uuid,memory.free", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=30).stdout
        apps = subprocess.run([smi, "--query-compute-apps=gpu_uuid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in gpus.splitlines():
        index, uuid, free = (f.strip() for f in line.split(","))
        if key in (index, uuid):
            used = [float(f.split(",")[1]) for f in apps.splitlines()
                    if f.split(",")[0].strip() == uuid and f.split(",")[1].strip().replace(".", "").isdigit()]
            try:
                return float(free), max(used, default=0.0)
            except ValueError:  # "[N/A]" (MIG, some vGPUs) or "[Not Supported]": unknown, not a crash
                return None
    return None


def job_devices(visible_count: int) -> list[int]:
    """Device indices this job may use: AUDIT_GPUS, else the first AUDIT_GPU_COUNT visible."""
    listed = os.environ.get("AUDIT_GPUS")
    if listed:
        try:
            devices = [int(d) for d in listed.split(",") if d.strip()]
        except ValueError:
            raise AuditError(f"AUDIT_GPUS={listed!r} is not a comma-separated list of device indices") from None
        wrong = [d for d in devices if not 0 <= d < visible_count]
        if wrong:
            raise AuditError(f"AUDIT_GPUS={listed!r}: device {wrong[0]} is not among the {visible_count} visible")
        return devices
    count = os.environ.get("AUDIT_GPU_COUNT")
    n = visible_count if not count else min(int(count), visible_count)
    return list(range(n))


_HELD: Slot | None = None


def scheduler_assigned(visible_count: int = 1) -> bool:
    """True inside a SLURM job that sees one GPU (the executor's ``--gpus=1`` or a shard), where
    the scheduler, not our slot locks, assigns it.

    A SLURM job that sees several GPUs (one allocation running a local Snakemake with
    ``--resources gpu=G``) keeps the slot locks, or every run would pile onto its device 0 while
    the others idle; so does ``AUDIT_GPU_LOCK_DIR`` set explicitly.
    """
    return bool(os.environ.get("SLURM_JOB_ID")) and not os.environ.get("AUDIT_GPU_LOCK_DIR") and visible_count <= 1


def resolve_device(name: str):
    """The torch device for a ``train.device`` (or ``synthetic.device``) setting.

    CUDA resolves to ``cuda:<i>`` of a slot this process takes (once; later calls return the
    same device), so concurrent jobs spread over the GPUs.
    """
    global _HELD
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise AuditError("train.device is 'cuda' but no CUDA device is available")
        if scheduler_assigned(torch.cuda.device_count()):
            # SLURM gave this job its own GPU(s) (--gpus / gres): the visible device 0 is ours, and
            # a per-host lock named by visible index would collide with other jobs' own device 0
            print("GPU assignment: cuda:0 (assigned by SLURM)", file=sys.stderr, flush=True)
            torch.cuda.set_device(0)
            return torch.device("cuda", 0)
        if _HELD is None:
            runs = os.environ.get("AUDIT_RUNS_PER_GPU", "1")
            runs = runs if runs == "auto" else int(runs)
            # AUDIT_GPU_SLOTS: the job's Snakemake `gpu` resource (job_gpu_slots), all of a GPU's
            # slots on a retry after running out of memory
            count = int(os.environ.get("AUDIT_GPU_SLOTS") or 1)
            _HELD = acquire_slot(job_devices(torch.cuda.device_count()), runs, free_memory=nvidia_smi_free_memory,
                                 log=lambda msg: print(msg, file=sys.stderr, flush=True), count=count)
            print(f"GPU assignment: cuda:{_HELD.device} (device {_HELD.key}, slot {_HELD.slot}"
                  + (f", holding {1 + len(_HELD.more)} slots: the whole GPU" if _HELD.more else "") + ")",
                  file=sys.stderr, flush=True)
        torch.cuda.set_device(_HELD.device)
        return torch.device("cuda", _HELD.device)
    return torch.device(name)
