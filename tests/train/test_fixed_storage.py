"""No parameter moves (issue 54): the AWD-LSTM's functional LSTM op keeps every parameter in the
storage it was given, through training steps, validation and the switch to averaging, and gives
the old path's numbers bitwise.

The old path (tests/support/flattening_lstm.py: the dropped weight through ``functional_call``)
made ``nn.LSTM`` re-flatten at every training step and after it at each validation; on a GPU
cuDNN's flatten moves the parameters to new storage, which a CUDA graph does not follow. The
simulated device's flatten moves them as cuDNN does (tests/support/fake_cuda.py), so the
move is counted here on the CPU.
"""

from __future__ import annotations

import os

import pytest
import torch

from helpers import comparable, tiny_settings
from support import flattening_lstm
from support.fake_cuda import lock_dir_env, simulated_cuda

# two epochs of about 80 steps: SGD, then averaging (the switch after the first validation)
SIZE = {"epochs": 2, "train_tokens": 8000, "bptt": 10, "asgd": "et", "switch_epoch": 1}


def _run(corpus, head: str, device: str, watch=None) -> tuple:
    """(log rows, evaluation weights, best state) of a tiny run; ``watch(trainer, when)`` is
    called once the model is built (``when`` "start"), after every optimiser step ("step") and
    after every epoch ("epoch": its validation, and the switch to averaging after the first)."""
    from audit.train.trainer import Trainer

    trainer = Trainer(tiny_settings(head=head, **SIZE, device=device), os.fspath(corpus), log=lambda m: None)
    if watch is not None:
        watch(trainer, "start")
        update = trainer.update
        trainer.update = lambda loss: (update(loss), watch(trainer, "step"))[0]
    while trainer.epoch < SIZE["epochs"]:
        trainer.run_epoch()
        if watch is not None:
            watch(trainer, "epoch")
    weights = {k: v.detach().cpu().clone() for k, v in trainer.eval_model().state_dict().items()}
    return trainer.log_rows, weights, trainer.best


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("head", ["softmax", "mos"])
def test_the_functional_lstm_op_gives_the_old_paths_numbers_bitwise(head, ptb_corpus, monkeypatch):
    """On the CPU, one seed: every logged number of both epochs, every weight of the averaged
    model and the best-validation state are those of the functional_call path before issue 54."""
    new = _run(ptb_corpus, head, "cpu")
    flattening_lstm.install(monkeypatch)
    old = _run(ptb_corpus, head, "cpu")
    assert comparable({"log": new[0]}) == comparable({"log": old[0]})
    assert new[0][1]["averaging"] is True and new[0][0]["switched_to_asgd"] is True
    assert _same(new[1], old[1])
    assert new[2]["epoch"] == old[2]["epoch"] and _same(new[2]["state"], old[2]["state"])


def _moves(corpus, tmp_path, monkeypatch) -> dict:
    """On the simulated device (whose flatten moves storage as cuDNN's does): how many times a
    parameter's address changed between optimiser steps, and across each epoch's validation and
    switch, and how many flattens the trained model's LSTMs made once it was built."""
    for key, value in lock_dir_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    seen = {"start": 0, "step": 0, "epoch": 0, "flattens": 0, "steps": 0}
    last, lstms = {}, []

    def watch(trainer, when):
        now = {name: p.data_ptr() for name, p in trainer.model.named_parameters()}
        seen[when] += sum(now[name] != address for name, address in last.items())
        seen["steps"] += when == "step"
        last.update(now)
        if when == "start":
            lstms.extend(m for m in trainer.model.modules() if isinstance(m, torch.nn.LSTM))

    with simulated_cuda():
        flatten = torch.nn.RNNBase.flatten_parameters

        def counted(module):
            seen["flattens"] += any(module is lstm for lstm in lstms)   # not the average's copies
            flatten(module)

        # set by hand, not by monkeypatch: the simulation puts its own back when it ends
        torch.nn.RNNBase.flatten_parameters = counted
        try:
            _run(corpus, "softmax", "cuda", watch)
        finally:
            torch.nn.RNNBase.flatten_parameters = flatten
    return seen


def test_no_parameter_moves_in_training_validation_or_the_switch_where_the_old_path_moved_them(
        ptb_corpus, tmp_path, monkeypatch):
    """The new path: not one move in about 160 steps, two validations and the switch, and no
    flatten after the model was built. The old path, on the same device: moves from the first
    steps on, at every epoch boundary too (what a CUDA graph would not follow)."""
    new = _moves(ptb_corpus, tmp_path, monkeypatch)
    assert new["steps"] > 100
    assert new["step"] == new["epoch"] == new["flattens"] == 0, new
    assert len(new) == 5 and new["start"] == 0
    flattening_lstm.install(monkeypatch)
    old = _moves(ptb_corpus, tmp_path, monkeypatch)
    print(f"old path: {old}")
    assert old["steps"] == new["steps"]
    # two layers re-flattened at every step and at the next validation forward
    assert old["flattens"] >= 2 * old["steps"], old
    assert old["step"] >= old["steps"] and old["epoch"] > 0, old
