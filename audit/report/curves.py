"""Learning curves: validation perplexity per epoch per head, the figure to judge convergence by.

``read_curves`` collects every run's per-epoch log (``metrics.json`` -> ``log``; failed runs too,
up to where they stopped); ``learning_curves`` draws one panel per corpus with, per head, the
median over seeds at each epoch (thick line) and the band from the lowest to the highest seed
(shaded). The band and median at an epoch use the seeds that reached it; the legend gives n.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from audit.errors import AuditError
from audit.plots import RC, empty_svg, head_colours, panels, plt, to_svg

COLUMNS = ["corpus", "head", "seed", "epoch", "valid_ppl", "status"]


def epoch_logs(run_dirs):
    """(metrics, entry) for every per-epoch log row of every run's metrics.json, in order."""
    for run_dir in map(Path, run_dirs):
        path = run_dir / "metrics.json"
        if not path.is_file():
            raise AuditError(f"missing {path}: the run was not trained")
        metrics = json.loads(path.read_text())
        for entry in metrics.get("log", []):
            yield metrics, entry


def read_curves(run_dirs) -> pd.DataFrame:
    """DataFrame[corpus, head, seed, epoch, valid_ppl, status] of the runs' per-epoch logs."""
    rows = []
    for metrics, entry in epoch_logs(run_dirs):
        rows.append({"corpus": metrics["corpus"], "head": metrics["head"], "seed": int(metrics["seed"]),
                     "epoch": int(entry["epoch"]), "valid_ppl": float(entry["valid_ppl"]),
                     "status": metrics["status"]})
    return pd.DataFrame(rows, columns=COLUMNS)


def curve_summary(curves: pd.DataFrame) -> pd.DataFrame:
    """Per (corpus, head, epoch): n seeds, median, min and max of the finite validation ppl."""
    finite = curves[np.isfinite(curves["valid_ppl"])]
    grouped = finite.groupby(["corpus", "head", "epoch"], sort=True)["valid_ppl"]
    return grouped.agg(n="count", median="median", low="min", high="max").reset_index()


def learning_curves(curves: pd.DataFrame) -> str:
    """SVG: validation perplexity (log axis) against epoch, one panel per corpus."""
    summary = curve_summary(curves) if len(curves) else pd.DataFrame()
    if summary.empty:
        return empty_svg("no run logged a finite validation perplexity")
    corpora = sorted(summary["corpus"].unique())
    colours = head_colours(sorted(summary["head"].unique()))
    with plt.rc_context(RC):
        fig, axes = panels(len(corpora), 6.0, 3.8)
        for ax, corpus in zip(axes, corpora):
            part = summary[summary["corpus"] == corpus]
            for head, rows in part.groupby("head", sort=True):
                seeds = curves[(curves["corpus"] == corpus) & (curves["head"] == head)]["seed"].nunique()
                ax.fill_between(rows["epoch"], rows["low"], rows["high"], color=colours[head], alpha=0.2, lw=0)
                ax.plot(rows["epoch"], rows["median"], color=colours[head], lw=1.8, label=f"{head} (n={seeds})")
            ax.set_yscale("log")
            ax.set_xlabel("epoch")
            ax.set_ylabel("validation perplexity")
            ax.set_title(f"{corpus}: median over seeds, band min-max")
            if math.isfinite(part["high"].max()):
                ax.legend(frameon=False, fontsize=8)
        return to_svg(fig)
