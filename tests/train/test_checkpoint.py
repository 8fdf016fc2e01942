"""When a run's checkpoint is resumed and when the run starts afresh (audit.train.checkpoint)."""

import copy
import shutil

import pytest
import torch

from audit.train import checkpoint, trainer as trainer_module
from audit.train.checkpoint import differences, fingerprint, run_identity
from audit.train.run import train
from helpers import comparable, tiny_settings


def run(settings, corpus, out_dir):
    """Train (or resume) into ``out_dir``; the metrics and every line the trainer logged."""
    lines = []
    return train(settings, corpus, out_dir, log=lines.append), lines


def weights(run_dir):
    return torch.load(run_dir / "model.pt", weights_only=False)["state"]


def same_weights(a, b) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def warnings(lines):
    return [line for line in lines if line.startswith("warning:")]


def epoch_lines(lines):
    return [line for line in lines if line.startswith("epoch")]


@pytest.fixture(scope="module")
def finished(ptb_corpus, tmp_path_factory):
    """A finished two-epoch run: (settings, run folder, metrics). Tests work on copies of it."""
    settings = tiny_settings(seed=7, epochs=2, lr=40.0)  # lr 40: NT-ASGD switches at epoch 3 of 4
    out = tmp_path_factory.mktemp("finished") / "run"
    metrics, _ = run(settings, ptb_corpus, out)
    assert metrics["status"] == "ok" and (out / "work" / "last.pt").is_file()
    return settings, out, metrics


def copy_run(finished, tmp_path):
    return shutil.copytree(finished[1], tmp_path / "run")


# ----- the identity ----------------------------------------------------------------------------
def identity(settings, **overrides):
    return run_identity(settings, **{"device_type": "cpu", "data": "digest", "training_version": 1, **overrides})


def test_identity_leaves_out_only_labels_evaluation_epochs_and_the_device_setting():
    base = tiny_settings()
    relabelled = copy.deepcopy(base)
    relabelled.update(study="other", name="renamed", grid_point={"k": 1}, arm_group="g")
    relabelled["evaluate"] = {"contexts": 7}   # settings of runs trained before evaluate left them
    relabelled["train"].update(epochs=99, device="auto")
    assert fingerprint(identity(relabelled)) == fingerprint(identity(base))
    changes = {
        "seed 1 -> 2": lambda s: s.update(seed=2),
        "train.lr 20.0 -> 1.0": lambda s: s["train"].update(lr=1.0),
        "model.dropout 0.1 -> 0.5": lambda s: s["model"].update(dropout=0.5),
        "train.threads 1 -> 2": lambda s: s["train"].update(threads=2),  # CPU sums depend on threads
        "max_tokens.train 6000 -> 5000": lambda s: s["max_tokens"].update(train=5000),
        'head "softmax" -> "sigsoftmax"': lambda s: s.update(head="sigsoftmax"),
    }
    for expected, change in changes.items():
        changed = copy.deepcopy(base)
        change(changed)
        assert fingerprint(identity(changed)) != fingerprint(identity(base)), expected
        assert differences(identity(base), identity(changed)) == [expected]
    for key, value in {"device_type": "cuda", "data": "other", "training_version": 2}.items():
        assert fingerprint(identity(base, **{key: value})) != fingerprint(identity(base))
    assert differences(identity(base), identity(base, data="other")) == ["data (token ids or vocabulary)"]


def test_fingerprint_ignores_key_order():
    a = identity(tiny_settings())
    b = dict(reversed(list(a.items())))
    b["settings"] = dict(reversed(list(a["settings"].items())))
    assert fingerprint(a) == fingerprint(b)


# ----- the trainer's decision ------------------------------------------------------------------
def test_changed_settings_start_afresh_and_the_log_names_them(finished, ptb_corpus, tmp_path):
    settings, _, old = finished
    new = copy.deepcopy(settings)
    new["train"]["lr"], new["model"]["dropout"] = 1.0, 0.5
    out = copy_run(finished, tmp_path)
    metrics, lines = run(new, ptb_corpus, out)
    clean, _ = run(new, ptb_corpus, tmp_path / "clean")
    assert comparable(metrics) == comparable(clean) and same_weights(out, tmp_path / "clean")
    assert metrics["valid_ppl"] != old["valid_ppl"] and len(epoch_lines(lines)) == 2
    [warning] = warnings(lines)
    assert warning.endswith("was written under other settings: model.dropout 0.1 -> 0.5; "
                            "train.lr 40.0 -> 1.0: discarded, training afresh")


