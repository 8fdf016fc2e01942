"""gpu-check's CUDA-graphs check (audit.gpucheck.graphcheck) on the simulated device, with the graph
stand-in of tests/support/graph_standin.py in place of real graphs: it passes on a graph path that
keeps the eager numbers and fails on one that does not (a graph that bakes a stale learning rate,
a parameter that moves after its capture)."""

from __future__ import annotations

import pytest

from audit.gpucheck import graphcheck
from audit.gpucheck.common import Result, random_corpus
from audit.train import graphs
from support.fake_cuda import lock_dir_env, simulated_cuda
from support.graph_standin import ReplayStandIn


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    for key, value in lock_dir_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    return random_corpus(tmp_path / "corpus.pt", 500, 4000, 1000, 1000)


def _check(corpus, monkeypatch) -> Result:
    result = Result("correctness", simulated=False)   # as on a GPU: the check itself runs
    with simulated_cuda():
        monkeypatch.setattr(graphs, "default_backend", ReplayStandIn)
        graphcheck.run(result, corpus, simulated=False)
    return result


def test_graph_runs_equal_the_eager_ones_and_the_check_passes(corpus, monkeypatch):
    result = _check(corpus, monkeypatch)
    checks = result.data["checks"]
    assert [c["name"].split(",")[1].strip() for c in checks] == ["softmax", "plif", "mos"]
    assert all(c["ok"] for c in checks), checks
    # on the simulated device the CPU's kernels run: every run is bitwise the eager one
    assert all(c["value"].startswith("loss 0, weights 0 (") for c in checks), checks
    assert all(int(c["value"].split("(")[1].split()[0]) > 10 for c in checks)   # most steps replayed


def test_a_graph_with_a_stale_learning_rate_fails_the_check(corpus, monkeypatch):
    """A graph path that sets each length's learning rate once, at its first step, and never again
    (a replay then steps at whatever the last eager step left): other numbers, a failed check."""
    step = graphs.GraphedSteps.step

    def stale(self, words, targets, hidden):
        if words.size(0) in self.graphs:
            self.set_lr = lambda n: None
        return step(self, words, targets, hidden)

    monkeypatch.setattr(graphs.GraphedSteps, "step", stale)
    result = _check(corpus, monkeypatch)
    assert not any(c["ok"] for c in result.data["checks"]), result.data["checks"]


def test_a_parameter_that_moves_fails_each_familys_check_with_its_line(corpus, monkeypatch):
    """The path before issue 54 (nn.LSTM re-flattened at every step, moving its parameters as
    cuDNN does on the simulated device): each family's check fails with the graph path's one
    line, and the step goes on to the next family."""
    from support import flattening_lstm

    flattening_lstm.install(monkeypatch)
    monkeypatch.setattr(graphcheck, "STEPS", 10)   # the graph run stops at its first capture
    checks = _check(corpus, monkeypatch).data["checks"]
    assert [c["name"] for c in checks] == [f"CUDA graphs = eager, {h}, 10 steps" for h in ("softmax", "plif", "mos")]
    assert all(not c["ok"] and c["value"].startswith("train.cuda_graphs: parameter body.rnns.0.lstm.weight_ih_l0 "
                                                     "moved while the graph of BPTT length") for c in checks), checks


def test_on_the_simulated_device_the_check_says_why_it_did_not_run(corpus):
    result = Result("correctness", simulated=True)
    graphcheck.run(result, corpus, simulated=True)
    assert result.data["checks"] == []
    assert result.data["notes"] == [
        "CUDA graphs: not checkable on the simulated device (tests/train/test_graphs.py checks their "
        "bookkeeping there with a stand-in)"]
