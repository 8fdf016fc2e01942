"""audit/plan/memory.py: the analytic GPU memory model against the simulated device's peak bytes, the
plan of the paper configs and the refusal of an oversubscribed study."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from audit.plan import memory
from audit.config import load_study, run_settings
from audit.errors import AuditError
from helpers import tiny_settings
from support.fake_cuda import simulated_cuda
from support.gpu_budget import HEADS

REPO = Path(__file__).resolve().parents[2]
SIZES = {"small": {"batch_size": 10, "bptt": 10}, "larger": {"batch_size": 20, "bptt": 20},
         # a validation chunk of 40 x 10 tokens outweighs the 2 x 15-token step: the chunk is the peak
         "validating": {"batch_size": 2, "bptt": 10, "eval_batch_size": 40}}


@pytest.fixture(autouse=True)
def gpu_locks(tmp_path, monkeypatch):
    monkeypatch.setenv("AUDIT_GPU_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr("audit.device._HELD", None)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("head", HEADS)
def test_model_is_within_a_factor_of_the_simulated_peak(head, size, ptb_corpus):
    """Peak live device bytes of two training epochs (SGD, then averaging), each with its
    validation pass, measured by the simulated device's tracker, against train_bytes."""
    from audit.train import trainer as T

    settings = tiny_settings(head=head, epochs=2, train_tokens=3000, asgd="et", switch_epoch=1,
                             device="cuda", max_seq_len_delta=5, **SIZES[size])
    with simulated_cuda() as sim:
        trainer = T.Trainer(settings, str(ptb_corpus), log=lambda m: None)
        sim.reset_peak()
        trainer.run_epoch()   # switches to averaging at its end (asgd et, switch_epoch 1)
        assert trainer.average is not None
        trainer.run_epoch()
        measured_train = sim.peak
    predicted = memory.train_bytes(settings)
    ratio = predicted / measured_train
    assert 1 / memory.MEASURED_FACTOR <= ratio <= memory.MEASURED_FACTOR, (predicted, measured_train)


K = 50  # a small vocabulary, so that the body's activations, not the head's, fill the step
TRANSFORMERS = {  # name: (model overrides, batch size); the context is the training window
    "learned": ({}, 10),
    "attention-dropout": ({"dropout": 0.1}, 10),   # the CPU kernels then keep the B x h x T^2 scores
    "rotary": ({"positions": "rotary"}, 10),
    "wider": ({"emb_size": 64, "hidden_size": 256, "n_layers": 3, "context_size": 32}, 20),
}


@pytest.fixture(scope="module")
def small_vocab_corpus(ptb_corpus, tmp_path_factory):
    from audit.data.corpus import load, restrict_vocab, save

    path = tmp_path_factory.mktemp("ptb_small") / f"corpus_v{K}.pt"
    save(restrict_vocab(load(ptb_corpus), K), path)
    return path


def _transformer_peak(name: str, corpus) -> tuple[dict, int]:
    """Settings of a tiny Transformer run (AdamW, a fixed window) and the simulated device's peak
    over its training epoch."""
    from audit.train import trainer as T

    overrides, batch = TRANSFORMERS[name]
    model = {"body": "transformer", "emb_size": 32, "hidden_size": 128, "n_layers": 2, "n_heads": 4,
             "context_size": 64, "positions": "learned", "dropout": 0.0, "dropouti": 0.0, "dropoute": 0.0,
             "dropouth": 0.0, "wdrop": 0.0, **overrides}
    settings = tiny_settings(epochs=1, train_tokens=3000, asgd="none", optimizer="adamw", lr=0.002, clip=1.0,
                             wdecay=0.01, alpha=0.0, beta=0.0, device="cuda", bptt=model["context_size"],
                             variable_bptt=False, batch_size=batch, model=model)
    settings["vocab_size"] = K   # as run_settings records data.vocab_size
    with simulated_cuda() as sim:
        trainer = T.Trainer(settings, str(corpus), log=lambda m: None)
        sim.reset_peak()
        trainer.train_epoch()
        return settings, sim.peak


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_transformer_model_is_within_a_factor_of_the_simulated_peak(name, small_vocab_corpus):
    """A pre-LN Transformer's training step (Korthikanti et al.'s saved tensors per block, the
    scores when attention runs on the math path) against the simulated device's peak. The
    simulated device runs the CPU's kernels: math-path attention exactly when dropout is on."""
    settings, measured = _transformer_peak(name, small_vocab_corpus)
    predicted = memory.train_bytes(settings, math_attention=settings["model"]["dropout"] > 0)
    ratio = predicted / measured
    assert 1 / memory.MEASURED_FACTOR <= ratio <= memory.MEASURED_FACTOR, (predicted, measured)


def test_attention_scores_cost_what_the_model_says(small_vocab_corpus):
    """What attention dropout adds (the math path's B x heads x T^2 scores: 4 x 64 per token per
    block here, more than the block's other activations) within 25% of what the simulated device
    measured; a model without the scores would miss it whole."""
    fused, fused_peak = _transformer_peak("learned", small_vocab_corpus)
    math, math_peak = _transformer_peak("attention-dropout", small_vocab_corpus)
    predicted = memory.train_bytes(math, math_attention=True) - memory.train_bytes(fused, math_attention=False)
    assert 0.8 <= predicted / (math_peak - fused_peak) <= 1.25, (predicted, math_peak - fused_peak)