def test_raising_epochs_continues_to_exactly_the_run_planned_longer(finished, ptb_corpus, tmp_path):
    settings, _, _ = finished
    longer = copy.deepcopy(settings)
    out = copy_run(finished, tmp_path)
    # 2 -> 3 epochs crosses the NT-ASGD switch (the carried validation history decides it);
    # 3 -> 4 resumes a checkpoint written at the switch, whose average has just begun
    for epochs in (3, 4):
        longer["train"]["epochs"] = epochs
        metrics, lines = run(longer, ptb_corpus, out)
        assert lines[0].startswith("resumed checkpoint") and f"after epoch {epochs - 1} of {epochs}" in lines[0]
        assert [line.split("|")[0].split() for line in epoch_lines(lines)] == [["epoch", str(epochs)]]
        assert not warnings(lines)
    clean, _ = run(longer, ptb_corpus, tmp_path / "clean")
    assert comparable(metrics) == comparable(clean) and same_weights(out, tmp_path / "clean")
    assert metrics["epochs_run"] == 4
    assert [row.get("switched_to_asgd", False) for row in clean["log"]] == [False, False, True, False]


def test_a_checkpoint_beyond_the_planned_epochs_is_discarded(finished, ptb_corpus, tmp_path):
    settings, _, _ = finished
    shorter = copy.deepcopy(settings)
    shorter["train"]["epochs"] = 1
    out = copy_run(finished, tmp_path)
    metrics, lines = run(shorter, ptb_corpus, out)
    clean, _ = run(shorter, ptb_corpus, tmp_path / "clean")
    assert comparable(metrics) == comparable(clean) and metrics["epochs_run"] == 1
    [warning] = warnings(lines)
    assert "is after epoch 2 but the run now plans 1 epochs: discarded, training afresh" in warning


def test_rerunning_a_finished_run_verifies_it_and_rewrites_the_same_numbers(finished, ptb_corpus, tmp_path):
    # what `snakemake -f` does: the outputs are deleted, work/last.pt stays
    settings, original, old = finished
    out = copy_run(finished, tmp_path)
    (out / "metrics.json").unlink()
    (out / "model.pt").unlink()
    metrics, lines = run(settings, ptb_corpus, out)
    # timings included: they are the logged ones, no epoch was trained again (but for the CPU of
    # the process that wrote the file, job_cpu_seconds)
    assert {k: v for k, v in metrics.items() if k != "job_cpu_seconds"} == \
        {k: v for k, v in old.items() if k != "job_cpu_seconds"}
    assert same_weights(out, original)
    assert lines == [f"resumed checkpoint {out / 'work' / 'last.pt'} after epoch 2 of 2 (same run identity, "
                     "validation loss reproduced); nothing left to train"]


def damage(path, how):
    if how == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(b"not a checkpoint\n" * 100)
    elif how == "old layout":  # the unversioned trainer state that the previous trainer wrote
        torch.save(torch.load(path, weights_only=False)["trainer"], path)


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage", "old layout"])
def test_an_unreadable_checkpoint_is_discarded_with_a_warning(finished, ptb_corpus, tmp_path, how):
    settings, original, old = finished
    out = copy_run(finished, tmp_path)
    damage(out / "work" / "last.pt", how)
    metrics, lines = run(settings, ptb_corpus, out)
    assert comparable(metrics) == comparable(old) and same_weights(out, original)
    [warning] = warnings(lines)
    assert warning.startswith(f"warning: checkpoint {out / 'work' / 'last.pt'} is ")
    assert warning.endswith(": discarded, training afresh") and "\n" not in warning
    assert len(epoch_lines(lines)) == 2
    again, lines = run(settings, ptb_corpus, out)  # the fresh run's own checkpoint: no second warning
    assert not warnings(lines) and comparable(again) == comparable(old)


