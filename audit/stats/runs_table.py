"""Gather every run's ``metrics.json`` and ``eval.json`` into the runs table.

The runs table (``reports/<study>/runs.csv``) is the contract between training and statistics:
one row per (corpus, head, seed), failed runs included with their reason. Its columns are
documented in docs/runs-table.md. The per-pair word-similarity rows of all runs are gathered into a
second table for the paired-bootstrap statistics, and their per-sentence test NLL sums
(``sentences.npz``) into one file keyed by run for the multi-bootstrap (``audit.stats.multiboot``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from audit.errors import AuditError
from audit.files import atomic_write_text
from audit.schema import schema_defaults
from audit.stats import multiboot
from audit.stats.io import STATUSES

BASE_COLUMNS = [
    "study", "corpus", "head", "seed", "status", "error", "n_params", "wall_seconds",
    "tokens_per_second", "train_ppl", "valid_ppl", "test_ppl", "press_rank",
    "erank_1e-3", "erank_1e-4", "erank_1e-5", "entropy_rank",
]
EXTRA_COLUMNS = [  # present when the head has an element-wise transform f of the logits
    "f_logits_press_rank", "f_logits_erank_1e-3", "f_logits_erank_1e-4", "f_logits_erank_1e-5",
    "f_logits_entropy_rank", "jacobian_fraction_below", "contexts", "test_tokens", "epochs_run", "best_epoch",
    "vocab_size", "emb_size", "tokens_trained", "asgd_epoch", "valid_gain_last",
    # the measurements since 2021 (audit/evaluate/debate.py); empty where a head has none
    "unargmaxable", "argmax_argmaxable", "argmax_unresolved", "argmax_seconds", "argmax_note",
    # ... the same exact test over Grivas et al.'s box [-100, 100]^d (the body's box above)
    "unargmaxable_box100", "argmax_unresolved_box100", "argmax_seconds_box100",
    # ... of the unresolved, the tokens a bound of their LP stopped (issue 49), per box
    "argmax_lp_unresolved", "argmax_lp_unresolved_box100", "gradient_share",
    "gradient_norm_share", "gradient_share_tokens", "gradient_share_note", "hidden_gap_dim",
    "hidden_gap_ratio", "hidden_gap_expected", "hidden_gap_miss", "hidden_gap_residual", "hidden_gap_ok",
    # why a measurement is missing: "not measured: ..." where the head or body does not support it
    "hidden_gap_note", "f_logits_note", "output_spectrum_note",
    # a subword (BPE) corpus: the test NLL sum over its words too (audit/evaluate/run.py per_word_fields)
    "test_words", "test_ppl_per_word",
]
# the body each run's head sat on (model.body: a registered body or an import path); runs
# recorded before bodies existed sat on the schema's default body
DEFAULT_BODY = schema_defaults("model", unfilled=True)["body"]
PAIR_COLUMNS = ["corpus", "head", "seed", "benchmark", "word1", "word2", "gold", "cosine"]


def run_row(run_dir: Path) -> tuple[dict, pd.DataFrame]:
    """One runs-table row and the run's word-similarity pairs."""
    files = {name: run_dir / f"{name}.json" for name in ("metrics", "eval")}
    for path in files.values():
        if not path.is_file():
            raise AuditError(f"missing {path}: the run was not trained or evaluated")
    metrics = json.loads(files["metrics"].read_text())
    result = json.loads(files["eval"].read_text())
    # no status, no outcome: such a run must never enter the tests as a success (eval.json
    # repeats the training status, so a missing one there is taken from metrics.json)
    for path, status in ((files["metrics"], metrics.get("status")), (files["eval"], result.get("status", metrics.get("status")))):
        if status not in STATUSES:
            raise AuditError(f"{path}: key 'status' is {status!r}; expected 'ok' or 'failed'")
    row = {key: metrics.get(key) for key in BASE_COLUMNS + EXTRA_COLUMNS if key in metrics}
    row.update({k: v for k, v in result.items() if k in BASE_COLUMNS + EXTRA_COLUMNS})
    settings = metrics.get("settings", {})
    row["body"] = (metrics.get("model") or {}).get("body") or settings.get("model", {}).get("body") or DEFAULT_BODY
    row["arm_group"] = settings.get("arm_group", metrics["head"])
    for key, value in settings.get("grid_point", {}).items():
        row[f"grid_{key}"] = value
    for benchmark, rho in sorted(result.get("wordsim", {}).items()):
        row[f"wordsim_{benchmark}"] = rho
    pairs = pd.read_csv(run_dir / "wordsim_pairs.csv")
    for key in ("corpus", "head", "seed"):
        pairs.insert(0, key, metrics[key])
    return row, pairs[PAIR_COLUMNS] if len(pairs) else pd.DataFrame(columns=PAIR_COLUMNS)


