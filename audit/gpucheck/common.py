"""What every gpu-check step shares: the device it runs on, small studies, corpora, results.

A step runs in its own process (``python -m audit gpu-check --step NAME``), so each one starts
with a fresh CUDA context and peak-memory counter, a hang or crash in one cannot take the others
down, and the parent that plans the time never holds the GPU itself.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from audit.files import atomic_write_text

# small, fast options by option name (the kernels are the same at any size): a knot table of 1000,
# Mixtape's gates 8 wide, and a mixture over a latent layer (option dropoutl) of 3 components
# without latent dropout (Mixtape's 4 components are fixed); GSS at LK's published shape
SMALL_OPTIONS = {"knots": 1000, "gate_embedding_size": 8}
LATENT_OPTIONS = {"experts": 3, "dropoutl": 0.0}
NO_DROPOUT = {"dropoute": 0.0, "dropouti": 0.0, "dropouth": 0.0, "dropout": 0.0, "wdrop": 0.0}
REPO = Path(__file__).resolve().parents[2]
# what Snakemake needs of the repository to run a study in another folder (the package is installed)
WORKFLOW_FILES = ("Snakefile", "rules", "configs", "profiles", "captions")


def run_in_session(cmd: list[str], timeout: float, **popen) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, timeout=...)`` in a session of its own, killed whole at the timeout.

    ``subprocess.run`` kills only the process it started: Snakemake's jobs (and a step's
    Snakemake) would live on, write into a folder being removed (``rmtree``: "Directory not
    empty") and take the cores of the next step. Raises ``TimeoutExpired`` once all are killed,
    carrying what the process wrote to pipes (``output``, ``stderr``): how far it got.
    """
    with subprocess.Popen(cmd, start_new_session=True, **popen) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def __getattr__(name: str):
    """``HEADS``: the built-in heads checked on CUDA, every one a one-arm study trains (the
    capacity-matched softmax is the softmax class sized by the config); ``BODIES``: every
    built-in body. Both in registry order, read from the registries at first use."""
    from audit.bench import picks

    if name == "HEADS":
        return picks.standalone_heads()
    if name == "BODIES":
        return picks.bodies()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def tiny_options(head: str) -> dict:
    """The small options ``head`` runs with in the checks (module comment above)."""
    from audit.bench import picks
    from audit.model.heads import head_class

    defaults = head_class(head).defaults or {}
    options = {**picks.shape_options(head), **{k: v for k, v in SMALL_OPTIONS.items() if k in defaults}}
    return {**options, **LATENT_OPTIONS} if "dropoutl" in defaults else options


def every_arm(deadline: float, result, verb: str):
    """Yield (body, head) for every built-in head on both bodies while time lasts; the first one
    left out is noted and the result marked incomplete."""
    from audit.bench import picks

    for body in picks.bodies():
        for head in picks.standalone_heads():
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
    from audit.bench import picks
    from audit.config import check_study, run_settings, train_settings

    model = {"emb_size": 16, "hidden_size": 32, "n_layers": 2, **NO_DROPOUT}
    other = body != picks.default_body()  # the Transformer: the default body is the AWD-LSTM
    if other:
        model.update(body=body, hidden_size=64, n_heads=2, positions="learned", context_size=16,
                     eval_stride=8)
    config = check_study({
        "study": "gpu-check", "seeds": [1], "heads": [{"name": head, "options": tiny_options(head)}],
        "data": {"max_tokens": {"train": None, "valid": None, "test": None}},
        "model": model,
        "train": {"epochs": 2, "batch_size": 8, "bptt": 16, "asgd": "et", "switch_epoch": 1, "threads": 1,
                  "device": device,
                  # the Transformer trains with AdamW and no averaging (audit/config/arms.py refuses ASGD there)
                  **({"optimizer": "adamw", "lr": 0.003, "wdecay": 0.01, "asgd": "none", "variable_bptt": False}
                     if other else {}), **train},
    })
    settings = train_settings(run_settings(config, "ptb", head, 1))
    return settings


def max_param_gap(a: dict, b: dict) -> float:
    """max |a - b| over the floating-point tensors of two state dicts, over max(1, max |b|)."""
    import torch

    gap, scale = 0.0, 1.0
    for (name, x), (_, y) in zip(sorted(a.items()), sorted(b.items())):
        if not torch.is_floating_point(x):
            continue
        x, y = x.detach().double().cpu(), y.detach().double().cpu()
        gap, scale = max(gap, (x - y).abs().max().item()), max(scale, y.abs().max().item())
    return gap / scale


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


def copy_workflow(dest: Path) -> Path:
    """A copy of the workflow (``WORKFLOW_FILES``) in folder ``dest`` (made if missing), returned."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, dest / name)
    return dest


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
