"""Constructed studies for the trajectory tests: run folders whose per-epoch logs follow planted
curves (no training), and the runs table those runs' metrics.json would give."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from audit.stats.io import load_config, load_runs

EPOCH_TOKENS = 150_000


def fast_and_worse(epoch: int) -> float:
    """Learns fast and has settled by epoch 4 at 110: better than ``slow_and_better`` up to epoch 5
    (111), worse from epoch 6 (108) on."""
    return 110 + 150 * math.exp(-1.5 * epoch)


def slow_and_better(epoch: int) -> float:
    """Starts far behind (1,131 at epoch 1), quarters its gap to 107 each epoch."""
    return 107 + 4096 * 4.0 ** -epoch


def parallel(offset: float):
    """A curve that learns as ``base`` does, ``offset`` ppl above it at every epoch."""
    return lambda epoch: base(epoch) + offset


def base(epoch: int) -> float:
    return 100 + 300 * math.exp(-0.7 * epoch)


def still_gaining(epoch: int) -> float:
    """``base`` minus 1.5 ppl per epoch: it keeps gaining on ``base`` to the last epoch."""
    return base(epoch) - 1.5 * epoch


def late_gain(epoch: int) -> float:
    """``base`` up to epoch 2, then 3 ppl below it at every epoch: a verdict that changes once, at
    epoch 3 (450,000 tokens), and then runs parallel to ``base``."""
    return base(epoch) - (3.0 if epoch >= 3 else 0.0)


def write_study(root: Path, curves: dict, seeds=range(1, 7), epochs: int = 8, noise: float = 0.3,
                seed: int = 0) -> tuple[pd.DataFrame, list[str]]:
    """One run folder per (head, seed) under ``root``/ptb/<head>/<seed> with a metrics.json whose
    log follows ``curves[head](epoch)`` plus a per-run offset and per-epoch noise (both N(0, noise),
    from ``default_rng(seed)``); returns the runs table (read back by ``load_runs``: its
    valid_ppl and train_ppl are those of each run's first best validation epoch, as the trainer
    reports them) and the run folders."""
    rng = np.random.default_rng(seed)
    rows, dirs = [], []
    for head, curve in curves.items():
        for s in seeds:
            offset = rng.normal(0, noise)
            log = [{"epoch": e, "tokens": EPOCH_TOKENS, "valid_ppl": curve(e) + offset + rng.normal(0, noise),
                    "train_ppl": curve(e) + 10 + offset, "tokens_per_second": 1000.0} for e in range(1, epochs + 1)]
            best = min(log, key=lambda r: r["valid_ppl"])   # min keeps the first of equal values
            folder = root / "ptb" / head / str(s)
            folder.mkdir(parents=True)
            (folder / "metrics.json").write_text(json.dumps(
                {"corpus": "ptb", "head": head, "seed": s, "status": "ok", "log": log}))
            dirs.append(str(folder))
            rows.append({"study": "t", "corpus": "ptb", "head": head, "seed": str(s), "status": "ok",
                         "valid_ppl": best["valid_ppl"], "train_ppl": best["train_ppl"],
                         "test_ppl": best["valid_ppl"] * 1.01, "press_rank": 60.0 + rng.normal(), "n_params": 1000})
    path = root / "runs.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return load_runs(path), dirs


def study_config(root: Path, head_a: str, head_b: str, expect: str = "lower") -> dict:
    """A study config with one comparison family on test_ppl and press_rank, a claim on each of
    them (only the first traceable) and a correlation claim on press_rank; read by ``load_config``."""
    config = {
        "study": "t",
        "comparisons": [{"family": "pair", "pairs": [[head_a, head_b]], "metrics": ["test_ppl", "press_rank"],
                         "lower_is_better": {"test_ppl": True, "press_rank": False}}],
        "correlations": [{"name": "rank-vs-ppl", "x": "press_rank", "y": "test_ppl"}],
        "claims": [
            {"id": "a-lowers-ppl", "source": "planted", "statement": f"{head_a} lowers perplexity",
             "comparison": {"head_a": head_a, "head_b": head_b, "metric": "test_ppl"}, "expect": expect},
            {"id": "a-raises-rank", "source": "planted", "statement": f"{head_a} raises the rank",
             "comparison": {"head_a": head_a, "head_b": head_b, "metric": "press_rank"}, "expect": "higher"},
            {"id": "rank-tracks-ppl", "source": "planted", "statement": "rank tracks perplexity",
             "correlation": {"name": "rank-vs-ppl"}, "expect": "negative"},
        ],
        "stats": {"bootstrap_resamples": 200, "min_seeds": 3},
    }
    path = root / "study.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return load_config(path)
