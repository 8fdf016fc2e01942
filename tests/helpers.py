"""Shared test helpers: tiny run settings for fast training tests, a copy of the workflow, golden
values from R."""

from pathlib import Path

from audit.config import check_study, run_settings, train_settings
# one list of the workflow's files for the tests and gpu-check's DAG step
from audit.gpucheck.common import copy_workflow  # noqa: F401 (re-exported)

REPO = Path(__file__).resolve().parent.parent

# the evaluate options of the tiny runs (evaluate_run's ``options``; no longer in the run settings)
TINY_EVALUATE = {"contexts": 300, "argmax": {"lp_budget": 20, "search_tokens": 40, "search_steps": 20},
                 "gradient_share": {"contexts": 300}}


# a tiny Transformer and the training it needs (tiny_settings(model=TRANSFORMER, **TRANSFORMER_TRAIN))
TRANSFORMER = {"body": "transformer", "n_heads": 2, "context_size": 20, "eval_stride": 7}
TRANSFORMER_TRAIN = {"optimizer": "adamw", "lr": 3e-3, "warmup_steps": 5, "wdecay": 0.01, "asgd": "none",
                     "variable_bptt": False, "alpha": 0.0, "beta": 0.0}


def minimal_study(**extra) -> dict:
    """The smallest valid study (one softmax arm, two seeds), with ``extra`` top-level keys."""
    return {"study": "t", "seeds": [1, 2], "heads": [{"name": "softmax"}], **extra}


def tiny_settings(head="softmax", seed=1, epochs=2, train_tokens=6000, model=None, entry=None, **train):
    """The train settings (``audit.config.train_settings``) of one tiny run; ``entry``: the whole
    heads entry (an outside head's ``import``), whose ``name`` then is the arm's."""
    head = entry["name"] if entry else head
    config = check_study({
        "study": "tiny", "seeds": [seed], "heads": [entry or {"name": head}],
        "data": {"max_tokens": {"train": train_tokens, "valid": 1000, "test": 1000}},
        "model": {"emb_size": 8, "hidden_size": 16, "n_layers": 2, "dropoute": 0.1, "dropouti": 0.1,
                  "dropouth": 0.1, "dropout": 0.1, "wdrop": 0.2, **(model or {})},
        "train": {"epochs": epochs, "batch_size": 10, "bptt": 20, "asgd": "nt", "nonmono": 1,
                  "threads": 1, "device": "cpu", **train},
    })
    return train_settings(run_settings(config, "ptb", head, seed))


# wall-clock and CPU-time fields differ between any two runs; everything else a run computes must be identical
TIMING = {"wall_seconds", "tokens_per_second", "train_seconds", "train_cpu_seconds", "job_cpu_seconds"}


def comparable(metrics: dict) -> dict:
    """A run's metrics without its timing fields (top level and per-epoch log rows)."""
    out = {k: v for k, v in metrics.items() if k not in TIMING}
    out["log"] = [{k: v for k, v in row.items() if k not in TIMING} for row in metrics["log"]]
    return out


def r_two_sample(case: str) -> tuple:
    """(a, b, row) of tests/fixtures/r_golden_tests.csv: R's t.test, wilcox.test and TOST on two
    literal samples (an independent reference for audit.stats.tests, which calls SciPy and
    statsmodels). Empty cells are NaN: R found the statistic undefined."""
    from pathlib import Path

    import numpy as np
    import pandas as pd

    table = pd.read_csv(Path(__file__).parent / "fixtures" / "r_golden_tests.csv").set_index("case")
    row = table.loc[case]
    a, b = (np.array([float(v) for v in row[k].split(";")]) for k in ("a", "b"))
    return a, b, row


def doc_example(page: str) -> str:
    """The code block under "## A complete example" of docs/<page> (docs/heads.md, docs/bodies.md)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / page).read_text()
    section = text.split("## A complete example", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def doc_blocks(page: str, language: str) -> list[str]:
    """Every fenced code block of ``language`` (python, yaml, sh, text) in docs/<page>, in order."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / page).read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def write_package(root, package: str, modules: dict[str, str]):
    """A package ``package`` under ``root`` holding ``modules`` {name: source}; returns root."""
    from pathlib import Path

    folder = Path(root) / package
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text("")
    for name, source in modules.items():
        (folder / f"{name}.py").write_text(source)
    return Path(root)


def lstm_softmax_formula(V, d, H, layers=3, last=None):
    """Closed form: tied embedding V d, decoder bias V, LSTM layer (i -> o): 4o(i + o) + 8o."""
    last = last or d
    sizes = [d] + [H] * (layers - 1) + [last]
    lstm = sum(4 * o * (i + o) + 8 * o for i, o in zip(sizes[:-1], sizes[1:]))
    return V * d + V + lstm
