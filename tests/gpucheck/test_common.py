"""The arms and small options of the GPU check, from the registries, are the ones it was validated with."""

from audit.gpucheck import common


def test_arms_and_tiny_options_are_the_validated_ones():
    # the tables audit/gpucheck/common.py kept when the check was validated on an H200
    assert common.HEADS == ["softmax", "sigsoftmax", "gss", "plif", "plif_frozen", "mos", "moc", "mos_uniform",
                            "mixtape"]
    assert common.BODIES == ["awd_lstm", "transformer"]
    old = {"gss": {"c": -1.5, "k": 2.5}, "plif": {"knots": 1000}, "plif_frozen": {"knots": 1000},
           "mos": {"experts": 3, "dropoutl": 0.0}, "moc": {"experts": 3, "dropoutl": 0.0},
           "mos_uniform": {"experts": 3, "dropoutl": 0.0}, "mixtape": {"gate_embedding_size": 8}}
    for head in common.HEADS:
        assert list(common.tiny_options(head).items()) == list(old.get(head, {}).items()), head


def test_every_arm_walks_both_bodies_in_registry_order():
    class Result:
        data = {}

        def note(self, text):
            raise AssertionError(text)

    arms = list(common.every_arm(float("inf"), Result(), "checked"))
    assert arms == [(b, h) for b in common.BODIES for h in common.HEADS] and len(arms) == 18


def alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a killed child of a process that has not reaped it yet is a zombie: dead for our purposes
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ")[1][0] != "Z"


def test_run_in_session_returns_what_the_command_wrote_and_its_exit_code():
    import subprocess
    import sys

    done = common.run_in_session([sys.executable, "-c", "import sys; print('out'); sys.exit(4)"], 30,
                                 stdout=subprocess.PIPE, text=True)
    assert (done.returncode, done.stdout) == (4, "out\n")


def test_run_in_session_kills_the_grandchildren_at_the_timeout(tmp_path):
    # what subprocess.run leaves alive: Snakemake's jobs, after Snakemake itself is killed
    import subprocess
    import sys
    import time

    import pytest

    pidfile = tmp_path / "grandchild.pid"
    spawn = ("import subprocess, sys, time\n"
             "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
             f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
             "time.sleep(60)\n")
    started = time.time()
    with pytest.raises(subprocess.TimeoutExpired):
        common.run_in_session([sys.executable, "-c", spawn], 3, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert time.time() - started < 30
    grandchild = int(pidfile.read_text())
    for _ in range(50):   # SIGKILL is delivered at once; its reaping (init's) may take a moment
        if not alive(grandchild):
            break
        time.sleep(0.1)
    assert not alive(grandchild)


def test_run_in_session_timeout_carries_what_the_command_had_written():
    # the DAG step reads how far a cut-off Snakemake got from it
    import subprocess
    import sys

    import pytest

    code = "import sys, time; print('3 of 30 steps (10%) done', file=sys.stderr, flush=True); time.sleep(60)"
    with pytest.raises(subprocess.TimeoutExpired) as cut:
        common.run_in_session([sys.executable, "-c", code], 3, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert cut.value.stderr == "3 of 30 steps (10%) done\n" and cut.value.timeout == 3
