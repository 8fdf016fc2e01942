"""The training of one (corpus, head, seed) run: AWD-LSTM training with SGD then averaged SGD.

Per epoch: variable-length BPTT with the learning rate scaled by the sequence length, AR and
TAR penalties, gradient clipping, then validation with the averaged weights once averaging has
started (NT-ASGD: non-monotone trigger; ET-ASGD: a fixed epoch), which also records the mean
cosine similarity of the head's inputs and, for a head with ``output_layer()``, the singular
values of the output weight in the epoch's log row (``audit.train.validation``; one read per pass;
a head without one gets ``output_spectrum_note`` in metrics.json). The best-validation weights
are kept. ``Trainer.state_dict`` holds everything the next epoch depends on (weights, optimiser,
average, RNG states, data position), so a run resumed from it ends with exactly the metrics of
an uninterrupted run on the CPU; ``Trainer.identity`` and ``Trainer.verify`` say whether a
checkpoint belongs to this run (``audit.train.checkpoint`` decides). A non-finite loss raises
``Divergence``. With ``train.cuda_graphs`` each step is replayed from a CUDA graph
(``audit.train.graphs``; ``step_body`` is what a graph records). The job around a run (resuming,
metrics.json, running out of GPU memory) is ``audit.train.run``.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from torch.optim.swa_utils import AveragedModel

from audit.config.training import TrainSettings
from audit.data.corpus import load as load_corpus
from audit.device import SYNC_EVERY, resolve_device
from audit.train.precision import apply_determinism, apply_precision, autocast_dtype, head_autocast_dtype
from audit.errors import AuditError
from audit.model.language_model import LanguageModel, ModelConfig, detach_hidden, perplexity
from audit.model.heads.base import mean_nll
from audit.train import checkpoint, graphs
from audit.train.schedule import warmup_cosine
from audit.train.steps import FastAverage, keep_freed_memory
from audit.train.validation import evaluate_loss, validation_pass

# Bump by hand whenever a change to audit/train or audit/model changes the numbers a run computes
# (the training math, the model's forward pass, the RNG draws): checkpoints written by an older
# version are then never resumed, so a run never mixes epochs of two versions of the code.
TRAINING_VERSION = 1
ADAMW_BETAS = (0.9, 0.95)  # the GPT-2/3 setting: beta2 0.95 keeps the second moment responsive


class Divergence(Exception):
    """The training or validation loss stopped being finite."""


def model_config(settings: dict, vocab_size: int) -> ModelConfig:
    """The ModelConfig of a run; a capacity-matched softmax is solved against its target."""
    def build(head, options, model):
        return ModelConfig.of(vocab_size=vocab_size, head=head, head_options=dict(options), **model)

    cfg = build(settings["head"], settings["options"], settings["model"])
    if "match" in settings:
        from audit.model.params import count_params, solve_matched_size

        match = settings["match"]
        cfg = solve_matched_size(count_params(build(match["head"], match["options"], match["model"])), cfg)
    return cfg


def batchify(data: torch.Tensor, batch_size: int, device: torch.device) -> torch.Tensor:
    """Cut a 1-D id stream into ``batch_size`` parallel streams: shape (N, batch_size)."""
    n = data.size(0) // batch_size
    if n < 2:
        raise AuditError(f"split of {data.size(0)} tokens is too short for batch size {batch_size}")
    return data[: n * batch_size].view(batch_size, n).t().contiguous().to(device)


def sequence_lengths(rng: np.random.Generator, bptt: int, variable: bool, delta: int) -> int:
    """AWD-LSTM's variable BPTT: base bptt (p=0.95) or bptt/2, then N(base, 5), at least 5."""
    if not variable:
        return bptt
    base = bptt if rng.random() < 0.95 else bptt / 2
    return int(min(max(5, int(rng.normal(base, 5))), bptt + delta))


