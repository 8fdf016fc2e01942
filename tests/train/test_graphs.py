"""audit.train.graphs (``train.cuda_graphs``): the graph path gives the eager path's numbers.

No GPU here, so the graphs are a stand-in with a graph's semantics (``ReplayStandIn``: capturing
runs nothing; a replay re-runs the recorded step on the static buffers and writes its results
into the same output tensors), on the simulated CUDA device. What this proves: the bookkeeping
around the graphs (static ids, targets and hidden state, one graph per length, the learning rate
of each length, the warm-ups, the outputs read after a replay, resuming) leaves every number of a
run unchanged, bitwise; and the recorded step never syncs with the host (a sync inside a capture
is an error on a GPU). Whether cuDNN's LSTM captures and replays to the same numbers on a real
GPU is gpu-check's correctness step (docs/gpus.md).
"""

from __future__ import annotations

import io
import os

import pytest
import torch

from audit.errors import AuditError
from audit.train import graphs
from helpers import comparable, tiny_settings
from support.fake_cuda import lock_dir_env, simulated_cuda
from support.graph_standin import ReplayStandIn

# about 80 steps an epoch of 5-50 rows (bptt 10, variable): a dozen lengths, most replayed
SIZE = {"epochs": 2, "train_tokens": 8000, "bptt": 10, "asgd": "et", "switch_epoch": 1, "device": "cuda"}


def _train(corpus, head, tmp_path, monkeypatch, cuda_graphs, epochs=2, state=None, sim_record=False):
    """(trainer, weights of its evaluation model, stand-in) of a tiny run on the simulated device;
    ``state``: a checkpoint's bytes to resume from. The trainer's ``checkpoint``: its state's bytes."""
    from audit.train.trainer import Trainer

    for key, value in lock_dir_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    settings = tiny_settings(head=head, **{**SIZE, "epochs": epochs}, cuda_graphs=cuda_graphs)
    with simulated_cuda() as sim:
        standin = ReplayStandIn(sim if sim_record else None)
        monkeypatch.setattr(graphs, "default_backend", lambda: standin)
        trainer = Trainer(settings, os.fspath(corpus), log=lambda m: None)
        if state is not None:
            trainer.load_state_dict(torch.load(io.BytesIO(state), map_location="cuda", weights_only=False))
        while trainer.epoch < epochs:
            trainer.run_epoch()
        weights = {k: v.detach().cpu().clone() for k, v in trainer.eval_model().state_dict().items()}
        buffer = io.BytesIO()
        torch.save(trainer.state_dict(), buffer)
        trainer.checkpoint = buffer.getvalue()
    return trainer, weights, standin


def _without_graph_steps(rows: list[dict]) -> list[dict]:
    """Log rows without the one key only a graph run writes."""
    return [{k: v for k, v in r.items() if k != "graph_steps"} for r in rows]


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("head", ["softmax", "mos"])
def test_graph_path_equals_the_eager_path_bitwise(head, ptb_corpus, tmp_path, monkeypatch):
    """Two epochs (SGD, then averaging) with and without graphs: every logged number and every
    weight of the averaged model equal; most steps replayed, one capture per length. Inside every
    replayed step: no host sync (an error while capturing on a GPU), no op that mixes the device
    with CPU tensors, no draw from a CPU generator."""
    eager, eager_w, _ = _train(ptb_corpus, head, tmp_path, monkeypatch, cuda_graphs=False)
    graphed, graphed_w, standin = _train(ptb_corpus, head, tmp_path, monkeypatch, cuda_graphs=True, sim_record=True)
    assert comparable({"log": _without_graph_steps(graphed.log_rows)}) == comparable({"log": eager.log_rows})
    assert _same(graphed_w, eager_w)
    assert graphed.log_rows[1]["averaging"] is True  # the second epoch averaged: ASGD outside the graph
    lengths = graphed.graphs.seen
    assert standin.captures == len(graphed.graphs.graphs) == sum(1 for n in lengths.values() if n > graphs.WARMUP)
    assert standin.warmups == sum(min(n, graphs.WARMUP) for n in lengths.values())
    steps = sum(lengths.values())
    assert standin.replays == steps - standin.warmups == sum(r["graph_steps"] for r in graphed.log_rows)
    assert standin.replays > 0.8 * steps and len(lengths) > 5
    assert "graph_steps" not in eager.log_rows[0]
    assert len(standin.inside) == standin.replays
    assert all(r.n_syncs == 0 for r in standin.inside), [dict(r.syncs) for r in standin.inside if r.n_syncs][:3]
    assert not any(r.mixed for r in standin.inside) and not any(r.cpu_generator for r in standin.inside)
    assert all(r.ops > 50 for r in standin.inside)  # the whole step ran inside: forward, backward, update