def test_transformer_paper_plan():
    """configs/transformer-paper.yaml: MoS's training step holds 2.5 x 15 floats per vocabulary
    entry (its bf16 figure) for 32 x 256 tokens, 12.3 GB of the 15.2 GB: four runs fit in 90% of
    80 GB, five do not (the config takes the default, one)."""
    config = load_study(REPO / "configs" / "transformer-paper.yaml")
    rows = {(r["arm"], r["job"]): r for r in memory.plan(config)}
    head = 32 * 256 * (2.5 * 15) * 10_000 * 4 / 1e9
    assert head < rows["mos", "train"]["gb"] < head + 3 and rows["mos", "train"]["runs_per_gpu"] == 4
    memory.check_plan(config, "configs/transformer-paper.yaml")
    config["train"]["runs_per_gpu"] = 5
    with pytest.raises(AuditError, match="train job of mos .* set train.runs_per_gpu <= 4"):
        memory.check_plan(config, "configs/transformer-paper.yaml")


def test_the_larger_of_a_step_and_a_validation_chunk_is_the_training_peak():
    """paper-ptb's MoS (K = 15, V = 10,000, 21,500,620 parameters, LSTM layers 960/960/620): a
    step of 12 x 110 tokens at 14 floats per LSTM unit and 2.5 x 15 per word outweighs a
    validation chunk of 10 x 70 tokens at 4 floats per unit and 4 x 15 + 1 per word (the full
    mixture); at eval_batch_size 40 the chunk does, and the plan is that chunk's. The H200 of
    2026-11-26 measured 3.21 GB for this arm where the memory step validated at 10 x 110 tokens:
    the same sum gives 3.17 GB there."""
    from audit.plan.resources import tokens

    settings = run_settings(load_study(REPO / "configs" / "paper-ptb.yaml"), "ptb", "mos", 1)
    settings["train"]["device"] = "cuda"
    units = 960 + 960 + 620
    fixed = 5 * 21_500_620 * 4 + (tokens(settings, "train") + tokens(settings, "valid")) * 8
    step = 12 * 110 * (14 * units + 2.5 * 15 * 10_000) * 4
    chunk = 10 * 70 * (4 * units + 61 * 10_000) * 4
    assert chunk < step and memory.train_bytes(settings) == pytest.approx(fixed + step)
    settings["train"]["eval_batch_size"] = 40
    assert memory.train_bytes(settings) == pytest.approx(fixed + 4 * chunk)
    # the memory step as it ran on 2026-11-26: validation at the longest training sequence
    settings["train"].update(eval_batch_size=10, bptt=110, variable_bptt=False)
    assert memory.train_bytes(settings) / 1e9 == pytest.approx(3.17, abs=0.005)


def _paper_wt2(**train):
    config = load_study(REPO / "configs" / "paper-wt2.yaml")
    config["train"].update(device="cuda", **train)
    return config


def test_oversubscribed_plan_is_refused_in_one_line():
    """paper-wt2's evaluation: 6 x 33,278^2 float64 while the GPU's eigensolver runs (EIGH_COPIES,
    measured on an H200: 53.4 GB) + 0.6 GB context + model and test split = 53.9 GB; 2 per GPU
    need 108 GB > 90% of 80 GB; on a 141 GB H200 two fit."""
    rows = {(r["arm"], r["job"]): r for r in memory.plan(_paper_wt2())}
    expected = (6 * 33_278 ** 2 * 8 + 0.6e9) / 1e9
    assert expected < rows["softmax", "evaluate"]["gb"] < expected + 0.2
    with pytest.raises(AuditError) as err:
        memory.check_plan(_paper_wt2(runs_per_gpu=2), "configs/paper-wt2.yaml")
    message = str(err.value)
    assert "\n" not in message and message.startswith("configs/paper-wt2.yaml: evaluate job of")
    assert "2 per GPU" in message and "72.0 GB" in message and "runs_per_gpu <= 1" in message
    memory.check_plan(_paper_wt2(runs_per_gpu=1), "configs/paper-wt2.yaml")
    memory.check_plan(_paper_wt2(runs_per_gpu=2, gpu_memory_gb=141), "configs/paper-wt2.yaml")  # an H200
    cpu = load_study(REPO / "configs" / "paper-wt2.yaml")
    cpu["train"].update(device="cpu", runs_per_gpu=16)
    memory.check_plan(cpu, "cpu")  # no GPU job: nothing to plan


def test_snakemake_refuses_the_oversubscribed_study(tmp_path):
    config = yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text())
    config.setdefault("train", {}).update(device="cuda", runs_per_gpu=8, gpu_memory_gb=0.5)
    path = tmp_path / "over.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", str(path)],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode != 0
    assert f"{path}: train job of" in proc.stdout + proc.stderr or f"{path}: evaluate job of" in proc.stdout + proc.stderr


def test_plan_notes_an_outside_body(tmp_path, monkeypatch, capsys):
    """A body by import path (the docs' GRU) is planned by audit.plan.bodycost's stated rule, and the
    printed plan ends with the note that says so."""
    from helpers import doc_example, write_package

    write_package(tmp_path, "planned_bodies", {"gru": doc_example("bodies.md")})
    monkeypatch.syspath_prepend(str(tmp_path))
    config = yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text())
    config.setdefault("model", {})["body"] = "planned_bodies.gru:GRUBody"
    path = tmp_path / "outside.yaml"
    path.write_text(yaml.safe_dump(config))
    assert memory.main([str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("note: model.body 'planned_bodies.gru:GRUBody' is not built in: costed conservatively")
    assert sum(line.startswith("note:") for line in lines) == 1
