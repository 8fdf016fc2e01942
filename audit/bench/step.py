"""Our training step against a plain ``nn.LSTM`` loop of the same shape (``python -m audit bench step``).

The CPU anchor of issue 12: pytorch/examples' word_language_model (2 x LSTM-200, tied, dropout
0.2, batch 20, bptt 35, SGD lr 20, clip 0.25) trains one PTB epoch in 131-153 s on the
development machine. "ours" is the real ``Trainer.train_epoch`` with the same settings
(``wdrop: 0``, fixed BPTT, ``alpha = beta = 0``, no averaging, no weight decay); "plain" is the
examples' model and loop written out here (``nn.LSTM(200, 200, 2, dropout=0.2)``, a tied
``nn.Linear`` decoder, ``CrossEntropyLoss``, the manual SGD update). Both read the same PTB
batches. Timed windows of ``--steps`` steps alternate between the two (so a change in machine
load hits both alike) after one untimed warm-up window each; each figure is the median window.
Per step it prints wall ms and the process's user and system CPU ms (system time counts the
page faults of memory handed back to the OS and taken again), and the wall time extrapolated
to one PTB epoch (929,589 training tokens = 1,328 steps).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn as nn

from audit.errors import AuditError

PTB_TRAIN_TOKENS = 929_589
ANCHOR = {"emb": 200, "hidden": 200, "layers": 2, "dropout": 0.2, "batch": 20, "bptt": 35, "lr": 20.0, "clip": 0.25}


def anchor_settings(threads: int, device: str, steps: int, size: dict = ANCHOR) -> dict:
    from audit.bench import picks
    from audit.config import check_study, run_settings

    head = picks.baseline()  # the plain softmax, the plain model's tied decoder
    config = check_study({
        "study": "bench-step", "seeds": [1], "heads": [{"name": head}],
        "model": {"emb_size": size["emb"], "hidden_size": size["hidden"], "n_layers": size["layers"],
                  "dropoute": 0.0, "dropouti": size["dropout"], "dropouth": size["dropout"],
                  "dropout": size["dropout"], "wdrop": 0.0},
        "train": {"epochs": 1, "batch_size": size["batch"], "bptt": size["bptt"], "variable_bptt": False,
                  "alpha": 0.0, "beta": 0.0, "asgd": "none", "lr": size["lr"], "clip": size["clip"],
                  "wdecay": 0.0, "threads": threads, "device": device,
                  "epoch_tokens": steps * size["batch"] * size["bptt"]},
    })
    return run_settings(config, "ptb", head, 1)


class PlainModel(nn.Module):
    """pytorch/examples word_language_model RNNModel (LSTM, tied)."""

    def __init__(self, vocab: int, size: dict):
        super().__init__()
        self.drop = nn.Dropout(size["dropout"])
        self.encoder = nn.Embedding(vocab, size["emb"])
        self.rnn = nn.LSTM(size["emb"], size["hidden"], size["layers"], dropout=size["dropout"])
        self.decoder = nn.Linear(size["hidden"], vocab)
        self.decoder.weight = self.encoder.weight
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, words, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(words)), hidden)
        return self.decoder(self.drop(output)).view(-1, self.decoder.out_features), hidden


class PlainLoop:
    """The examples' training loop over the same batchified split."""

    def __init__(self, data: torch.Tensor, vocab: int, size: dict, device: torch.device):
        torch.manual_seed(1)
        self.data, self.size = data, size
        self.model = PlainModel(vocab, size).to(device)
        self.criterion = nn.CrossEntropyLoss()
        self.position = 0
        self.hidden = self.init_hidden()

    def init_hidden(self):
        w = self.model.encoder.weight
        shape = (self.size["layers"], self.data.size(1), self.size["hidden"])
        return (w.new_zeros(shape), w.new_zeros(shape))

    def run(self, steps: int) -> None:
        self.model.train()
        bptt, lr = self.size["bptt"], self.size["lr"]
        for _ in range(steps):
            if self.position + bptt + 1 > self.data.size(0):
                self.position, self.hidden = 0, self.init_hidden()
            words = self.data[self.position:self.position + bptt]
            targets = self.data[self.position + 1:self.position + 1 + bptt].reshape(-1)
            self.hidden = tuple(h.detach() for h in self.hidden)
            self.model.zero_grad()
            output, self.hidden = self.model(words, self.hidden)
            loss = self.criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.size["clip"])
            for p in self.model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            self.position += bptt


