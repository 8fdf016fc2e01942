"""A constructed pretrained suite for the checkpoint trajectory tests: ``checkpoints.csv`` and the
runs table beside it, in the format ``audit.pretrained.table`` writes them, with planted values
(no model is built or measured)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from audit.stats.io import load_config

STEPS = [1000, 2000, 3000, 4000]
SEEDS = range(5)
# planted test perplexity per step: fast leads up to step 2000 and is overtaken from step 3000
PPL = {"fast": [100.0, 90.0, 85.0, 84.0], "slow": [120.0, 95.0, 80.0, 75.0]}


def write_suite(root: Path, seed: int = 0) -> Path:
    """``root``/pretrained/checkpoints.csv (one row per model, seed and step) and runs.csv (the last
    step's rows, with ``late_loss_slope`` over the last two steps and ``design``); returns runs.csv.
    ``unargmaxable`` is measured at the last step only, as under ``pretrained.argmax: final``."""
    rng = np.random.default_rng(seed)
    rows = []
    for head, curve in PPL.items():
        for s in SEEDS:
            offset = rng.normal(0, 0.5)
            for step, ppl in zip(STEPS, curve):
                rows.append({"corpus": "ptb", "head": head, "seed": s, "status": "ok", "error": "",
                             "test_ppl": ppl + offset + rng.normal(0, 0.3), "vocab_size": 512, "emb_size": 16,
                             "gradient_norm_share": 0.01 + rng.normal(0, 0.002),
                             "unargmaxable": float(rng.integers(0, 2)) if step == STEPS[-1] else np.nan,
                             "step": step, "revision": f"step{step}", "suite": "constructed"})
    checkpoints = pd.DataFrame(rows)
    folder = root / "pretrained"
    folder.mkdir(parents=True)
    checkpoints.to_csv(folder / "checkpoints.csv", index=False)
    final = checkpoints[checkpoints["step"] == STEPS[-1]].drop(columns=["suite"])
    late = checkpoints[checkpoints["step"] >= STEPS[-2]].groupby(["head", "seed"])["test_ppl"].agg(
        lambda v: float(np.log(v.iloc[-1]) - np.log(v.iloc[0]))).rename("late_loss_slope").reset_index()
    runs = final.merge(late, on=["head", "seed"]).assign(design="fixed: constructed suite, 5 seeds")
    runs.to_csv(folder / "runs.csv", index=False)
    return folder / "runs.csv"


def suite_config(root: Path, runs: Path, share: float | None = None) -> dict:
    """A study naming the suite's runs table as evidence, with one claim the checkpoints can trace
    on each kind (a comparison, a one-sample t) and two they cannot (a column measured over the last
    checkpoints, one measured at the last checkpoint only); read by ``load_config``."""
    stats = {"bootstrap_resamples": 200, "min_seeds": 3}
    if share is not None:
        stats["trajectory"] = {"held_share": share}
    config = {
        "study": "suite",
        "comparisons": [{"family": "sizes", "pairs": [["fast", "slow"]], "metrics": ["test_ppl"]}],
        "claims": [
            {"id": "fast-lowers-ppl", "source": "planted", "statement": "fast has the lower test perplexity",
             "comparison": {"head_a": "fast", "head_b": "slow", "metric": "test_ppl"}, "expect": "lower"},
            {"id": "small-share", "source": "planted", "statement": "fast passes back under 5% of the gradient",
             "one_sample": {"head": "fast", "metric": "gradient_norm_share", "bound": 0.05, "test": "t"},
             "expect": "below"},
            {"id": "late-rise", "source": "planted", "statement": "slow's loss rises late",
             "one_sample": {"head": "slow", "metric": "late_loss_slope", "bound": 0.0, "test": "t"}, "expect": "above"},
            {"id": "rarely-unargmaxable", "source": "planted", "statement": "fast rarely has unargmaxable tokens",
             "one_sample": {"head": "fast", "metric": "unargmaxable", "bound": 0.5, "test": "binomial", "threshold": 0},
             "expect": "below"},
        ],
        "stats": stats,
        "evidence": [{"name": "constructed", "runs": str(runs), "description": "a constructed suite"}],
    }
    path = root / "study.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return load_config(path)
