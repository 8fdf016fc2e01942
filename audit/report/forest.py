"""Forest plots of a comparisons table: every difference with its interval, one panel per family.

Drawn for the published record (``published_comparisons.csv``) and for a study
(``comparisons.csv``). Each row of the table is one line: the difference ``diff = mean_a -
mean_b`` with its Welch interval (``diff_ci_low``, ``diff_ci_high``) and, where the table has
the multi-bootstrap's ``mb_ci_low`` / ``mb_ci_high`` (seeds and test sentences resampled
together), that interval too, drawn thinner below it. Each is at its own level (``ci_level``,
``mb_ci_level``: the level of its Holm step, ``audit.stats.families``): the legend
prints the level the rows share (or that the table states none), and where they differ each
row's label ends in its own. The equivalence margin ``[-m, +m]`` is the
shaded band behind each row; a filled marker means the row's verdict is a difference (decided by
Holm on the interval drawn, at the level of its Holm step), a hollow one that it is not, and a grey cross
a row the guard (``audit.stats.guard``) labelled ``not_informative``, whatever its p: its label
on the y axis ends in "not informative" and its reason is in the comparisons table. Metrics differ
in scale, so each (family, metric) is its own panel with its own x axis.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from audit.plots import RC, empty_svg, plt, to_svg
from audit.report.levels import distinct, level
from audit.stats.decision import Verdict
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

REQUIRED = ("family", "metric", "head_a", "head_b", "diff", "diff_ci_low", "diff_ci_high", "p_adj")
NOT_INFORMATIVE = Verdict.NOT_INFORMATIVE   # withheld by the guard (audit.stats.guard.VERDICT)
DIFFERENCE = (Verdict.A_BETTER, Verdict.B_BETTER)  # the verdicts of a difference


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def mark(row: dict) -> str:
    """What a row's marker says: ``not_informative`` (the guard's verdict, drawn whatever p_adj
    is), else ``significant`` or ``not_significant`` (``significant``)."""
    if str(row.get("verdict")) == NOT_INFORMATIVE:
        return NOT_INFORMATIVE
    return "significant" if significant(row) else "not_significant"


def significant(row: dict) -> bool:
    """Whether the row's decision record found a difference: its verdict (``a_better`` or
    ``b_better``, which ``audit.stats`` decides on the interval drawn), never a level re-read
    here; a table made before the verdicts were recorded (no ``verdict`` column) reads its
    Welch interval, which excludes 0 exactly when the Holm-adjusted test rejects."""
    verdict = row.get("verdict")
    if isinstance(verdict, str) and verdict:
        return verdict in DIFFERENCE
    low, high = _float(row.get("diff_ci_low")), _float(row.get("diff_ci_high"))
    return bool(np.isfinite(low) and np.isfinite(high) and (high < 0 or low > 0))


def forest(comparisons: pd.DataFrame | None, title: str) -> str:
    """The forest plot of a comparisons table.

    Args:
        comparisons: rows (n,) with the columns of ``REQUIRED``, optionally ``corpus``,
            ``equivalence_margin``, ``alpha``, ``mb_ci_low``, ``mb_ci_high``.
        title: the figure's title (which record it draws).

    Returns:
        SVG text; one panel per (family, metric) in first-seen order, one row per comparison
        labelled ``corpus: A vs B``. Rows without a finite difference are left out and counted in
        the panel's title.
    """
    if comparisons is None or comparisons.empty:
        return empty_svg("no comparisons to draw")
    missing = [c for c in REQUIRED if c not in comparisons.columns]
    if missing:
        return empty_svg(f"the comparisons table lacks {', '.join(missing)}")
    has_mb = {"mb_ci_low", "mb_ci_high"} <= set(comparisons.columns)
    levels = distinct(comparisons["ci_level"]) if "ci_level" in comparisons else []
    per_row = len(levels) > 1   # the legend cannot say one level: each row's label says its own
    groups = list(comparisons.groupby(["family", "metric"], sort=False))
    heights = [max(len(g), 1) for _, g in groups]
    with plt.rc_context(RC):
        fig, axes = plt.subplots(len(groups), 1, figsize=(9.0, 1.1 + 0.32 * sum(heights) + 0.7 * len(groups)),
                                 squeeze=False, gridspec_kw={"height_ratios": heights})
        for ax, ((family, metric), group) in zip(axes[:, 0], groups):
            rows = [r for r in group.to_dict("records") if np.isfinite(_float(r["diff"]))]
            dropped = len(group) - len(rows)
            for y, row in enumerate(rows):
                margin = _float(row.get("equivalence_margin"))
                if np.isfinite(margin) and margin > 0:
                    ax.fill_betweenx([y - 0.42, y + 0.42], -margin, margin, color="#dbe7f6", lw=0)
                low, high = _float(row["diff_ci_low"]), _float(row["diff_ci_high"])
                if np.isfinite(low) and np.isfinite(high):
                    ax.plot([low, high], [y, y], color="#1b1b1b", lw=1.6, solid_capstyle="butt")
                if has_mb:
                    mb_low, mb_high = _float(row.get("mb_ci_low")), _float(row.get("mb_ci_high"))
                    if np.isfinite(mb_low) and np.isfinite(mb_high):
                        ax.plot([mb_low, mb_high], [y + 0.22, y + 0.22], color="#c05600", lw=1.0)
                kind = mark(row)
                if kind == NOT_INFORMATIVE:
                    ax.plot(row["diff"], y, "X", ms=7, color="#888888")
                else:
                    ax.plot(row["diff"], y, "o", ms=6, color="#1d4e89",
                            markerfacecolor="#1d4e89" if kind == "significant" else "white")
            ax.axvline(0.0, color="#888888", lw=0.8)
            ax.set_yticks(range(len(rows)))
            ax.set_yticklabels([(f"{r['corpus']}: " if "corpus" in r and pd.notna(r["corpus"]) else "")
                                + f"{r['head_a']} vs {r['head_b']}"
                                + (" · not informative" if mark(r) == NOT_INFORMATIVE else "")
                                + (f" · {level(r.get('ci_level'))}" if per_row else "") for r in rows],
                               fontsize=8)
            ax.set_ylim(len(rows) - 0.5, -0.5)
            ax.set_xlabel(f"{metric}: diff = mean A − mean B", fontsize=8)
            note = f" ({dropped} without a difference left out)" if dropped else ""
            ax.set_title(f"{family} · {metric}{note}", fontsize=9, loc="left")
        shared = levels[0] if len(levels) == 1 else None
        welch = "Welch CI (its level on each row)" if per_row else level(shared, "Welch CI")
        legend = [Line2D([], [], color="#1b1b1b", lw=1.6, label=welch),
                  Line2D([], [], marker="o", ls="", color="#1d4e89", label="a difference (Holm p_adj < α)"),
                  Line2D([], [], marker="o", ls="", color="#1d4e89", markerfacecolor="white",
                             label="not significant after Holm"),
                  Patch(color="#dbe7f6", label="equivalence margin ±m")]
        if any(mark(r) == NOT_INFORMATIVE for r in comparisons.to_dict("records")):
            legend.append(Line2D([], [], marker="X", ls="", color="#888888",
                                 label="not informative (the guard; any p)"))
        if has_mb:
            boot = "multi-bootstrap CI (the row's level)" if per_row else level(shared, "multi-bootstrap CI")
            legend.insert(1, Line2D([], [], color="#c05600", lw=1.0, label=boot))
        fig.suptitle(title, fontsize=10, x=0.01, ha="left")
        fig.legend(handles=legend, loc="upper right", ncol=len(legend), fontsize=7, frameon=False)
        fig.tight_layout(rect=(0, 0, 1, 0.97))
        return to_svg(fig)
