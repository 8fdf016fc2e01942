"""audit.train.graphs (``train.cuda_graphs``): the graph path gives the eager path's numbers.

No GPU here, so the graphs are a stand-in with a graph's semantics (``ReplayStandIn``: a capture
records the step's aten ops on the memory they touched and runs nothing; a replay runs those ops
on that memory, never the step's Python, and writes into the same output tensors), on the
simulated CUDA device, whose LSTM flatten moves parameters to new storage as cuDNN's does
(issue 54). What this proves: the bookkeeping around the graphs (static ids, targets and hidden
state, one graph per length, the learning rate of each length, the warm-ups, the outputs read
after a replay, resuming) leaves every number of a run unchanged, bitwise; no captured tensor
moves, and one that does stops the run; and the recorded step never syncs with the host (a
sync inside a capture is an error on a GPU). Whether cuDNN's LSTM captures and replays to the
same numbers on a real GPU is gpu-check's correctness step (docs/gpus.md).
"""

from __future__ import annotations

import io
import os
import re

import pytest
import torch

from audit.config.training import TrainSettings
from audit.errors import AuditError
from audit.train import graphs
from helpers import comparable, tiny_settings
from support import flattening_lstm
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


def test_todays_graph_path_trained_on_stale_weights_and_is_now_stopped(ptb_corpus, tmp_path, monkeypatch):
    """The graph path before issue 54 (the dropped weight through functional_call, so nn.LSTM
    re-flattens and cuDNN moves the parameters at every step): on the simulated device, whose
    flatten moves storage as cuDNN's does, its replays update the parameters' old storage and
    the model trains on other numbers than the eager run's, silently. With the address check the
    same run stops at its first capture, naming the parameter that moved."""
    eager, _, _ = _train(ptb_corpus, "softmax", tmp_path, monkeypatch, cuda_graphs=False, epochs=1)
    flattening_lstm.install(monkeypatch)
    check = graphs.GraphedSteps.check_addresses
    monkeypatch.setattr(graphs.GraphedSteps, "check_addresses", lambda self, n, when: None)
    stale, _, standin = _train(ptb_corpus, "softmax", tmp_path, monkeypatch, cuda_graphs=True, epochs=1)
    assert standin.replays > 50
    assert stale.log_rows[0]["train_loss"] != eager.log_rows[0]["train_loss"]
    assert stale.log_rows[0]["valid_loss"] != eager.log_rows[0]["valid_loss"]
    monkeypatch.setattr(graphs.GraphedSteps, "check_addresses", check)
    with pytest.raises(AuditError, match=r"^train.cuda_graphs: parameter body\.rnns\.0\.lstm\.weight_ih_l0 moved "
                                         r"while the graph of BPTT length \d+ was captured \(address 0x[0-9a-f]+ -> "
                                         r"0x[0-9a-f]+\); a replay would update memory the model no longer reads$"):
        _train(ptb_corpus, "softmax", tmp_path, monkeypatch, cuda_graphs=True, epochs=1)


class _Direct:
    """A backend whose capture keeps the step and whose replay calls it (no device needed)."""

    def warm_up(self, body):
        return body()

    def capture(self, body):
        return body

    def replay(self, captured):
        return captured()


@pytest.mark.parametrize("moved", ["parameter w", "optimiser state momentum_buffer of w", "static words",
                                   "static hidden state [1]"])
def test_a_tensor_moved_after_its_capture_stops_the_next_replay(moved):
    """Each kind of kept tensor, moved between two replays (a new storage of the same values,
    as cuDNN's flatten gives): the next step of that length stops with one line naming it; the
    steps before it replayed."""
    w = torch.nn.Parameter(torch.ones(3))
    state = {"momentum_buffer": torch.zeros(3)}
    calls = []

    def body(words, targets, hidden):
        calls.append(words.size(0))
        return words.sum(), words.sum(), [t + 1 for t in hidden]

    steps = graphs.GraphedSteps(body, lambda n: None, 8, 2, torch.device("cpu"), backend=_Direct(),
                                watched=lambda: {"parameter w": w, "optimiser state momentum_buffer of w":
                                                 state["momentum_buffer"]})
    words, hidden = torch.zeros(4, 2, dtype=torch.long), [torch.zeros(2), torch.zeros(2)]
    for _ in range(3):   # a warm-up, the capture and its replay, a replay
        steps.step(words, words, hidden)
    assert steps.replays == 2
    with torch.no_grad():
        if moved == "parameter w":
            w.set_(w.clone())
        elif moved.startswith("optimiser"):
            state["momentum_buffer"] = state["momentum_buffer"].clone()
        elif moved == "static words":
            steps.words.set_(steps.words.clone())
        else:
            steps.hidden[1].set_(steps.hidden[1].clone())
    with pytest.raises(AuditError, match=rf"^train.cuda_graphs: {re.escape(moved)} moved since the graph of BPTT "
                                         rf"length 4 was captured"):
        steps.step(words, words, hidden)
    assert steps.replays == 2 and steps.step(words[:3], words[:3], hidden) is not None   # another length: eager


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
    """One refusal, said by the typed settings, for the trainer and for the config check alike."""
    refusal = (r"needs optimizer sgd \(got 'adamw': AdamW's learning rate changes every step, a CUDA graph's "
               r"is fixed\)$")
    with pytest.raises(AuditError, match=r"^train.cuda_graphs: CUDA graphs need a CUDA device; this run is on cpu$"):
        graphs.check(TrainSettings(cuda_graphs=True), torch.device("cpu"))
    with pytest.raises(AuditError, match=r"^train.cuda_graphs: " + refusal):
        graphs.check(TrainSettings(cuda_graphs=True, optimizer="adamw"), torch.device("cuda"))
    graphs.check(TrainSettings(), torch.device("cpu"))  # off (the schema's default): nothing to refuse
    with pytest.raises(AuditError, match=r": config key train.cuda_graphs: " + refusal):
        tiny_settings(cuda_graphs=True, optimizer="adamw", asgd="none")


def test_the_key_is_recorded_in_the_run_settings_and_changing_it_retrains():
    """Off (absent) by default, so no recorded run changes; on, it is part of the run's identity:
    an eager run's checkpoint is never resumed by a graph run (no run mixes paths)."""
    from audit.train.checkpoint import run_identity

    eager, graphed = tiny_settings(device="cuda"), tiny_settings(device="cuda", cuda_graphs=True)
    assert "cuda_graphs" not in eager["train"] and graphed["train"]["cuda_graphs"] is True
    ids = [run_identity(s, device_type="cuda", data="d", training_version=1) for s in (eager, graphed)]
    assert ids[0] != ids[1] and ids[1]["settings"]["train"]["cuda_graphs"] is True
