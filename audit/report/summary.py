"""The report's own tables: per-head summaries computed from the runs table and the run folders.

Each function returns one DataFrame that ``python -m audit report table`` writes to
``reports/<study>/tables/<name>.csv``. They describe (means, SDs, t-intervals); every test lives
in ``audit.stats``. Failed runs are counted, never averaged. The intervals are at the level the
caller gives, the study's 1 - ``stats.alpha`` (``audit.report.builders``), and a table with
intervals records it in ``ci_level`` so that the page prints it (``audit.report.levels``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from audit.errors import AuditError
from audit.report.levels import DEFAULT_LEVEL

PPL_COLUMNS = ["train_ppl", "valid_ppl", "test_ppl"]
RANK_COLUMNS = ["press_rank", "erank_1e-3", "erank_1e-4", "erank_1e-5", "entropy_rank"]
WORDSIM_PREFIX = "wordsim_"


def describe(values, level: float = DEFAULT_LEVEL) -> dict:
    """Mean, SD (n - 1), and the two-sided t-interval of the mean over the finite values.

    Args:
        values: 1-D array-like of numbers (NaN and non-numeric entries are ignored).
        level: confidence level of the interval.

    Returns:
        {n, mean, sd, ci_low, ci_high}; sd and the interval are NaN when n < 2.
    """
    x = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").astype(float).to_numpy()
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return {"n": 0, "mean": math.nan, "sd": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    mean = float(x.mean())
    if n < 2:
        return {"n": 1, "mean": mean, "sd": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    sd = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "sd": sd, "ci_low": mean - half, "ci_high": mean + half}


def describe_correlation(values, level: float = DEFAULT_LEVEL) -> dict:
    """Like ``describe`` for correlation coefficients: the interval is the t-interval of the mean
    of Fisher's z = artanh(r) over seeds, mapped back with tanh, so it stays inside (-1, 1)."""
    out = describe(values, level)
    if out["n"] >= 2:
        x = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").astype(float).to_numpy()
        z = np.arctanh(np.clip(x[np.isfinite(x)], -1 + 1e-12, 1 - 1e-12))
        zd = describe(z, level)
        out["ci_low"], out["ci_high"] = float(np.tanh(zd["ci_low"])), float(np.tanh(zd["ci_high"]))
    return out


def _groups(runs: pd.DataFrame):
    if "corpus" not in runs:
        runs = runs.assign(corpus="all")
    if "status" not in runs:
        runs = runs.assign(status="ok")
    return runs.groupby(["corpus", "head"], sort=True)


