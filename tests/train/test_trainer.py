"""audit/train/trainer.py: batches and sequence lengths, the learning-rate scaling, averaging and its
trigger, the epoch log's anisotropy and output spectrum, AdamW's schedule."""

import math

import numpy as np
import pytest
import torch

from audit.train.trainer import Trainer, batchify, sequence_lengths
from helpers import tiny_settings


def test_batchify_and_variable_bptt():
    data = torch.arange(23)
    batched = batchify(data, 4, torch.device("cpu"))
    assert batched.shape == (5, 4) and batched[:, 1].tolist() == [5, 6, 7, 8, 9]
    rng = np.random.default_rng(0)
    lengths = [sequence_lengths(rng, 70, True, 40) for _ in range(2000)]
    assert min(lengths) >= 5 and max(lengths) <= 110
    assert 0.02 < np.mean(np.array(lengths) < 50) < 0.09  # the bptt/2 branch, p = 0.05
    assert sequence_lengths(rng, 70, False, 40) == 70


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
    from audit.train.trainer import Trainer
    from audit.train.validation import evaluate_loss, validation_pass

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
