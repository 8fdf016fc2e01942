"""gpu-check's speed step: the MPS sweep's daemon handling (the step itself runs end to end in
tests/gpucheck/test_acceptance.py on the simulated device, where MPS cannot start)."""

import pytest

from audit.gpucheck import speed
from audit.gpucheck.common import Result


class Daemon:
    """``start_mps``/``stop_mps`` of audit.bench.gpu, recording what was asked."""

    def __init__(self, starts: bool):
        self.starts, self.calls = starts, []

    def start_mps(self, folder):
        self.calls.append(("start", folder))
        return {"CUDA_MPS_PIPE_DIRECTORY": f"{folder}/pipe"} if self.starts else None

    def stop_mps(self, env):
        self.calls.append(("stop", env["CUDA_MPS_PIPE_DIRECTORY"]))


def test_the_sweep_runs_under_the_daemon_and_stops_it_even_when_a_measurement_breaks():
    daemon, seen = Daemon(True), []

    def concurrency(env=None, how=""):
        seen.append((env, how))
        return [{"n": 2, "tokens_per_second": 3.0, "peak_gb": 1.0, "mps": True}]

    result = Result("speed", False)
    assert speed.mps_sweep(result, daemon, concurrency, False, "/t") == [
        {"n": 2, "tokens_per_second": 3.0, "peak_gb": 1.0, "mps": True}]
    assert seen == [({"CUDA_MPS_PIPE_DIRECTORY": "/t/mps/pipe"}, " under MPS")]
    assert daemon.calls == [("start", "/t/mps"), ("stop", "/t/mps/pipe")]

    def broken(env=None, how=""):
        raise RuntimeError("a worker hung")

    daemon = Daemon(True)
    with pytest.raises(RuntimeError):
        speed.mps_sweep(result, daemon, broken, False, "/t")
    assert daemon.calls[-1] == ("stop", "/t/mps/pipe")


@pytest.mark.parametrize("starts, simulated, note", [
    (False, False, "MPS: nvidia-cuda-mps-control not found or did not start: skipped"),
    (True, True, "MPS: not on the simulated device")])
def test_no_sweep_where_the_daemon_cannot_run_and_the_note_says_why(starts, simulated, note):
    daemon, result = Daemon(starts), Result("speed", simulated)
    assert speed.mps_sweep(result, daemon, lambda *a: pytest.fail("measured without MPS"), simulated, "/t") == []
    assert result.data["notes"] == [note]
    assert daemon.calls == ([] if simulated else [("start", "/t/mps")])
