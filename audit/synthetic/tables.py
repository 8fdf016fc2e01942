"""The synthetic study's per-fit table, its summary over seeds and its figures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from audit.errors import AuditError
from audit.synthetic.plan import FIGURE_METRICS, METRICS, TRUE_RANKS
from audit.synthetic.plan import alpha_label


def collect(paths) -> pd.DataFrame:
    """One row per fit record (JSON files written by ``fit``), sorted by head, alpha, d, seed."""
    rows = []
    for path in paths:
        try:
            record = json.loads(Path(path).read_text())
            s = record["settings"]
        except (OSError, ValueError, KeyError) as err:
            raise AuditError(f"synthetic table: cannot read fit record {path} ({type(err).__name__})") from None
        row = {"head": s["head"], "registry_head": s["registry_head"], "d": s["d"], "alpha": s["alpha"],
               "seed": s["seed"], "contexts": s["contexts"], "outcomes": s["outcomes"], "steps": s["steps"],
               "status": record["status"], "n_params": record["n_params"]}
        row.update({k: record.get(k, np.nan) for k in METRICS + TRUE_RANKS})
        row["seconds"] = record.get("seconds", np.nan)
        rows.append(row)
    if not rows:
        raise AuditError("synthetic table: no fit records given")
    return pd.DataFrame(rows).sort_values(["head", "alpha", "d", "seed"], kind="stable").reset_index(drop=True)


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample sd and count over seeds of every metric, per (head, alpha, d); ok fits only."""
    ok = table[table["status"] == "ok"]
    stats = ok.groupby(["head", "alpha", "d"])[METRICS + TRUE_RANKS].agg(["mean", "std", "count"])
    stats.columns = [f"{metric}_{stat}" for metric, stat in stats.columns]
    return stats.reset_index()


def figure(table: pd.DataFrame, metric: str) -> str:
    """``metric`` against d, one panel per alpha, one line per head (mean over seeds) with a
    band spanning the seeds' min to max; rank metrics add the true log-P's rank (dashed).

    Returns:
        SVG text (byte-identical for the same table).
    """
    from audit.plots import RC, empty_svg, head_colours, plt, to_svg

    if metric not in FIGURE_METRICS:
        raise AuditError(f"synthetic figure: unknown metric {metric!r}; known: {', '.join(FIGURE_METRICS)}")
    ok = table[(table["status"] == "ok")].dropna(subset=[metric])
    if ok.empty:
        return empty_svg(f"no successful synthetic fit has {metric}")
    colours = head_colours(ok["head"])
    alphas = sorted(ok["alpha"].unique())
    with plt.rc_context(RC):
        # mode matching is a share, comparable across panels; KL and ranks differ by orders
        # of magnitude between alphas, so those panels get their own y range
        shared = metric == "mode_match"
        fig, axes = plt.subplots(1, len(alphas), figsize=(4.2 * len(alphas), 3.6), squeeze=False, sharey=shared)
        for ax, alpha in zip(axes[0], alphas):
            part = ok[ok["alpha"] == alpha]
            for head in sorted(part["head"].unique()):
                g = part[part["head"] == head].groupby("d")[metric]
                d, mean = g.mean().index.to_numpy(), g.mean().to_numpy()
                ax.fill_between(d, g.min().to_numpy(), g.max().to_numpy(), color=colours[head], alpha=0.2, lw=0)
                ax.plot(d, mean, marker="o", ms=3.5, color=colours[head], label=f"{head} (n={g.count().max()})")
            true = f"true_{metric}"
            if true in part:
                t = part.groupby("d")[true].mean()
                ax.plot(t.index, t.to_numpy(), ls="--", color="#444", lw=1.0, label="true log-P*")
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(part["d"].unique()), [str(v) for v in sorted(part["d"].unique())])
            ax.minorticks_off()
            ax.set_xlabel("embedding size d")
            ax.set_title(f"alpha = {alpha_label(alpha)}")
            if ax is axes[0][0] or not shared:
                ax.set_ylabel(FIGURE_METRICS[metric])
        axes[0][-1].legend(fontsize=7.5, frameon=False, loc="best")
        return to_svg(fig)
