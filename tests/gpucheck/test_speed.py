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


def test_graph_path_reports_each_familys_speed_and_share_of_the_measured_peak(monkeypatch):
    """On a GPU (the measurements faked): one graph run per family, its ratio to the eager run and
    both shares of the fp32 rate, each share = training FLOPs per token x tokens/s / rate."""
    from audit.bench import gpu as bench
    from audit.config import load_study
    from audit.gpucheck.common import REPO
    from audit.plan.resources import run_flops_per_token

    config = load_study(REPO / "configs" / "paper-ptb.yaml")
    monkeypatch.setattr(bench, "measure_fp32_rate", lambda device: 50e12)
    one = {"softmax": {"tokens_per_second": 80_000.0}, "mos": {"tokens_per_second": 40_000.0}}
    asked = []

    def measure(label, settings, corpus, n):
        asked.append((label, settings["train"]["cuda_graphs"], corpus, n))
        return {"tokens_per_second": 2 * one[settings["head"]]["tokens_per_second"], "peak_gb": 1.5, "graph_steps": 55}

    result = Result("speed", False)
    rates = speed.graph_path(result, bench, config, {"softmax": "s.pt", "mos": "m.pt"}, one, False, measure,
                             lambda: True)
    assert rates == {"softmax": 160_000.0, "mos": 80_000.0}
    assert asked == [("one softmax run, CUDA graphs", True, "s.pt", 1), ("one mos run, CUDA graphs", True, "m.pt", 1)]
    rows = result.data["figures"]["graphs"]
    assert result.data["figures"]["fp32_tflops"] == 50.0
    flops = run_flops_per_token(bench.arm_settings(config, "mos", False, "cuda"))
    assert rows["mos"]["x_eager"] == 2.0 and rows["mos"]["graph_steps"] == 55
    assert rows["mos"]["eager_share"] == pytest.approx(flops * 40_000 / 50e12)
    assert rows["mos"]["share"] == pytest.approx(2 * rows["mos"]["eager_share"])
    assert 0 < rows["softmax"]["share"] < rows["mos"]["share"] < 1   # MoS: K decoders' FLOPs a token

    simulated = Result("speed", True)
    assert speed.graph_path(simulated, bench, config, {}, one, True, measure, lambda: True) == {}
    assert simulated.data["notes"] == ["CUDA graphs and the fp32 peak: not on the simulated device"]
