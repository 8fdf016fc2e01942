"""Gather a suite's job folders into its tables: one row per checkpoint, and a runs table.

- ``checkpoints.csv``: one row per (model, seed, checkpoint), every eval.json field the runs
  table knows plus ``step``, ``revision``, ``suite``, ``anisotropy``, the head's spectrum
  summaries: the time axis.
- ``runs.csv``: the final checkpoint (``suite.final_revision``) of every (model, seed), in the
  format of a trained study's ``reports/<study>/runs.csv`` (``head`` the model's name, ``seed``
  the suite's seed, ``corpus`` the text's name, ``design`` naming the suite, its sizes and seeds:
  ``suite.describe``), with the saturation measures over the last ``late`` checkpoints
  (``saturation``): the table a study names under ``evidence:``.
- ``sentences.npz`` (the final checkpoint's NLL per sentence, ``audit.stats.multiboot.save``)
  and ``wordsim_pairs.csv``, as ``python -m audit collect`` writes them for trained runs;
- ``tables/baselines.csv``: the guard's unigram of the text (``baselines``), where a study that
  names the runs table as evidence looks for it.

``revision`` and ``suite`` are text: the runs table carries them only where the statistics'
reader accepts them as text (``audit.stats.io.TEXT_COLUMNS``), so the table loads either way;
``step`` (numeric) and ``design`` always name the checkpoint and the suite.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from audit.errors import AuditError
from audit.files import write_table
from audit.pretrained import suite
from audit.stats import io, multiboot
from audit.stats.runs_table import BASE_COLUMNS, EXTRA_COLUMNS, PAIR_COLUMNS

OWN = ["step", "revision", "suite", "ppl_window", "ppl_stride", "gradient_floor", "unigram_ppl_text", "anisotropy",
       "head_entropy_rank",
       "head_entropy_share", "head_top_share", "argmax_job_seconds", "job_cpu_seconds"]
LATE = ["late_loss_slope", "late_loss_rise", "late_head_entropy_change", "late_anisotropy_change", "late_steps"]
STEPS_UNIT = 10_000   # late_loss_slope is in nats per this many steps


def job_dir(results: str | Path, job: suite.Job) -> Path:
    """The folder of one job: ``<results>/pretrained/<model>/<seed>/<revision>``."""
    return Path(results) / "pretrained" / job.model / str(job.seed) / job.revision


def checkpoint_rows(section: dict, results: str | Path, corpus: str) -> pd.DataFrame:
    """One row per job of the suite, in the order of ``suite.jobs``; a job without eval.json is
    one line naming it and the command that makes it."""
    rows = []
    for job in suite.jobs(section):
        path = job_dir(results, job) / "eval.json"
        if not path.is_file():
            raise AuditError(f"missing {path}: run its job (snakemake {path})")
        result = json.loads(path.read_text())
        row = {k: v for k, v in result.items() if k in BASE_COLUMNS + EXTRA_COLUMNS + OWN}
        row.update(corpus=corpus, head=job.model, seed=job.seed, status=result.get("status", "ok"), error="")
        row.update({f"wordsim_{b}": rho for b, rho in sorted(result.get("wordsim", {}).items())})
        rows.append(row)
    table = pd.DataFrame(rows)
    known = [c for c in BASE_COLUMNS + EXTRA_COLUMNS + OWN if c in table]
    return table[known + sorted(c for c in table if c.startswith("wordsim_"))]


def _slope(steps: np.ndarray, values: np.ndarray) -> float:
    """Least-squares slope of values on steps, per ``STEPS_UNIT`` steps."""
    centred = steps - steps.mean()
    return float((centred * (values - values.mean())).sum() / (centred * centred).sum() * STEPS_UNIT)


def saturation(checkpoints: pd.DataFrame, late: int) -> pd.DataFrame:
    """Per (head, seed), over its last ``late`` checkpoints by step: ``late_loss_slope`` (nats of
    test loss per 10,000 steps, least squares: > 0 is a late rise, the saturation of Godey et al.
    2024 as this audit reads it), ``late_loss_rise`` (last minus first of the window), the change
    of the head's entropy share and of the anisotropy over the window, and ``late_steps``
    (the window's span in steps)."""
    out = []
    for (head, seed), rows in checkpoints.groupby(["head", "seed"], sort=False):
        window = rows.sort_values("step").tail(late)
        steps, loss = window["step"].to_numpy(float), np.log(window["test_ppl"].to_numpy(float))
        first, last = window.iloc[0], window.iloc[-1]
        out.append({"head": head, "seed": seed, "late_loss_slope": _slope(steps, loss),
                    "late_loss_rise": float(loss[-1] - loss[0]),
                    "late_head_entropy_change": float(last["head_entropy_share"] - first["head_entropy_share"]),
                    "late_anisotropy_change": float(last["anisotropy"] - first["anisotropy"]),
                    "late_steps": float(steps[-1] - steps[0])})
    return pd.DataFrame(out, columns=["head", "seed"] + LATE)


def runs_table(section: dict, checkpoints: pd.DataFrame) -> pd.DataFrame:
    """The final checkpoint's rows with the saturation columns and ``design`` (module docstring)."""
    final = checkpoints[checkpoints["revision"] == suite.final_revision(section)]
    runs = final.merge(saturation(checkpoints, section["late"]), on=["head", "seed"], how="left")
    runs["design"] = suite.describe(section)
    drop = [c for c in ("revision", "suite") if c not in io.TEXT_COLUMNS]
    return runs.drop(columns=drop).sort_values(["corpus", "head", "seed"], kind="stable").reset_index(drop=True)


def final_extras(section: dict, results: str | Path, corpus: str) -> tuple[multiboot.Sentences, pd.DataFrame]:
    """The final checkpoint's sentences (keyed (corpus, head, seed)) and word pairs."""
    nll, tokens, pairs = {}, {}, []
    for job in suite.jobs(section):
        if job.revision != suite.final_revision(section):
            continue
        folder = job_dir(results, job)
        with np.load(folder / "sentences.npz", allow_pickle=False) as blob:
            key = (corpus, job.model, str(job.seed))
            nll[key], tokens[key] = blob["nll"], blob["tokens"]
        found = pd.read_csv(folder / "wordsim_pairs.csv")
        if len(found):
            pairs.append(found.assign(corpus=corpus, head=job.model, seed=job.seed)[PAIR_COLUMNS])
    return multiboot.Sentences(nll, tokens), pd.concat(pairs) if pairs else pd.DataFrame(columns=PAIR_COLUMNS)


def baselines(runs: pd.DataFrame) -> pd.DataFrame:
    """``tables/baselines.csv`` beside the runs table (``audit.stats.sources.sibling_baselines``
    reads it for the guard): per (corpus, vocabulary size) the in-sample unigram of the text under
    the suite's tokenizer, ``n_test`` = the scored tokens + 1 as the guard matches it. One row
    only where every run of that vocabulary scored the same tokens (one tokenizer)."""
    rows = []
    for (corpus, vocab), group in runs.groupby(["corpus", "vocab_size"]):
        if group["test_tokens"].nunique() == 1 and group["unigram_ppl_text"].nunique() == 1:
            rows.append({"corpus": corpus, "vocab_size": int(vocab), "n_test": int(group["test_tokens"].iloc[0]) + 1,
                         "unigram_ppl": float(group["unigram_ppl_text"].iloc[0])})
    return pd.DataFrame(rows, columns=["corpus", "vocab_size", "n_test", "unigram_ppl"])


def collect(section: dict, results: str | Path, out: str | Path, corpus: str) -> pd.DataFrame:
    """Write checkpoints.csv, runs.csv, sentences.npz and wordsim_pairs.csv into ``out``;
    returns the runs table."""
    out = Path(out)
    checkpoints = checkpoint_rows(section, results, corpus)
    runs = runs_table(section, checkpoints)
    write_table(checkpoints, out / "checkpoints.csv")
    write_table(runs, out / "runs.csv")
    write_table(baselines(runs), out / "tables" / "baselines.csv")
    sentences, pairs = final_extras(section, results, corpus)
    multiboot.save(sentences, out / "sentences.npz")
    write_table(pairs, out / "wordsim_pairs.csv")
    return runs