def collect(run_dirs: list[Path], design: str = "") -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs table (sorted by corpus, head, seed) and the concatenated pair table; ``design``
    (``audit.stats.sequential.schedule.design_text``) fills the column of that name, so that a
    study reading this table as evidence knows how its seeds came ('' leaves it out)."""
    rows, pair_tables = zip(*(run_row(Path(d)) for d in run_dirs))
    runs = pd.DataFrame(list(rows))
    grid = [c for c in runs if c.startswith("grid_")]  # in the order the grids name their keys
    extra = [c for c in EXTRA_COLUMNS if c in runs] + ["body", "arm_group"] + grid \
        + sorted(c for c in runs if c.startswith("wordsim_"))
    runs = runs.reindex(columns=BASE_COLUMNS + extra)
    runs["error"] = runs["error"].astype(object).fillna("")  # all-NaN (float) when no run failed
    runs = runs.sort_values(["corpus", "head", "seed"], kind="stable").reset_index(drop=True)
    if design:
        runs["design"] = design
    pairs = pd.concat([p for p in pair_tables if len(p)] or [pd.DataFrame(columns=PAIR_COLUMNS)])
    return runs, pairs


def collect_sentences(run_dirs: list[Path]) -> multiboot.Sentences:
    """Every run's ``sentences.npz`` keyed by (corpus, head, seed) from its ``metrics.json``.

    Raises:
        AuditError: a run folder without ``sentences.npz`` (evaluated before it existed: rerun
            its evaluate job) or with an unreadable one.
    """
    nll, tokens = {}, {}
    for run_dir in map(Path, run_dirs):
        path = run_dir / "sentences.npz"
        if not path.is_file():
            raise AuditError(f"missing {path}: re-evaluate the run (python -m audit evaluate)")
        metrics = json.loads((run_dir / "metrics.json").read_text())
        key = tuple(str(metrics[k]) for k in ("corpus", "head", "seed"))
        try:
            with np.load(path, allow_pickle=False) as blob:
                nll[key], tokens[key] = blob["nll"], blob["tokens"]
        except (OSError, KeyError, ValueError) as err:
            raise AuditError(f"{path}: unreadable sentence file ({err})") from None
    return multiboot.Sentences(nll, tokens)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit collect", description=__doc__)
    parser.add_argument("--runs", nargs="+", required=True, help="run folders")
    parser.add_argument("--out", required=True, help="runs table CSV to write")
    parser.add_argument("--pairs-out", required=True, help="word-similarity pair table CSV to write")
    parser.add_argument("--sentences-out", help="write every run's per-sentence test NLL (sentences.npz) into this file")
    parser.add_argument("--design", default="", help="how the study's seeds came (fixed or sequential with its "
                                                     "looks), recorded in the column 'design'")
    args = parser.parse_args(argv)
    runs, pairs = collect([Path(d) for d in args.runs], args.design)
    sentences = collect_sentences(args.runs) if args.sentences_out else None
    atomic_write_text(runs.to_csv(index=False), Path(args.out))
    atomic_write_text(pairs.to_csv(index=False), Path(args.pairs_out))
    if sentences is not None:
        multiboot.save(sentences, args.sentences_out)
    failed = int((runs["status"] != "ok").sum())
    print(f"{len(runs)} runs ({failed} failed) -> {args.out}")
    return 0