def test_weights_that_do_not_reproduce_their_logged_loss_are_retrained(finished, ptb_corpus, tmp_path):
    # e.g. the model's forward pass changed and nobody bumped TRAINING_VERSION
    settings, original, old = finished
    out = copy_run(finished, tmp_path)
    last = out / "work" / "last.pt"
    blob = torch.load(last, weights_only=False)
    tampered = blob["trainer"]["average"] or blob["trainer"]["model"]
    key = "body.rnns.0.lstm.weight_ih_l0"  # (not the tied embedding: its twin key would overwrite it)
    tampered[key] = tampered[key] + 1e-3
    torch.save(blob, last)
    metrics, lines = run(settings, ptb_corpus, out)
    [warning] = warnings(lines)
    assert "does not reproduce its validation loss (its weights give validation loss" in warning
    assert comparable(metrics) == comparable(old) and same_weights(out, original)


def test_a_new_training_version_starts_afresh(finished, ptb_corpus, tmp_path, monkeypatch):
    settings, _, old = finished
    out = copy_run(finished, tmp_path)
    monkeypatch.setattr(trainer_module, "TRAINING_VERSION", trainer_module.TRAINING_VERSION + 1)
    metrics, lines = run(settings, ptb_corpus, out)
    [warning] = warnings(lines)
    version = trainer_module.TRAINING_VERSION
    assert f"was written under other settings: training_version {version - 1} -> {version}" in warning
    assert comparable(metrics) == comparable(old)


def test_no_checkpoint_means_no_message(ptb_corpus, tmp_path):
    state, reason = checkpoint.load(tmp_path / "absent.pt", identity(tiny_settings()), 2)
    assert state is None and reason == ""


def test_a_gpu_runs_rng_stream_follows_it_to_another_gpu(ptb_corpus, monkeypatch):
    # A resumed job may take another GPU slot than before (audit.device: the least-loaded GPU).
    # The dropout stream it continues must be the one its own GPU drew from, not the state the
    # new GPU's index had in the old process (there: only seeded, so epoch 1's masks again).
    # No GPU needed: the per-device generator states are stood in for.
    gens = {}

    def index(device):
        return torch.device(device).index or 0

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device="cuda": gens[index(device)].clone())
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [gens[i].clone() for i in sorted(gens)])
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, device="cuda": gens.__setitem__(index(device), s.clone()))
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: gens.update(enumerate(states)))
    settings = tiny_settings()
    gens.update({0: torch.tensor([0], dtype=torch.uint8), 1: torch.tensor([11], dtype=torch.uint8)})  # run on cuda:1
    old = trainer_module.Trainer(settings, str(ptb_corpus), log=lambda m: None)
    old.device = torch.device("cuda", 1)
    state = old.state_dict()
    gens.update({0: torch.tensor([0], dtype=torch.uint8), 1: torch.tensor([1], dtype=torch.uint8)})  # new process
    new = trainer_module.Trainer(settings, str(ptb_corpus), log=lambda m: None)
    new.device = torch.device("cuda", 0)
    new.load_state_dict(state)
    assert gens[0].tolist() == [11]


@pytest.mark.parametrize("other_cpu", [False, True])
def test_exact_loss_check_on_the_same_cpu_tolerance_on_another(finished, ptb_corpus, tmp_path, other_cpu):
    """A logged loss off by 1e-9 (relative) is a stranger's checkpoint on the CPU that wrote it,
    but last-bit noise on another CPU model (a SLURM resubmission to another node): kept there."""
    settings, original, old = finished
    out = copy_run(finished, tmp_path)
    last = out / "work" / "last.pt"
    blob = torch.load(last, weights_only=False)
    blob["trainer"]["log_rows"][-1]["valid_loss"] *= 1 + 1e-9
    if other_cpu:
        blob["trainer"]["host_cpu"] = "x86_64 Some Other CPU"
    torch.save(blob, last)
    metrics, lines = run(settings, ptb_corpus, out)
    if other_cpu:
        assert warnings(lines) == [] and same_weights(out, original)
    else:
        [warning] = warnings(lines)
        assert "does not reproduce its validation loss" in warning
