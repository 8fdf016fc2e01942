"""What every gpu-check step shares: the device it runs on, small studies, corpora, results.

A step runs in its own process (``python -m audit gpu-check --step NAME``), so each one starts
with a fresh CUDA context and peak-memory counter, a hang or crash in one cannot take the others
down, and the parent that plans the time never holds the GPU itself.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from audit.files import atomic_write_text

# built-in heads checked on CUDA; softmax_matched is the softmax class sized by the config
HEADS = ["softmax", "sigsoftmax", "gss", "plif", "plif_frozen", "mos", "moc", "mos_uniform", "mixtape"]
BODIES = ["awd_lstm", "transformer"]
# small, fast options: the kernels are the same at any size
TINY_OPTIONS = {"gss": {"c": -1.5, "k": 2.5}, "plif": {"knots": 1000}, "plif_frozen": {"knots": 1000},
                "mos": {"experts": 3, "dropoutl": 0.0}, "moc": {"experts": 3, "dropoutl": 0.0},
                "mos_uniform": {"experts": 3, "dropoutl": 0.0}, "mixtape": {"gate_embedding_size": 8}}
NO_DROPOUT = {"dropoute": 0.0, "dropouti": 0.0, "dropouth": 0.0, "dropout": 0.0, "wdrop": 0.0}
REPO = Path(__file__).resolve().parents[2]


def every_arm(deadline: float, result, verb: str):
    """Yield (body, head) for every built-in head on both bodies while time lasts; the first one
    left out is noted and the result marked incomplete."""
    for body in BODIES:
        for head in HEADS:
            if time.time() > deadline:
                result.note(f"out of time before {body}/{head}: not {verb}")
                result.data["incomplete"] = True
                return
            yield body, head


def device_info() -> dict:
    """Name and memory of CUDA device 0, and whether it is the simulated device of the tests.

    The simulated device (tests/support/fake_cuda.py) names itself "Simulated CUDA device (CPU)":
    every figure measured on it is labelled simulated and no timing from it is a GPU figure.
    """
    import torch

    if not torch.cuda.is_available():
        return {"cuda": False, "name": "", "simulated": False, "total_gib": 0.0}
    name = torch.cuda.get_device_name(0)
    props = torch.cuda.get_device_properties(0)
    return {"cuda": True, "name": name, "simulated": name.startswith("Simulated"),
            "total_gib": props.total_memory / 2 ** 30}


def tiny_settings(head: str, body: str, device: str, vocab: int = 500, **train) -> dict:
    """Train settings of one small run of ``head`` on ``body`` (no dropout: CPU and CUDA draw
    different random masks from one seed, so only a dropout-free run can be compared)."""
    from audit.config import check_study, run_settings, train_settings

    model = {"emb_size": 16, "hidden_size": 32, "n_layers": 2, **NO_DROPOUT}
    if body == "transformer":
        model.update(body="transformer", hidden_size=64, n_heads=2, positions="learned", context_size=16,
                     eval_stride=8)
    config = check_study({
        "study": "gpu-check", "seeds": [1], "heads": [{"name": head, "options": TINY_OPTIONS.get(head, {})}],
        "data": {"max_tokens": {"train": None, "valid": None, "test": None}},
        "model": model,
        "train": {"epochs": 2, "batch_size": 8, "bptt": 16, "asgd": "et", "switch_epoch": 1, "threads": 1,
                  "device": device,
                  # the Transformer trains with AdamW and no averaging (config.py refuses ASGD there)
                  **({"optimizer": "adamw", "lr": 0.003, "wdecay": 0.01, "asgd": "none", "variable_bptt": False}
                     if body == "transformer" else {}), **train},
    })
    settings = train_settings(run_settings(config, "ptb", head, 1))
    return settings


def random_corpus(path: Path, vocab: int, train: int, valid: int, test: int, seed: int = 0) -> str:
    """A corpus cache of seeded uniformly random ids with the given vocabulary and split sizes
    (speed and memory do not depend on which words)."""
    import numpy as np
    import torch

    from audit.data.corpus import Corpus, save

    rng = np.random.default_rng(seed)
    ids = [torch.from_numpy(rng.integers(0, vocab, n, dtype=np.int64)) for n in (train, valid, test)]
    save(Corpus(vocab=[f"w{i}" for i in range(vocab)], train=ids[0], valid=ids[1], test=ids[2]), path)
    return os.fspath(path)


class Result:
    """One step's outcome: pass/fail checks with their limits, figures, notes; written as JSON."""

    def __init__(self, name: str, simulated: bool):
        self.data = {"step": name, "simulated": simulated, "checks": [], "figures": {}, "notes": [],
                     "started": time.time()}

    def check(self, name: str, value, limit: str, ok: bool, **extra) -> bool:
        self.data["checks"].append({"name": name, "value": value, "limit": limit, "ok": bool(ok), **extra})
        return bool(ok)

    def figure(self, key: str, value) -> None:
        self.data["figures"][key] = value

    def note(self, text: str) -> None:
        self.data["notes"].append(text)

    def write(self, path: Path) -> None:
        self.data["seconds"] = round(time.time() - self.data.pop("started", time.time()), 2)
        atomic_write_text(json.dumps(self.data, indent=1, default=float) + "\n", path)
