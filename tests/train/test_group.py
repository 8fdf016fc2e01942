"""audit/train/group.py (issue 57): several seeds of one arm in one process, one step of each in
turn, each run's numbers its own single-process run's, bitwise on the CPU."""

import json

import pytest
import torch

from audit.errors import AuditError
from audit.train import group
from audit.train.run import train
from audit.train.trainer import Divergence, Trainer
from helpers import comparable, tiny_settings

SEEDS = (1, 2, 3)


def _settings(seed):
    # dropout on (tiny_settings: 0.1 and a weight drop of 0.2): every step draws masks from the
    # global generator, so runs taking turns would mix their draws unless each keeps its own
    return tiny_settings(seed=seed, epochs=2, train_tokens=3000)


def _single(tmp_path, ptb_corpus, seed):
    train(_settings(seed), str(ptb_corpus), tmp_path / "single" / str(seed), log=lambda m: None)
    return _read(tmp_path / "single" / str(seed))


def _read(folder):
    metrics = json.loads((folder / "metrics.json").read_text())
    state = torch.load(folder / "model.pt", weights_only=False)["state"]
    return metrics, state


def _same(a, b):
    (metrics_a, state_a), (metrics_b, state_b) = a, b
    assert comparable(metrics_a) == comparable(metrics_b)
    assert state_a.keys() == state_b.keys() and all(torch.equal(state_a[k], state_b[k]) for k in state_a)


@pytest.fixture(scope="module")
def singles(tmp_path_factory, ptb_corpus):
    root = tmp_path_factory.mktemp("singles")
    return {seed: _single(root, ptb_corpus, seed) for seed in SEEDS}


def test_each_run_of_a_group_equals_its_own_run_bitwise(tmp_path, ptb_corpus, singles):
    outs = [tmp_path / str(s) for s in SEEDS]
    metrics = group.train_group([_settings(s) for s in SEEDS], str(ptb_corpus), outs, log=lambda m: None)
    assert [m["status"] for m in metrics] == ["ok"] * 3
    for seed, out in zip(SEEDS, outs):
        _same(_read(out), singles[seed])
    # the seeds differ from each other: the test would see runs that drew each other's masks
    assert singles[1][0]["valid_ppl"] != singles[2][0]["valid_ppl"]


def test_a_group_killed_after_an_epoch_resumes_each_run_to_the_same_numbers(tmp_path, ptb_corpus, singles,
                                                                            monkeypatch):
    outs = [tmp_path / str(s) for s in SEEDS]
    calls = []

    def killed(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:   # the three runs' first epochs are saved, then the job dies
            raise KeyboardInterrupt
        return done(*args, **kwargs)

    done = group.epoch_done
    monkeypatch.setattr(group, "epoch_done", killed)
    with pytest.raises(KeyboardInterrupt):
        group.train_group([_settings(s) for s in SEEDS], str(ptb_corpus), outs, log=lambda m: None)
    assert not any((o / "metrics.json").exists() for o in outs) and all((o / "work" / "last.pt").exists() for o in outs)
    monkeypatch.setattr(group, "epoch_done", done)
    lines = []
    group.train_group([_settings(s) for s in SEEDS], str(ptb_corpus), outs, log=lines.append)
    assert sum("resumed checkpoint" in line and "after epoch 1 of 2" in line for line in lines) == 3
    for seed, out in zip(SEEDS, outs):
        _same(_read(out), singles[seed])


def test_a_run_that_diverges_fails_alone(tmp_path, ptb_corpus, singles, monkeypatch):
    steps = Trainer.epoch_steps

    def diverging(self):
        if self.settings["seed"] == 2:
            yield
            raise Divergence("planted at its second step")
        return (yield from steps(self))

    monkeypatch.setattr(Trainer, "epoch_steps", diverging)
    outs = [tmp_path / str(s) for s in SEEDS]
    metrics = group.train_group([_settings(s) for s in SEEDS], str(ptb_corpus), outs, log=lambda m: None)
    assert [m["status"] for m in metrics] == ["ok", "failed", "ok"]
    assert metrics[1]["error"] == "Divergence: planted at its second step"
    _same(_read(outs[0]), singles[1])
    _same(_read(outs[2]), singles[3])


def test_a_group_holds_the_seeds_of_one_arm():
    with pytest.raises(AuditError, match=r"train group: seed 2 differs from seed 1 in head, name"):
        group.check_group([tiny_settings(seed=1), tiny_settings(head="mos", seed=2)])
    with pytest.raises(AuditError, match=r"a seed appears twice in \[1, 1\]"):
        group.check_group([tiny_settings(seed=1), tiny_settings(seed=1)])
    with pytest.raises(AuditError, match=r"train.cuda_graphs is not supported in a group yet"):
        group.check_group([tiny_settings(seed=1, cuda_graphs=True), tiny_settings(seed=2, cuda_graphs=True)])


def test_on_the_simulated_device_each_run_has_its_stream_and_its_own_device_draws(tmp_path, ptb_corpus):
    """The CUDA path: a stream per run, and the device generator (which draws the dropout masks of
    device tensors) swapped per turn through torch.cuda.get/set_rng_state."""
    from support.fake_cuda import simulated_cuda

    def settings(seed):
        return tiny_settings(seed=seed, epochs=1, train_tokens=2000, device="cuda")

    with simulated_cuda() as sim:
        alone = {}
        for seed in (1, 2):
            train(settings(seed), str(ptb_corpus), tmp_path / "alone" / str(seed), log=lambda m: None)
            alone[seed] = _read(tmp_path / "alone" / str(seed))
        made = len(sim.streams)
        outs = [tmp_path / "group" / str(seed) for seed in (1, 2)]
        metrics = group.train_group([settings(1), settings(2)], str(ptb_corpus), outs, log=lambda m: None)
        streams = sim.streams[made:]
    assert [m["device"] for m in metrics] == ["cuda:0", "cuda:0"]
    assert len(streams) == 2 and all(s.entered > 10 for s in streams)   # every step on its run's stream
    for seed, out in zip((1, 2), outs):
        _same(_read(out), alone[seed])


def test_the_train_verb_takes_one_arms_seeds_as_a_list(tmp_path, ptb_corpus, capsys):
    from audit.train import cli

    runs = [tiny_settings(seed=s, epochs=1, train_tokens=2000) for s in (4, 5)]
    outs = [str(tmp_path / str(s)) for s in (4, 5)]
    assert cli.main(["--settings", json.dumps(runs), "--corpus", str(ptb_corpus), "--out-dir", *outs]) == 0
    printed = capsys.readouterr().out
    assert "[seed 4] epoch    1" in printed and "[seed 5] epoch    1" in printed
    assert [json.loads((tmp_path / str(s) / "metrics.json").read_text())["seed"] for s in (4, 5)] == [4, 5]
    with pytest.raises(AuditError, match=r"--out-dir: one run, 2 folders"):
        cli.main(["--settings", json.dumps(runs[0]), "--corpus", str(ptb_corpus), "--out-dir", *outs])