def results_table(runs: pd.DataFrame, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Per (corpus, head): n ok, n failed, parameters, seconds per epoch, perplexities, place.

    Args:
        runs: the runs table (columns: docs/runs-table.md; missing metric columns are skipped).
        level: confidence level of the t-intervals (the study's 1 - stats.alpha).

    Returns:
        One row per (corpus, head) with ``<metric>_{n,mean,sd,ci_low,ci_high}`` for the train,
        valid and test perplexities (``_n``: ok runs with a finite value) and
        ``seconds_per_epoch``; ``n_ok`` ok runs, ``n`` the fewest finite values behind a
        perplexity mean, ``failed``; ``ci_level`` the intervals' level; ``place`` = 1 for the
        lowest mean test perplexity.
    """
    rows = []
    for (corpus, head), group in _groups(runs):
        ok = group[group["status"].astype(str) == "ok"]
        row = {"corpus": corpus, "head": head, "n": 0, "n_ok": len(ok), "failed": len(group) - len(ok),
               "ci_level": level}
        params = pd.to_numeric(group.get("n_params", pd.Series(dtype=float)), errors="coerce").dropna()
        row["n_params"] = int(params.iloc[0]) if len(params) else math.nan
        if "wall_seconds" in ok:
            epochs = pd.to_numeric(ok["epochs_run"], errors="coerce") if "epochs_run" in ok else 1.0
            per_epoch = pd.to_numeric(ok["wall_seconds"], errors="coerce") / epochs
            row.update({f"seconds_per_epoch_{k}": v for k, v in describe(per_epoch, level).items() if k != "n"})
        for metric in PPL_COLUMNS:
            if metric in ok:
                row.update({f"{metric}_{k}": v for k, v in describe(ok[metric], level).items()})
        # n: the runs every perplexity mean of the row rests on (an ok run without a value is
        # left out of a mean, so it must not be counted beside it)
        row["n"] = min((row[f"{m}_n"] for m in PPL_COLUMNS if m in ok), default=0)
        rows.append(row)
    table = pd.DataFrame(rows)
    if "test_ppl_mean" in table:
        table["place"] = table.groupby("corpus")["test_ppl_mean"].rank(method="min").astype("Int64")
    return table


def ranks_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (corpus, head): mean and SD over successful seeds of every rank column present.

    Returns:
        One row per (corpus, head) with ``<rank>_n`` (ok runs with a finite value), ``<rank>_mean``
        and ``<rank>_sd`` for the log-P ranks (and the ``f_logits_`` ranks where a head has a logit
        transform), ``n`` the fewest of the ``_n``; empty when the runs table has no rank column.
    """
    columns = [c for c in RANK_COLUMNS + [f"f_logits_{c}" for c in RANK_COLUMNS] if c in runs]
    if not columns:
        return pd.DataFrame(columns=["corpus", "head", "n"])
    rows = []
    for (corpus, head), group in _groups(runs):
        ok = group[group["status"].astype(str) == "ok"]
        row = {"corpus": corpus, "head": head}
        for c in columns:
            d = describe(ok[c])
            row[f"{c}_n"], row[f"{c}_mean"], row[f"{c}_sd"] = d["n"], d["mean"], d["sd"]
        row["n"] = min(row[f"{c}_n"] for c in columns)   # runs with a finite value of every rank
        rows.append(row)
    return pd.DataFrame(rows)


def wordsim_rho_table(runs: pd.DataFrame, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Per (corpus, head, benchmark): Spearman rho over seeds, mean, SD and the interval at
    ``level`` (the study's 1 - stats.alpha; ``describe_correlation``: t-interval on Fisher's z scale).

    Returns:
        Long table [corpus, head, benchmark, n, mean, sd, ci_low, ci_high, ci_level]; empty when
        the runs table has no ``wordsim_<benchmark>`` column.
    """
    columns = sorted(c for c in runs if c.startswith(WORDSIM_PREFIX))
    rows = []
    for (corpus, head), group in _groups(runs):
        ok = group[group["status"].astype(str) == "ok"]
        for c in columns:
            rows.append({"corpus": corpus, "head": head, "benchmark": c[len(WORDSIM_PREFIX):],
                         **describe_correlation(ok[c], level), "ci_level": level})
    return pd.DataFrame(rows, columns=["corpus", "head", "benchmark", "n", "mean", "sd", "ci_low", "ci_high",
                                       "ci_level"])


def coverage_table(run_dirs: list[Path]) -> pd.DataFrame:
    """Word-similarity coverage per (corpus, benchmark) from each run's ``eval.json``.

    Args:
        run_dirs: run folders ``.../<corpus>/<head>/<seed>`` holding ``eval.json``.

    Returns:
        [corpus, benchmark, pairs, found, coverage, oov_pairs, runs, consistent, note]: pairs in the
        benchmark, pairs with both words in the vocabulary (the vocabulary is the corpus's, so
        every run of a corpus should agree; ``consistent`` says whether they did). A corpus whose
        runs were not scored (a subword vocabulary: eval.json's ``wordsim_note``) has one row,
        benchmark "all", with that reason in ``note`` and no counts.
    """
    seen: dict[tuple[str, str], list[tuple[int, int]]] = {}
    notes: dict[str, tuple[str, int]] = {}
    for run_dir in map(Path, run_dirs):
        path = run_dir / "eval.json"
        if not path.is_file():
            raise AuditError(f"missing {path}: the run was not evaluated")
        result = json.loads(path.read_text())
        corpus = run_dir.parent.parent.name
        if result.get("wordsim_note"):
            notes[corpus] = (result["wordsim_note"], notes.get(corpus, ("", 0))[1] + 1)
        for bench, total in sorted((result.get("wordsim_pairs") or {}).items()):
            found = (result.get("wordsim_found") or {}).get(bench)
            if found is not None:
                seen.setdefault((corpus, bench), []).append((int(total), int(found)))
    rows = []
    for (corpus, bench), values in sorted(seen.items()):
        total, found = values[0]
        rows.append({"corpus": corpus, "benchmark": bench, "pairs": total, "found": found,
                     "coverage": found / total if total else math.nan, "oov_pairs": total - found,
                     "runs": len(values), "consistent": len(set(values)) == 1, "note": ""})
    for corpus, (note, runs) in sorted(notes.items()):
        rows.append({"corpus": corpus, "benchmark": "all", "pairs": math.nan, "found": math.nan,
                     "coverage": math.nan, "oov_pairs": math.nan, "runs": runs, "consistent": True, "note": note})
    table = pd.DataFrame(rows, columns=["corpus", "benchmark", "pairs", "found", "coverage",
                                        "oov_pairs", "runs", "consistent", "note"])
    # word vocabularies only: the table as it always was (no empty note column)
    return table if notes else table.drop(columns="note")


def topk_table(run_dirs: list[Path]) -> pd.DataFrame:
    """The top-k grid: one row per (corpus, position, head) from each run's ``topk.csv``.

    Args:
        run_dirs: run folders ``.../<corpus>/<head>/<seed>`` holding ``topk.csv`` (empty for
            failed runs, which are skipped).

    Returns:
        [corpus, position, context, target, head, seeds, in_top_k, median_rank, top]: the
        number of seeds recorded, how many of them have the target in their top k, the
        median rank of the target, and the top-k words of the lowest seed.
    """
    frames = []
    for run_dir in sorted(map(Path, run_dirs), key=lambda p: (p.parent.parent.name, p.parent.name,
                                                              int(p.name) if p.name.isdigit() else 0)):
        path = run_dir / "topk.csv"
        if not path.is_file():
            raise AuditError(f"missing {path}: the run was not evaluated")
        table = pd.read_csv(path, keep_default_na=False)
        if len(table):
            frames.append(table.assign(corpus=run_dir.parent.parent.name, head=run_dir.parent.name))
    columns = ["corpus", "position", "context", "target", "head", "seeds", "in_top_k", "median_rank", "top"]
    if not frames:
        return pd.DataFrame(columns=columns)
    table = pd.concat(frames, ignore_index=True)
    table["in_top_k"] = table["in_top_k"].astype(str).str.lower() == "true"
    grouped = table.groupby(["corpus", "position", "head"], sort=True)
    out = grouped.agg(context=("context", "first"), target=("target", "first"), seeds=("in_top_k", "size"),
                      in_top_k=("in_top_k", "sum"), median_rank=("target_rank", "median"),
                      top=("top", "first")).reset_index()
    return out[columns]