def test_a_dropped_copy_of_the_hidden_state_changes_the_numbers(ptb_corpus, tmp_path, monkeypatch):
    """The test above can fail: a graph path that forgets to carry the hidden state into its
    static buffer (every replay starting from the first state) gives other numbers."""
    eager, eager_w, _ = _train(ptb_corpus, "softmax", tmp_path, monkeypatch, cuda_graphs=False, epochs=1)
    bind = graphs.GraphedSteps._bind

    def forgetful(self, words, targets, hidden):
        if self.hidden is not None:
            hidden = self.hidden  # keeps the stale state instead of the carried one
        return bind(self, words, targets, hidden)

    monkeypatch.setattr(graphs.GraphedSteps, "_bind", forgetful)
    graphed, graphed_w, _ = _train(ptb_corpus, "softmax", tmp_path, monkeypatch, cuda_graphs=True, epochs=1)
    assert graphed.log_rows[0]["train_loss"] != eager.log_rows[0]["train_loss"]


def test_resumed_graph_run_equals_the_uninterrupted_one(ptb_corpus, tmp_path, monkeypatch):
    """Killed after the first epoch and resumed: the new process captures its graphs afresh
    (its first step of each length eager again) and ends with the same numbers."""
    whole, whole_w, _ = _train(ptb_corpus, "softmax", tmp_path, monkeypatch, cuda_graphs=True)
    first, _, _ = _train(ptb_corpus, "softmax", tmp_path, monkeypatch, cuda_graphs=True, epochs=1)
    state = first.checkpoint
    resumed, resumed_w, _ = _train(ptb_corpus, "softmax", tmp_path, monkeypatch, cuda_graphs=True, state=state)
    assert comparable({"log": _without_graph_steps(resumed.log_rows)}) == \
        comparable({"log": _without_graph_steps(whole.log_rows)})
    assert _same(resumed_w, whole_w)


def test_graphs_are_refused_where_they_cannot_hold_the_numbers():
    with pytest.raises(AuditError, match=r"^train.cuda_graphs: CUDA graphs need a CUDA device; this run is on cpu$"):
        graphs.check({"cuda_graphs": True}, torch.device("cpu"))
    with pytest.raises(AuditError, match=r"^train.cuda_graphs: needs optimizer sgd \(got 'adamw'"):
        graphs.check({"cuda_graphs": True, "optimizer": "adamw"}, torch.device("cuda"))
    graphs.check({"cuda_graphs": False}, torch.device("cpu"))  # off: nothing to refuse
    with pytest.raises(AuditError, match=r"config key train.cuda_graphs: needs optimizer sgd"):
        tiny_settings(cuda_graphs=True, optimizer="adamw", asgd="none")


def test_the_key_is_recorded_in_the_run_settings_and_changing_it_retrains():
    """Off (absent) by default, so no recorded run changes; on, it is part of the run's identity:
    an eager run's checkpoint is never resumed by a graph run (no run mixes paths)."""
    from audit.train.checkpoint import run_identity

    eager, graphed = tiny_settings(device="cuda"), tiny_settings(device="cuda", cuda_graphs=True)
    assert "cuda_graphs" not in eager["train"] and graphed["train"]["cuda_graphs"] is True
    ids = [run_identity(s, device_type="cuda", data="d", training_version=1) for s in (eager, graphed)]
    assert ids[0] != ids[1] and ids[1]["settings"]["train"]["cuda_graphs"] is True
