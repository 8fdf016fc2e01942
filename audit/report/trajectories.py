"""Verdicts over training on the page: one small multiple per traced claim, and the marks.

``trajectory_figure`` draws, per claim with a trajectory (``audit.stats.trajectory``; the last
look of a group-sequential study, whose runs are the final verdict's), the effect and its interval
at every recorded budget against training tokens, each point in its verdict's colour (the page's
badge colours), and beneath it the two arms' median traced metric (the best validation perplexity
so far, what a run stopped there reports) over the same tokens. The panel's title carries the mark
(held, changed, still moving; ``audit.stats.trajectory_marks``). ``page_marks`` gives the page the
marks by (claim, corpus) and the headline's counts.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from audit.plots import RC, empty_svg, head_colours, plt, to_svg
from audit.report import levels
from audit.stats.trajectory_marks import share_words
from audit.stats.decision import Verdict

# the badges' colours (templates/_audit.css.j2), stronger for a point on a white axis
VERDICT_COLOURS = {Verdict.SUPPORTED: "#1e8a44", Verdict.A_BETTER: "#1e8a44", Verdict.B_BETTER: "#1e8a44",
                   Verdict.CONTRADICTED: "#c0282d", Verdict.EQUIVALENT: "#2f6db5", Verdict.INCONCLUSIVE: "#d9a400",
                   Verdict.NOT_INFORMATIVE: "#888888"}
OTHER = "#bbbbbb"
COLUMNS = 3   # small multiples per row


def last_look(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the last look (the final verdict's runs); a fixed design has one look ('')."""
    if table.empty:   # no claim traced (a study whose claims read metrics measured once)
        return table
    looks = table["look"].astype(object).fillna("").astype(str)
    order = sorted(set(looks), key=lambda s: int(s.split()[0]) if s else 0)
    return table[looks == order[-1]]


def arm_medians(traced: pd.DataFrame, runs: pd.DataFrame, corpus: str, head: str, field: str) -> pd.DataFrame:
    """Per epoch, over the arm's ok runs that reached it: the median tokens and median ``field``."""
    ok = runs[(runs["corpus"] == corpus) & (runs["head"] == head) & (runs["status"] == "ok")]
    part = traced.merge(ok[["corpus", "head", "seed"]], on=["corpus", "head", "seed"])
    return part.groupby("epoch", as_index=False)[["tokens", field]].median().sort_values("epoch")


def _effect(ax, rows: pd.DataFrame, title: str) -> None:
    x = rows["tokens"].to_numpy() / 1e6
    ax.fill_between(x, rows["ci_low"], rows["ci_high"], color="#999999", alpha=0.25, lw=0)
    ax.plot(x, rows["estimate"], color="#444444", lw=1.0)
    ax.scatter(x, rows["estimate"], c=[VERDICT_COLOURS.get(str(v), OTHER) for v in rows["verdict"]],
               s=26, zorder=3, edgecolors="black", linewidths=0.4)
    ax.axhline(0.0, color="black", lw=0.6, ls=":")
    # early budgets' effects dwarf the late ones a mark is about: linear over the last half's range
    late = rows[rows["tokens"] >= rows["tokens"].max() / 2][["estimate", "ci_low", "ci_high"]].abs().to_numpy()
    reach = float(np.nanmax(late)) if np.isfinite(late).any() else 0.0
    if reach > 0 and np.nanmax(rows[["estimate", "ci_low", "ci_high"]].abs().to_numpy()) > 4 * reach:
        ax.set_yscale("symlog", linthresh=reach)
    first = rows.iloc[0]
    ax.set_ylabel(f"{first['head_a']} − {first['head_b']}\n({first['traced_on']}; band {levels.level(first['ci_level'])})"
                  if first["head_b"] else f"estimate ({first['traced_on']})", fontsize=7)
    ax.set_title(title, fontsize=7.5, loc="left")
    ax.tick_params(labelbottom=False)


def _arms(ax, traced: pd.DataFrame, runs: pd.DataFrame, rows: pd.DataFrame, colours: dict) -> None:
    first = rows.iloc[0]
    for head in (first["head_a"], first["head_b"]):
        if not head:
            continue
        med = arm_medians(traced, runs, first["corpus"], head, first["traced_on"])
        ax.plot(med["tokens"] / 1e6, med[first["traced_on"]], color=colours[head], lw=1.4, label=head)
    ax.set_yscale("log")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel(f"median {first['traced_on']}\n(best so far)", fontsize=7)
    ax.legend(frameon=False, fontsize=7)


