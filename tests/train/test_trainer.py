import json
import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from audit.train.trainer import Trainer, batchify, sequence_lengths, train
from helpers import comparable, tiny_settings


def weights(run_dir):
    return torch.load(run_dir / "model.pt", weights_only=False)["state"]


def test_batchify_and_variable_bptt():
    data = torch.arange(23)
    batched = batchify(data, 4, torch.device("cpu"))
    assert batched.shape == (5, 4) and batched[:, 1].tolist() == [5, 6, 7, 8, 9]
    rng = np.random.default_rng(0)
    lengths = [sequence_lengths(rng, 70, True, 40) for _ in range(2000)]
    assert min(lengths) >= 5 and max(lengths) <= 110
    assert 0.02 < np.mean(np.array(lengths) < 50) < 0.09  # the bptt/2 branch, p = 0.05
    assert sequence_lengths(rng, 70, False, 40) == 70


def test_same_seed_gives_identical_metrics_and_weights(ptb_corpus, tmp_path):
    a = train(tiny_settings(seed=3), ptb_corpus, tmp_path / "a", log=lambda m: None)
    b = train(tiny_settings(seed=3), ptb_corpus, tmp_path / "b", log=lambda m: None)
    c = train(tiny_settings(seed=4), ptb_corpus, tmp_path / "c", log=lambda m: None)
    assert a["status"] == "ok" and comparable(a) == comparable(b)
    assert all(torch.equal(x, y) for x, y in zip(weights(tmp_path / "a").values(), weights(tmp_path / "b").values()))
    assert a["valid_ppl"] != c["valid_ppl"]
    assert a["log"][-1]["averaging"] or len(a["log"]) == 2
    assert json.loads((tmp_path / "a" / "metrics.json").read_text())["valid_ppl"] == a["valid_ppl"]
    # the job's own CPU covers its training steps (audit.bench.study reads both)
    assert a["job_cpu_seconds"] >= a["train_cpu_seconds"] > 0


def test_killed_run_resumes_to_exactly_the_uninterrupted_metrics(ptb_corpus, tmp_path):
    settings = tiny_settings(seed=5, epochs=4)
    reference = train(settings, ptb_corpus, tmp_path / "ref", log=lambda m: None)
    run_dir = tmp_path / "killed"
    cmd = [sys.executable, "-m", "audit", "train", "--settings", json.dumps(settings),
           "--corpus", str(ptb_corpus), "--out-dir", str(run_dir)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = run_dir / "work" / "last.pt"
    deadline = time.time() + 120
    while not checkpoint.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)  # mid-way through epoch 2 (or later), never after the end
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not (run_dir / "metrics.json").exists()
    resumed = train(settings, ptb_corpus, run_dir, log=lambda m: None)
    assert comparable(resumed) == comparable(reference)
    assert all(torch.equal(x, y) for x, y in zip(weights(run_dir).values(), weights(tmp_path / "ref").values()))


def test_divergence_is_a_failed_run_with_its_reason(ptb_corpus, tmp_path):
    metrics = train(tiny_settings(lr=1e30, clip=1e30), ptb_corpus, tmp_path / "d", log=lambda m: None)
    assert metrics["status"] == "failed"
    assert metrics["error"].startswith("Divergence: non-finite training loss at epoch 1")
    assert (tmp_path / "d" / "model.pt").is_file()
    assert json.loads((tmp_path / "d" / "metrics.json").read_text())["status"] == "failed"


def test_lr_is_scaled_by_sequence_length(ptb_corpus, monkeypatch):
    from audit.train import trainer as train_module

    monkeypatch.setattr(train_module, "sequence_lengths", lambda *args: 5)
    trainer = train_module.Trainer(tiny_settings(lr=8.0, epoch_tokens=500), str(ptb_corpus), log=lambda m: None)
    trainer.train_epoch()
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(8.0 * 5 / 20)


def test_averaging_starts_on_the_trigger_and_evaluation_uses_the_average(ptb_corpus):
    from audit.train.trainer import Trainer

    trainer = Trainer(tiny_settings(epochs=3, asgd="et", switch_epoch=1), str(ptb_corpus), log=lambda m: None)
    first = trainer.run_epoch()
    assert first["switched_to_asgd"] and trainer.average is not None and trainer.history == []
    second = trainer.run_epoch()
    assert second["averaging"] and trainer.eval_model() is trainer.average.module
    current = dict(trainer.model.named_parameters())["body.rnns.0.lstm.weight_ih_l0"]
    averaged = dict(trainer.average.module.named_parameters())["body.rnns.0.lstm.weight_ih_l0"]
    assert not torch.equal(current, averaged)


def test_nt_trigger_compares_with_the_best_loss_excluding_the_last_n():
    from audit.train.trainer import Trainer

    trainer = Trainer.__new__(Trainer)
    trainer.t = {"asgd": "nt", "nonmono": 2}
    trainer.history = [5.0, 4.0, 4.5, 4.6]
    assert trainer.should_switch(4.1)       # worse than min(5.0, 4.0) = 4.0
    assert not trainer.should_switch(3.9)
    trainer.history = [5.0, 4.0]            # not more than n epochs of history yet
    assert not trainer.should_switch(9.0)


