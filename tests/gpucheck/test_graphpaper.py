"""gpu-check's paper-size CUDA-graphs check (audit.gpucheck.graphpaper) on the simulated device, at
a small size (a 24M-parameter LSTM at CPU speed is out of reach), with the graph stand-in of
tests/support/graph_standin.py and the simulated device's moving cuDNN flatten: it passes on a
path whose captured tensors never move, across a validation pass and the switch to averaging,
and fails with the one line that names a moved parameter on the path before issue 54. The
GPU-busy share is reported as not measured there, never as a number."""

from __future__ import annotations

import time

import pytest

from audit.gpucheck import graphpaper
from audit.gpucheck.common import Result, random_corpus
from audit.train import graphs
from support import flattening_lstm
from support.fake_cuda import lock_dir_env, simulated_cuda
from support.graph_standin import ReplayStandIn

SMALL = {"config": "paper-ptb", "head": "softmax", "vocab": 500, "model": {"emb_size": 16, "hidden_size": 24}}
STEPS = 6


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    for key, value in lock_dir_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    # paper-ptb's batch 20 x bptt 70 per step, and the targets' one row more (a shorter last
    # step would be a length of its own: eager); two validation chunks of 70 x 10
    return random_corpus(tmp_path / "corpus.pt", SMALL["vocab"], (2 * STEPS * 70 + 2) * 20, 2 * 70 * 10 + 1, 1401)


def _check(corpus, monkeypatch) -> Result:
    result = Result("correctness", simulated=False)   # as on a GPU: the check itself runs
    with simulated_cuda():
        monkeypatch.setattr(graphs, "default_backend", ReplayStandIn)
        graphpaper.check(result, corpus, SMALL, profile=True, steps=STEPS)
    return result


def test_the_paper_check_passes_across_validation_and_the_switch(corpus, monkeypatch):
    result = _check(corpus, monkeypatch)
    [check] = result.data["checks"]
    assert check["ok"], check
    assert check["name"] == "CUDA graphs = eager at paper size, softmax, 2 x 6 steps, validation and ASGD switch"
    # the CPU's kernels on the simulated device: bitwise the eager run; one length, so the first
    # step is the only warm-up and every other step of both epochs a replay
    assert check["value"] == "loss 0, validation 0, weights 0 (steps replayed per epoch 5, 6)", check
    assert result.data["figures"]["graphs_paper_busy"] == {"eager": None, "graphs": None}
    assert result.data["notes"] == ["GPU-busy share per step at paper size: not measured (the profiler's CUDA "
                                    "activity needs a GPU)"]


def test_the_path_before_issue_54_fails_it_with_the_moved_parameter(corpus, monkeypatch):
    flattening_lstm.install(monkeypatch)
    [check] = _check(corpus, monkeypatch).data["checks"]
    assert not check["ok"]
    assert check["value"].startswith("train.cuda_graphs: parameter body.rnns.0.lstm.weight_ih_l0 moved while the "
                                     "graph of BPTT length 70 was captured (address 0x"), check


def test_paper_settings_are_paper_ptbs_softmax_run():
    assert graphpaper.paper_size() == {"config": "paper-ptb", "head": "softmax", "vocab": 10000, "model": {}}
    settings = graphpaper.paper_settings(graphpaper.paper_size(), True, 30)
    model, train = settings["model"], settings["train"]
    assert (model["emb_size"], model["hidden_size"], model["n_layers"], model["wdrop"]) == (400, 1150, 3, 0.5)
    assert (train["batch_size"], train["bptt"], train["variable_bptt"], train["epochs"]) == (20, 70, False, 2)
    assert (train["asgd"], train["switch_epoch"], train["cuda_graphs"], train["epoch_tokens"]) == ("et", 1, True, 42000)
    assert "cuda_graphs" not in graphpaper.paper_settings(graphpaper.paper_size(), False, 30)["train"]


def test_busy_time_is_the_union_of_the_kernels_intervals():
    """Overlapping kernels (two streams) count once, nested ones not at all, gaps not at all:
    a plain sum of durations (26) would call the GPU busier than it was."""
    assert graphpaper.busy_us([(20, 25), (0, 10), (5, 15), (21, 22)]) == 20
    assert graphpaper.busy_us([]) == 0


def test_on_the_simulated_device_the_step_says_why_it_did_not_run():
    result = Result("correctness", simulated=True)
    graphpaper.run(result, simulated=True, deadline=time.time() + 60)
    assert result.data["checks"] == [] and "not run on the simulated device" in result.data["notes"][0]
    assert "GPU-busy share: not measured" in result.data["notes"][0]