def trajectory_figure(table: pd.DataFrame | None, traced: pd.DataFrame, runs: pd.DataFrame,
                      marks: pd.DataFrame | None) -> str:
    """SVG of small multiples, one per traced claim (module docstring); an empty figure saying
    why when no claim is on a metric recorded per epoch."""
    claims = last_look(table[table["kind"] == "claim"]) if table is not None and len(table) else None
    if claims is None or claims.empty:
        return empty_svg("no claim of this study is on a metric recorded per epoch")
    claims = claims.assign(**{c: claims[c].astype(object).fillna("") for c in ("head_a", "head_b")})
    traces = list(dict.fromkeys(zip(claims["claim_id"], claims["corpus"])))
    said = page_marks(marks)["by_claim"]
    colours = head_colours(set(claims["head_a"]) | set(claims["head_b"]) - {""})
    ncols = min(COLUMNS, len(traces))
    nrows = math.ceil(len(traces) / ncols)
    with plt.rc_context(RC):
        fig = plt.figure(figsize=(4.4 * ncols, 4.6 * nrows))
        grid = fig.add_gridspec(2 * nrows, ncols, height_ratios=[3, 2] * nrows, hspace=0.35, wspace=0.45)
        for i, (claim, corpus) in enumerate(traces):
            r, c = divmod(i, ncols)
            rows = claims[(claims["claim_id"] == claim) & (claims["corpus"] == corpus)].sort_values("epoch")
            top = fig.add_subplot(grid[2 * r, c])
            mark = said.get((claim, corpus), {}).get("mark_head", "")
            _effect(top, rows, f"{claim} ({corpus})\n{mark}")
            _arms(fig.add_subplot(grid[2 * r + 1, c], sharex=top), traced, runs, rows, colours)
        shown = [v for v in VERDICT_COLOURS if v in set(claims["verdict"].astype(str))]
        handles = [plt.Line2D([], [], marker="o", ls="", color=VERDICT_COLOURS[v], markeredgecolor="black",
                              label=v.replace("_", " ")) for v in shown]
        fig.legend(handles=handles, loc="upper center", ncol=len(handles), frameon=False,
                   title="verdict at each budget (validation, descriptive; the final verdict is on test data)",
                   bbox_to_anchor=(0.5, 1.0 + 0.25 / (4.6 * nrows)))
        return to_svg(fig)


def page_marks(marks: pd.DataFrame | None, checkpoints: pd.DataFrame | None = None) -> dict:
    """The marks as the page reads them: ``by_claim`` (claim_id, corpus) -> the mark's record and
    ``mark_head`` (its text up to the first ':'), the ``comparisons``' marks, ``counts`` of the
    traced claims per mark, ``n_moving`` of them whose trend test rejects (the headline's "still
    moving", a changed one included), ``alpha``, the trend test's level, and ``held_share`` with
    ``share`` (its words: "half", "25%"), the study's ``stats.trajectory.held_share``;
    ``checkpoints``: the marks of a suite's claims over its checkpoints (``checkpoint_marks``),
    listed apart, never counted with this study's."""
    out = {"by_claim": {}, "comparisons": [], "counts": {}, "n_traced": 0, "n_moving": 0, "alpha": None,
           "held_share": None, "share": "", "checkpoints": []}
    if checkpoints is not None and not checkpoints.empty:
        rows = checkpoints.astype(object).where(checkpoints.notna(), None).to_dict("records")
        out["checkpoints"] = [dict(r, mark_head=str(r["text"]).split(":", 1)[0] if r["mark"] != "not traced"
                                   else "not traced") for r in rows]
    # alpha and the share are the study's, on every row of either table
    settings = marks if marks is not None and not marks.empty else checkpoints
    if settings is None or settings.empty:
        return out
    out["alpha"] = float(settings["alpha"].iloc[0])   # the study's stats.alpha
    out["held_share"] = float(settings["held_share"].iloc[0])   # and its stats.trajectory.held_share
    out["share"] = share_words(out["held_share"])
    if marks is None or marks.empty:   # a suite's marks alone: no trajectory of this study's runs
        return out
    marks = marks.astype(object).where(marks.notna(), None)
    looks = marks["look"].astype(object).fillna("").astype(str)
    last = sorted(set(looks), key=lambda s: int(s.split()[0]) if s else 0)[-1]
    for row in marks[looks == last].to_dict("records"):
        row["mark_head"] = str(row["text"]).split(":", 1)[0] if row["mark"] != "not traced" else "not traced"
        if row["kind"] == "claim":
            out["by_claim"][(str(row["claim_id"]), str(row["corpus"]))] = row
            if row["mark"] != "not traced":
                out["counts"][row["mark"]] = out["counts"].get(row["mark"], 0) + 1
                out["n_traced"] += 1
        else:
            out["comparisons"].append(row)
    # read back from CSV, moving is a bool, or text when a "not traced" row left it empty
    out["n_moving"] = sum(1 for r in out["by_claim"].values() if str(r.get("moving")) == "True")
    return out