def test_a_crash_of_train_ends_its_log_with_one_error_line(tmp_path):
    # settings without a train section: a KeyError inside the trainer, not an AuditError
    proc = subprocess.run([sys.executable, "-m", "audit", "train", "--settings", json.dumps({"seed": 1}),
                           "--corpus", str(tmp_path / "none.pt"), "--out-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr  # the traceback stays in the log for whoever debugs it
    assert proc.stderr.splitlines()[-1] == "error: train crashed: KeyError: 'train'"


def _direct_numbers(model, data, bptt):
    """The head's inputs at every predicted position, collected chunk by chunk (no shortcut),
    and the output weight: the numbers validation_pass must reproduce by numpy directly."""
    model.eval()
    hidden, inputs = model.init_hidden(data.size(1)), []
    with torch.no_grad():
        for i in range(0, data.size(0) - 1, bptt):
            seq_len = min(bptt, data.size(0) - 1 - i)
            _, hidden, dropped, _ = model(data[i:i + seq_len], hidden)
            inputs.append(dropped.reshape(-1, dropped.size(-1)).double().numpy())
    h = np.concatenate(inputs)
    u = h / np.linalg.norm(h, axis=1, keepdims=True)
    cos = u @ u.T
    n = len(u)
    return (cos.sum() - np.trace(cos)) / (n * (n - 1)), np.linalg.svd(
        model.head.embedding.weight.detach().double().numpy(), compute_uv=False)


@pytest.mark.parametrize("head", ["softmax", "mos"])
def test_epoch_log_records_input_anisotropy_and_output_spectrum(head, ptb_corpus):
    from audit.train.trainer import Trainer, evaluate_loss, validation_pass

    trainer = Trainer(tiny_settings(head=head, epochs=2, asgd="et", switch_epoch=1), str(ptb_corpus), log=lambda m: None)
    rows = [trainer.run_epoch(), trainer.run_epoch()]   # the second evaluates the averaged weights
    model = trainer.eval_model()
    cosine, singular = _direct_numbers(model, trainer.valid_data, trainer.t["bptt"])
    row = rows[-1]
    assert row["valid_input_cosine"] == pytest.approx(cosine, rel=1e-9)
    assert -1 < cosine < 1 and cosine != 0
    d = model.head.embedding.weight.shape[1]
    assert len(row["output_singular_values"]) == d
    # 6 significant digits in the log; the pass itself agrees with numpy's SVD to 1e-9
    assert row["output_singular_values"] == pytest.approx(singular, rel=1e-5)
    full = validation_pass(model, trainer.valid_data, trainer.t["bptt"], model.head.embedding.weight)
    assert full["output_singular_values"] == pytest.approx(singular, rel=1e-9)
    assert full["valid_loss"] == evaluate_loss(model, trainer.valid_data, trainer.t["bptt"]) == row["valid_loss"]
    # the first epoch's spectrum is that of the weights it evaluated (SGD, not yet averaged)
    assert rows[0]["output_singular_values"] != row["output_singular_values"]


def test_anisotropy_of_parallel_and_opposite_inputs():
    # u, u, -u: pairs (+1, -1, -1) -> mean -1/3, whatever the lengths; through a stub model
    from audit.train.trainer import validation_pass

    class Stub(torch.nn.Module):
        def init_hidden(self, batch):
            return None

        def forward(self, words, hidden):
            h = torch.tensor([[1.0, 2.0], [2.0, 4.0], [-3.0, -6.0]]).view(1, 3, 2)[:, : words.size(1)]
            return torch.zeros(1, words.size(1), 4).log_softmax(-1), hidden, h, h

    out = validation_pass(Stub(), torch.zeros(2, 3, dtype=torch.long), bptt=1,
                          output_weight=torch.tensor([[3.0, 0.0], [0.0, 4.0], [0.0, 0.0]]))
    assert out["input_cosine"] == pytest.approx(-1 / 3)
    assert out["output_singular_values"] == pytest.approx([4.0, 3.0])
    assert out["valid_loss"] == pytest.approx(np.log(4))


def test_adamw_follows_warmup_then_cosine(ptb_corpus):
    from helpers import TRANSFORMER, TRANSFORMER_TRAIN

    from audit.train.schedule import warmup_cosine

    trainer = Trainer(tiny_settings(epochs=2, model=TRANSFORMER, **TRANSFORMER_TRAIN), str(ptb_corpus),
                      log=lambda m: None)
    assert isinstance(trainer.optimizer, torch.optim.AdamW)
    first = trainer.run_epoch()
    # 6000 tokens in 10 streams: 599 rows, 30 chunks of 20 per epoch
    assert trainer.step == trainer.total_steps() // 2 == 30
    second = trainer.run_epoch()
    assert trainer.step == 60
    lr = trainer.optimizer.param_groups[0]["lr"]
    assert lr == pytest.approx(3e-3 * warmup_cosine(59, 5, 60)) and lr < 3e-3 * 0.01
    assert second["valid_loss"] < first["valid_loss"] < math.log(len(trainer.vocab))  # it learns
    assert trainer.average is None  # no ASGD with adamw