def _window(run, steps: int, sync) -> tuple[float, float, float]:
    """(wall, user, system) seconds per step of one window."""
    sync()
    t0, c0 = time.perf_counter(), os.times()
    run()
    sync()
    t1, c1 = time.perf_counter(), os.times()
    return ((t1 - t0) / steps, (c1.user - c0.user) / steps, (c1.system - c0.system) / steps)


def bench(corpus_path: str, steps: int = 50, reps: int = 5, threads: int = 2, device: str = "cpu",
          size: dict = ANCHOR) -> dict:
    """Per-step (wall, user, system) seconds of each window, for "ours" and "plain"."""
    from audit.train.trainer import Trainer

    settings = anchor_settings(threads, device, steps, size)
    ours = Trainer(settings, corpus_path, log=lambda msg: None)
    torch.set_num_threads(threads)
    plain = PlainLoop(ours.train_data, len(ours.vocab), size, ours.device)
    sync = torch.cuda.synchronize if ours.device.type == "cuda" else (lambda: None)
    arms = {"ours": lambda: ours.train_epoch(), "plain": lambda: plain.run(steps)}
    times = {name: [] for name in arms}
    for rep in range(reps + 1):
        for name, run in arms.items():
            figures = _window(run, steps, sync)
            if rep:  # the first window of each warms up (allocator, thread pool)
                times[name].append(figures)
    return times


def format_table(times: dict, size: dict = ANCHOR) -> str:
    epoch_steps = PTB_TRAIN_TOKENS / (size["batch"] * size["bptt"])
    lines = [f"{'loop':6s} {'wall ms/step':>13s} {'user ms':>8s} {'sys ms':>7s} {'s/PTB epoch':>12s} {'x plain':>8s}"]
    plain = statistics.median(w for w, _, _ in times["plain"])
    for name, rows in times.items():
        wall = statistics.median(w for w, _, _ in rows)
        user = statistics.median(u for _, u, _ in rows)
        system = statistics.median(s for _, _, s in rows)
        lines.append(f"{name:6s} {1000 * wall:13.2f} {1000 * user:8.2f} {1000 * system:7.2f} "
                     f"{wall * epoch_steps:12.1f} {wall / plain:8.3f}")
    return "\n".join(lines)


def _corpus(path: str | None) -> str:
    if path:
        return path
    from audit.data.corpus import prepare, save

    mirror = os.environ.get("AUDIT_DATA_MIRROR")
    if not mirror or not (Path(mirror) / "ptb" / "train.txt").is_file():
        raise AuditError("bench step: give --corpus (results/data/ptb/corpus.pt) or set AUDIT_DATA_MIRROR")
    out = Path(tempfile.mkdtemp(prefix="audit-bench-")) / "corpus.pt"
    save(prepare(Path(mirror) / "ptb"), out)
    return str(out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit bench step", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", help="PTB corpus cache (default: prepared from $AUDIT_DATA_MIRROR)")
    parser.add_argument("--steps", type=int, default=50, help="steps per timed window")
    parser.add_argument("--reps", type=int, default=5, help="timed windows per loop (median)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--tiny", action="store_true", help="a tiny model (CI): 2 x LSTM-16, bptt 5")
    args = parser.parse_args(argv)
    size = dict(ANCHOR, emb=16, hidden=16, bptt=5) if args.tiny else ANCHOR
    times = bench(_corpus(args.corpus), args.steps, args.reps, args.threads, args.device, size)
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu, {args.threads} threads"
    print(f"{size['layers']} x LSTM-{size['hidden']}, tied, batch {size['batch']}, bptt {size['bptt']}, "
          f"SGD lr {size['lr']}, clip {size['clip']} on {where}; median of {args.reps} windows of {args.steps} steps")
    print(format_table(times, size))
    return 0