def mean_sequence_length(bptt: int, variable: bool) -> float:
    """The mean of ``sequence_lengths``' base draw: bptt, or 0.95 bptt + 0.05 bptt / 2 when
    variable (rows per step, to size an epoch of about N steps: ``epoch_tokens``)."""
    return 0.95 * bptt + 0.05 * bptt / 2 if variable else bptt


class Trainer:
    """State of one run; ``state_dict``/``load_state_dict`` make it resumable."""

    def __init__(self, settings: dict, corpus_path: str, log=print):
        self.settings, self.t, self.log = settings, settings["train"], log
        # the typed settings: every x-default key read with the schema's default, in one place
        self.train = TrainSettings.of(self.t)
        torch.set_num_threads(self.t["threads"])
        # before resolve_device: cuBLAS reads CUBLAS_WORKSPACE_CONFIG when CUDA first makes its handle
        apply_determinism(self.train.deterministic)  # runs recorded before the key: False
        self.device = resolve_device(self.t["device"])
        precision = self.train.precision  # runs recorded before the key existed: fp32
        apply_precision(precision)
        self.autocast = autocast_dtype(precision, self.device)
        self.head_autocast = head_autocast_dtype(precision)   # bf16_head: the head alone, any device
        corpus = load_corpus(corpus_path)
        limits = settings.get("max_tokens") or {}
        self.vocab = corpus.vocab
        split = {s: corpus.split(s)[: limits.get(s) or None] for s in ("train", "valid")}
        self.train_data = batchify(split["train"], self.t["batch_size"], self.device)
        self.valid_data = batchify(split["valid"], self.t["eval_batch_size"], self.device)
        self.cfg = model_config(settings, len(corpus.vocab))
        torch.manual_seed(settings["seed"])  # one process per run: the seed fixes init and dropout
        self.model = LanguageModel(self.cfg).to(self.device)
        self.rng = np.random.default_rng(settings["seed"])  # sequence lengths
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]  # what clipping sees
        special = self.model.head.extra_param_groups()
        special_ids = {id(p) for group in special for p in group["params"]}
        main = [p for p in self.model.parameters() if p.requires_grad and id(p) not in special_ids]
        groups = [{"params": main, "lr": self.t["lr"]}] + special
        if self.train.optimizer == "adamw":  # the Transformer convention (audit.train.schedule)
            self.optimizer = torch.optim.AdamW(groups, lr=self.t["lr"], betas=ADAMW_BETAS, weight_decay=self.t["wdecay"])
        else:
            self.optimizer = torch.optim.SGD(groups, lr=self.t["lr"], weight_decay=self.t["wdecay"])
        self.base_lrs = [g["lr"] for g in self.optimizer.param_groups]
        self.step = 0  # optimiser steps taken: the adamw schedule's clock
        self.average: AveragedModel | None = None
        self.epoch, self.position, self.history, self.log_rows = 0, 0, [], []
        self.best = {"valid_loss": math.inf, "epoch": 0, "state": None}
        self.written_on = None  # host_cpu of a loaded checkpoint
        # train.cuda_graphs (x-default false: runs recorded before the key trained eagerly)
        self.graphs = None
        graphs.check(self.train, self.device)
        if self.train.cuda_graphs:
            self.graphs = graphs.GraphedSteps(self.step_body, self.set_lr, self.t["bptt"] + self.t["max_seq_len_delta"],
                                              self.t["batch_size"], self.device, watched=self.kept_tensors)

    def kept_tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor a training step reads or writes that outlives the step, by name: the
        model's parameters and the optimiser's state (what a CUDA graph keeps by address)."""
        named = {f"parameter {name}": p for name, p in self.model.named_parameters()}
        names = {id(p): name for name, p in self.model.named_parameters()}
        for p, state in self.optimizer.state.items():
            named |= {f"optimiser state {key} of {names.get(id(p), '?')}": value
                      for key, value in state.items() if isinstance(value, torch.Tensor)}
        return named

    # ----- checkpointing -------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "epoch": self.epoch, "position": self.position, "history": self.history, "step": self.step,
            "log_rows": self.log_rows, "best": self.best,
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "average": self.average.state_dict() if self.average is not None else None,
            "torch_rng": torch.get_rng_state(),
            # the run's own GPU only: a resumed job may take another slot (audit.device), and its
            # stream must follow the run there, not stay with the device index
            "cuda_rng": torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None,
            "numpy_rng": self.rng.bit_generator.state,
            "host_cpu": checkpoint.host_cpu(),  # how strictly verify() may compare (same CPU: exactly)
        }

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.position, self.history = state["epoch"], state["position"], state["history"]
        self.log_rows, self.best = state["log_rows"], state["best"]
        self.step = state.get("step", 0)  # checkpoints from before the adamw schedule: SGD, unused
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if state["average"] is not None:
            self.start_averaging()
            self.average.load_state_dict(state["average"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] is not None:
            torch.cuda.set_rng_state(state["cuda_rng"], self.device)
        self.rng.bit_generator.state = state["numpy_rng"]
        self.written_on = state.get("host_cpu")

    def identity(self) -> dict:
        """What this run's trajectory depends on (``checkpoint.run_identity``)."""
        data = checkpoint.data_digest(self.vocab, self.train_data, self.valid_data)
        return checkpoint.run_identity(self.settings, device_type=self.device.type, data=data,
                                       training_version=TRAINING_VERSION)

    def verify(self) -> str:
        """Why a loaded state cannot be trusted, or "" when it can.

        Its evaluation model must reproduce the validation loss its last epoch logged, which
        catches weights that do not belong to their log and a change to the model code that
        nobody recorded in ``TRAINING_VERSION``. Exact on the CPU model that wrote the checkpoint,
        where runs are bitwise reproducible; within a relative 1e-6 on a GPU, or on another CPU
        model (a job resubmitted by SLURM may land on one whose last bits differ: an exact check
        would discard its checkpoint at every resubmission, and a run longer than one time limit
        would never finish). Evaluation draws no random numbers, so verifying does not move the
        trajectory.
        """
        if not self.log_rows:
            return "it records no epoch"
        logged = self.log_rows[-1]["valid_loss"]
        now = evaluate_loss(self.eval_model(), self.valid_data, self.t["bptt"])
        exact = self.device.type == "cpu" and self.written_on == checkpoint.host_cpu()
        same = now == logged if exact else math.isclose(now, logged, rel_tol=1e-6)
        return "" if same else f"its weights give validation loss {now!r} where its log says {logged!r}"

    def start_averaging(self) -> None:
        # equal-weight running mean: ASGD with t0=0, lambda=0 (torch's AveragedModel, no host reads on a GPU)
        self.average = FastAverage(self.model)

    # ----- one epoch -----------------------------------------------------------------------
    def train_epoch(self) -> dict:
        """One epoch's training steps; the epoch's log row (``epoch_steps``'s)."""
        steps = self.epoch_steps()
        while True:
            try:
                next(steps)
            except StopIteration as end:
                return end.value

    def epoch_steps(self):
        """The training steps of one epoch, yielding after each (so that several runs of one
        process take turns: ``audit.train.group``); returns the epoch's log row."""
        t, model, data = self.t, self.model, self.train_data
        model.train()
        rows = data.size(0) - 1
        budget = rows if t["epoch_tokens"] is None else math.ceil(t["epoch_tokens"] / t["batch_size"])
        hidden = model.init_hidden(t["batch_size"])
        keep_freed_memory()  # big per-step tensors stay in the heap: no page faults every step
        # The loss sum stays on the device (float64, the same additions in the same order as a
        # Python float, so the same numbers); the host reads it once per epoch. On a GPU the
        # finiteness check is read every SYNC_EVERY steps from the second block on, remembering
        # the first bad row, and the last check shares the end-of-epoch read: an epoch of
        # N >= SYNC_EVERY steps syncs at most N / SYNC_EVERY times. On the CPU reading is free,
        # so it stays per step and a diverged run stops where it did.
        check_every = 1 if self.device.type == "cpu" else SYNC_EVERY
        total_loss = torch.zeros((), dtype=torch.float64, device=self.device)
        first_bad = torch.full((), -1, dtype=torch.int64, device=self.device)
        total_tokens, done, steps, start, cpu = 0, 0, 0, time.perf_counter(), time.process_time()
        replays = self.graphs.replays if self.graphs is not None else 0
        if t["epoch_tokens"] is None:
            self.position = 0  # a full pass per epoch, from the start of the split
        while done < budget:
            if self.position >= rows - 1:
                self.position, hidden = 0, model.init_hidden(t["batch_size"])
            seq_len = min(sequence_lengths(self.rng, t["bptt"], t["variable_bptt"], t["max_seq_len_delta"]),
                          rows - self.position, budget - done)
            seq_len = max(seq_len, 2)  # TAR needs two time steps; rows - position >= 2 here
            words = data[self.position:self.position + seq_len]
            targets = data[self.position + 1:self.position + 1 + seq_len]
            if self.graphs is not None:  # the whole step replayed from its length's graph
                raw_loss, loss, hidden = self.graphs.step(words, targets, hidden)
            else:
                self.set_lr(seq_len)
                raw_loss, loss, hidden = self.forward_loss(words, targets, detach_hidden(hidden))
            if check_every == 1:
                if not torch.isfinite(loss):
                    raise Divergence(f"non-finite training loss at epoch {self.epoch + 1}, row {self.position}")
            else:
                first_bad = torch.where((first_bad < 0) & ~torch.isfinite(loss), self.position, first_bad)
            if self.graphs is None:
                self.update(loss)
            if self.average is not None:
                self.average.update_parameters(model)
            total_loss += raw_loss.detach().double() * targets.numel()
            total_tokens += targets.numel()
            self.position += seq_len
            done += seq_len
            steps += 1
            self.step += 1
            if check_every > 1 and steps % check_every == 0 and steps > check_every and done < budget:
                self.raise_if_diverged(first_bad)
            yield
        # one transfer for both: the loss sum (float64 holds any row index exactly)
        total_loss, bad_row = torch.stack((total_loss, first_bad.double())).tolist()
        self.raise_if_diverged(int(bad_row))
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        row = {"train_loss": total_loss / total_tokens, "train_seconds": seconds, "train_cpu_seconds": cpu,
               "tokens": total_tokens, "tokens_per_second": total_tokens / seconds}
        if self.graphs is not None:  # how many of the epoch's steps a graph replayed (the rest: eager warm-ups)
            row["graph_steps"] = self.graphs.replays - replays
        return row

    def set_lr(self, seq_len: int) -> None:
        """The learning rate of the next step: SGD's scaled by its length, AdamW's scheduled."""
        t = self.t
        adamw = self.train.optimizer == "adamw"
        factor = warmup_cosine(self.step, self.train.warmup_steps, self.total_steps()) if adamw else None
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            # SGD: shorter sequences take smaller steps (base * seq_len / bptt, in that order)
            group["lr"] = base * factor if adamw else base * seq_len / t["bptt"]

    def forward_loss(self, words: torch.Tensor, targets: torch.Tensor, hidden) -> tuple:
        """The training forward of one chunk: (raw_loss, loss with AR and TAR, new hidden)."""
        t = self.t
        # cache_enabled=False: a CUDA graph must not keep autocast's casts between steps (no
        # number changes: the cache only saves recasting a weight within one forward)
        with torch.autocast(self.device.type, dtype=self.autocast, enabled=self.autocast is not None,
                            cache_enabled=self.graphs is None):
            log_probs, hidden, dropped, raw = self.model(words, hidden, targets, self.head_autocast)
        log_probs, dropped, raw = log_probs.float(), dropped.float(), raw.float()
        raw_loss = mean_nll(log_probs, targets)
        loss = raw_loss + t["alpha"] * dropped.pow(2).mean()           # AR
        loss = loss + t["beta"] * (raw[1:] - raw[:-1]).pow(2).mean()   # TAR
        return raw_loss, loss, hidden

    def update(self, loss: torch.Tensor) -> None:
        """Backward, clipping and the optimiser's step (gradients set to None first)."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.trainable, self.t["clip"])
        self.optimizer.step()

    def step_body(self, words: torch.Tensor, targets: torch.Tensor, hidden) -> tuple:
        """One whole training step, as a CUDA graph records it: (raw_loss, loss, new hidden),
        the losses detached and the hidden state cut from the autograd graph."""
        raw_loss, loss, hidden = self.forward_loss(words, targets, detach_hidden(hidden))
        self.update(loss)
        return raw_loss.detach(), loss.detach(), detach_hidden(hidden)

    def total_steps(self) -> int:
        """Planned optimiser steps of the whole run at the fixed chunk length ``bptt``."""
        rows = self.train_data.size(0) - 1
        budget = rows if self.t["epoch_tokens"] is None else math.ceil(self.t["epoch_tokens"] / self.t["batch_size"])
        return self.t["epochs"] * math.ceil(budget / self.t["bptt"])

    def raise_if_diverged(self, first_bad: torch.Tensor | int) -> None:
        """Divergence at the first row whose training loss was not finite (-1: none yet)."""
        row = int(first_bad)
        if row >= 0:
            raise Divergence(f"non-finite training loss at epoch {self.epoch + 1}, row {row}")

    def eval_model(self) -> torch.nn.Module:
        return self.average.module if self.average is not None else self.model

    def run_epoch(self) -> dict:
        return self.end_epoch(self.train_epoch())

    def end_epoch(self, row: dict) -> dict:
        """After an epoch's training steps: validation, the best state, ASGD's trigger, the log."""
        self.epoch += 1
        evaluated = self.eval_model()
        # the output weight's spectrum (saturation) for heads with a linear output layer; an
        # outside head without one (output_layer() None) logs the input anisotropy alone
        layer = evaluated.head.output_layer()
        valid = validation_pass(evaluated, self.valid_data, self.t["bptt"], layer[0] if layer is not None else None)
        valid_loss = valid["valid_loss"]
        if not math.isfinite(valid_loss):
            raise Divergence(f"non-finite validation loss at epoch {self.epoch}")
        row.update(epoch=self.epoch, valid_loss=valid_loss, averaging=self.average is not None,
                   train_ppl=perplexity(row["train_loss"]), valid_ppl=perplexity(valid_loss),
                   # saturation and anisotropy over training (Godey et al. 2024; audit.report.saturation):
                   # 6 significant digits keep a 1000-epoch log of d values in a few MB of JSON
                   valid_input_cosine=valid["input_cosine"])
        if "output_singular_values" in valid:   # absent for a head without output_layer(): not measured
            row["output_singular_values"] = [float(f"{v:.6g}") for v in valid["output_singular_values"]]
        if valid_loss < self.best["valid_loss"]:
            state = {k: v.detach().cpu().clone() for k, v in self.eval_model().state_dict().items()}
            self.best = {"valid_loss": valid_loss, "epoch": self.epoch, "state": state}
        if self.average is None and self.should_switch(valid_loss):
            self.start_averaging()
            row["switched_to_asgd"] = True
        if self.average is None:
            self.history.append(valid_loss)
        self.log_rows.append(row)
        return row

    def should_switch(self, valid_loss: float) -> bool:
        t = self.t
        if t["asgd"] == "et":
            return self.epoch >= t["switch_epoch"]
        if t["asgd"] == "nt":  # as coded by the reference: best loss *excluding* the last n epochs
            n = t["nonmono"]
            return len(self.history) > n and valid_loss > min(self.history[:-n])
        return False
