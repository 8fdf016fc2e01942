"""A real one-node SLURM cluster on this machine, for tests/test_slurm.py.

Debian's ``slurmctld``, ``slurmd`` and ``munge`` (installed by ``apt-install`` beside this file where
missing; CI runs as root), one node with the machine's real CPUs and memory (``slurmd -C``), ``select/cons_tres``,
no accounting (no slurmdbd: ``sacct`` fails, as on clusters without it). Every daemon runs in the
foreground as a child of the test, with its state, logs, munge key and socket under a temporary
folder and its ports picked free, and is stopped by pid.

The configuration goes to /etc/slurm/slurm.conf, SLURM's default path, because the executor's
job step drops every ``SLURM_*`` variable, SLURM_CONF included (snakemake-executor-plugin-slurm
issue #164), before it calls ``srun`` inside the job. A configuration found there that this
module did not write is left alone, and the test skips.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]
BINARIES = ["slurmctld", "slurmd", "munged", "sbatch", "squeue", "scontrol", "scancel", "sinfo", "srun"]
CONF = Path("/etc/slurm/slurm.conf")
MARKER = "# written by bottleneck-audit tests/support/slurm.py"
APT_INSTALL = Path(__file__).with_name("apt-install")
DAEMONS = ("slurmctld", "slurmscriptd", "slurmd", "slurmstepd", "munged")


def _which(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def install() -> str | None:
    """Install SLURM and munge where missing (tests/support/apt-install, which waits for the
    dpkg lock); None when ready, else one line saying what could not be installed and why."""
    if all(_which(b) for b in BINARIES):
        return None
    try:
        done = subprocess.run(["bash", str(APT_INSTALL), "--no-install-recommends", *PACKAGES],
                              capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        return f"could not install {' '.join(PACKAGES)}: {APT_INSTALL.name} did not finish in 1800 s"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return lines[-1] if lines else f"could not install {' '.join(PACKAGES)}: exit {done.returncode}"
    missing = [b for b in BINARIES if not _which(b)]
    return f"installed {PACKAGES} but still missing {missing}" if missing else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def daemon_pids() -> set[int]:
    """Pids of every SLURM or munge daemon process on this machine."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in DAEMONS:
                    pids.add(int(entry.name))
            except OSError:
                pass
    return pids


class Cluster:
    """One node, one partition ``audit``; ``start()`` then ``stop()`` (idempotent)."""

    def __init__(self, root: Path):
        self.root = root
        self.host = socket.gethostname().split(".")[0]
        self.procs: dict[str, subprocess.Popen] = {}
        self.before = daemon_pids()
        self.wrote_conf = False

    # ----- start -------------------------------------------------------------------------------
    def _spawn(self, name: str, cmd: list[str]) -> None:
        out = open(self.root / "log" / f"{name}.out", "w")
        self.procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)

    def _wait(self, what: str, ready, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if ready():
                return
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{dead} exited while waiting for {what}: {self.logs()}")
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}: {self.logs()}")

    def node_line(self) -> str:
        """The node as slurmd itself sees it: real CPUs, sockets, cores, memory."""
        out = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True, check=True).stdout
        fields = [f for f in out.splitlines()[0].split() if not f.startswith("UpTime")]
        return " ".join(fields) + " NodeAddr=127.0.0.1 State=UNKNOWN"

    def write_conf(self) -> str:
        r = self.root
        text = f"""{MARKER}
ClusterName=audittest
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/munge/munge.sock
StateSaveLocation={r}/ctld
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
# finished jobs stay visible to squeue/scontrol for an hour: the executor's squeue status checks
# and the test's evidence read them
MinJobAge=3600
DefMemPerCPU=1000
{self.node_line()}
PartitionName=audit Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
        CONF.parent.mkdir(parents=True, exist_ok=True)
        CONF.write_text(text)
        self.wrote_conf = True
        return text

    def start(self) -> None:
        for sub in ("munge", "ctld", "spool", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o755)  # munged wants its socket folder reachable by all
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o600)
        m = self.root / "munge"
        self._spawn("munged", [_which("munged"), "--foreground", "--force", f"--key-file={key}",
                               f"--socket={m}/munge.sock", f"--pid-file={m}/munged.pid",
                               f"--log-file={self.root}/log/munged.log", f"--seed-file={m}/munged.seed"])
        self._wait("the munge socket", lambda: (m / "munge.sock").exists())
        self.write_conf()
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(CONF)])
        self._spawn("slurmd", [_which("slurmd"), "-D", "-f", str(CONF), "-N", self.host])
        self._wait("the node to be idle", lambda: self.run("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.strip()
                   == "idle")

    # ----- use ---------------------------------------------------------------------------------
    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([_which(cmd[0]), *cmd[1:]], capture_output=True, text=True, check=check, timeout=60)

    def jobs(self) -> list[dict[str, str]]:
        """Every job slurmctld still holds (MinJobAge), as scontrol's key=value fields."""
        out = self.run("scontrol", "show", "job", "--oneliner").stdout
        jobs = []
        for line in out.splitlines():
            if line.startswith("JobId="):
                fields = {}
                for token in line.split():
                    key, _, value = token.partition("=")
                    fields[key] = value
                jobs.append(fields)
        return jobs

    def logs(self) -> str:
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            parts.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(parts)

    # ----- stop --------------------------------------------------------------------------------
    def stop(self) -> list[int]:
        """Cancel every job, stop the daemons by pid, remove the configuration; the pids of
        SLURM or munge processes still alive afterwards that were not there before (killed)."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            for job in self.jobs():
                if job.get("JobState") in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"):
                    self.run("scancel", job["JobId"], check=False)
            end = time.monotonic() + 60
            while time.monotonic() < end and any(
                    j.get("JobState") in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING") for j in self.jobs()):
                time.sleep(0.5)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self.wrote_conf and CONF.is_file() and CONF.read_text().startswith(MARKER):
            CONF.unlink()
            self.wrote_conf = False
        left = sorted(daemon_pids() - self.before)
        for pid in left:  # e.g. a slurmstepd orphaned by a crash: kill it, and report it
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return left


def foreign_conf() -> str | None:
    """Why the cluster cannot be started here: not root (slurmd and /etc/slurm need it), or the
    default configuration path holds someone else's file."""
    if os.geteuid() != 0:
        return "starting slurmd and writing /etc/slurm/slurm.conf need root"
    if CONF.is_file() and not CONF.read_text(errors="replace").startswith(MARKER):
        return f"{CONF} exists and was not written by this test: not replacing a real SLURM configuration"
    return None
