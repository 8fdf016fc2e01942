"""Grid sweeps: one table row per grid point and three figures, from the runs table.

A head entry with ``grid: {c: [...], k: [...]}`` is expanded (``audit.config.expand_grids``) into
one arm per point of the product; the runs table marks those arms with ``arm_group`` (the entry's
name) and ``grid_<option>`` columns (the arm's swept values, NaN for arms that are not on a grid).
Everything here summarises that table over seeds: the table (``grid_table``) is the single source
of the figures' numbers, failed runs are counted in ``n_failed`` and never averaged, and arms
that are not on a grid (e.g. softmax) are kept as reference rows next to the grid of their corpus.
Figures are SVG text drawn like ``audit.report.figures`` (same rc, byte-identical per input).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib import colors as mcolors
from matplotlib.patches import Rectangle

from audit.errors import AuditError
from audit.plots import RC, empty_svg, head_colours, panels, plt, to_svg
from audit.stats.decision import Gate

GRID_PREFIX = "grid_"
METRICS = ("test_ppl", "valid_ppl", "train_ppl", "gap", "press_rank", "n_params")
LINE_METRICS = ("test_ppl", "train_ppl", "gap", "press_rank", "n_params")
TITLES = {"test_ppl": "test perplexity", "valid_ppl": "validation perplexity",
          "train_ppl": "training perplexity", "gap": "gap (test − train perplexity)",
          "press_rank": "Press rank", "n_params": "parameters"}
NO_GRID = "the runs table has no grid sweep (no arm with grid_<option> values)"


def _prepared(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """A copy with str corpus/head/status, the group of each run, its grid flag and ``gap``.

    Returns:
        (runs with extra columns ``_group`` and ``_on_grid``, the ``grid_*`` columns in order).
    """
    df = runs.copy()
    df["corpus"] = df["corpus"].astype(str) if "corpus" in df else "all"
    df["head"] = df["head"].astype(str)
    df["status"] = df["status"].astype(str) if "status" in df else "ok"
    columns = [c for c in df.columns if str(c).startswith(GRID_PREFIX) and len(str(c)) > len(GRID_PREFIX)]
    for c in columns:
        values = pd.to_numeric(df[c], errors="coerce")
        bad = values.isna() & df[c].notna()
        if bad.any():
            raise AuditError(f"runs table: column {c!r} has non-numeric value {df[c][bad].iloc[0]!r}")
        df[c] = values.astype(float)
    df["_on_grid"] = df[columns].notna().any(axis=1) if columns else False
    group = df["arm_group"] if "arm_group" in df else df["head"]
    group = group.where(group.notna() & (group.astype(str).str.strip() != ""), df["head"]).astype(str)
    # an arm off the grid is its own group, whatever arm_group says
    df["_group"] = group.where(df["_on_grid"], df["head"])
    for m in METRICS:
        if m != "gap":
            df[m] = pd.to_numeric(df[m], errors="coerce") if m in df else math.nan
    df["gap"] = df["test_ppl"] - df["train_ppl"]  # generalisation gap of each run
    return df, columns


def _groups(df: pd.DataFrame, columns: list[str]) -> list[tuple[str, str, list[str]]]:
    out = []
    for (corpus, group), part in df[df["_on_grid"]].groupby(["corpus", "_group"], sort=True):
        keys = [c[len(GRID_PREFIX):] for c in columns if part[c].notna().any()]
        out.append((str(corpus), str(group), keys))
    return out


def grid_groups(runs: pd.DataFrame) -> list[tuple[str, str, list[str]]]:
    """The grid sweeps of a runs table.

    Args:
        runs: the runs table, one row per run (columns corpus, head, status, arm_group,
            grid_<option>...).

    Returns:
        (corpus, group, swept options in the runs table's column order) for every (corpus,
        arm_group) with at least one non-NaN ``grid_`` value, sorted by corpus and group.
    """
    return _groups(*_prepared(runs))


def grid_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and SD over seeds of every grid point, with the corpus's other arms as references.

    Args:
        runs: the runs table, one row per run.

    Returns:
        One row per (corpus, group, grid point) plus one per arm off the grid in a corpus that has
        a grid (its ``group`` is its name, its option columns NaN). Columns: corpus, group, head,
        one column per swept option (named by the option), n_ok, n_failed, and ``<metric>_mean``,
        ``<metric>_sd`` (SD with n - 1, NaN below two values) over the ok runs' finite values for
        the metrics test_ppl, valid_ppl, train_ppl, gap (= test_ppl - train_ppl per run),
        press_rank, n_params. Sorted by corpus, group, options, head. No grid: no rows.
    """
    df, columns = _prepared(runs)
    groups = _groups(df, columns)
    keys = [c[len(GRID_PREFIX):] for c in columns if any(c[len(GRID_PREFIX):] in g[2] for g in groups)]
    stats = [f"{m}_{s}" for m in METRICS for s in ("mean", "sd")]
    clash = set(keys) & {"corpus", "group", "head", "n_ok", "n_failed", *stats}
    if clash:
        raise AuditError(f"runs table: grid option {min(clash)!r} clashes with a grid-table column")
    rows = []
    for corpus in sorted({g[0] for g in groups}):
        for head, part in df[df["corpus"] == corpus].groupby("head", sort=True):
            on_grid = bool(part["_on_grid"].any())
            row = {"corpus": corpus, "group": str(part["_group"].iloc[0]) if on_grid else str(head),
                   "head": str(head)}
            for key in keys:
                values = part[GRID_PREFIX + key].dropna().unique() if on_grid else []
                if len(values) > 1:
                    raise AuditError(f"runs table: arm {head!r} ({corpus}) has several values of "
                                     f"{GRID_PREFIX + key}: {sorted(values)}")
                row[key] = float(values[0]) if len(values) else math.nan
            ok = part[part["status"] == "ok"]
            row["n_ok"], row["n_failed"] = len(ok), int((part["status"] != "ok").sum())
            for m in METRICS:
                x = ok[m].to_numpy(dtype=float)
                x = x[np.isfinite(x)]
                row[f"{m}_mean"] = float(x.mean()) if x.size else math.nan
                row[f"{m}_sd"] = float(x.std(ddof=1)) if x.size > 1 else math.nan
            rows.append(row)
    table = pd.DataFrame(rows, columns=["corpus", "group", "head", *keys, "n_ok", "n_failed", *stats])
    return table.sort_values(["corpus", "group", *keys, "head"], na_position="last",
                             kind="stable").reset_index(drop=True)


def value_label(value) -> str:
    """A swept value as text: 2.0 -> '2', -1.5 -> '-1.5' (as in the arm names)."""
    value = float(value)
    return str(int(value)) if value.is_integer() else f"{value:g}"


def point_label(row, keys: list[str]) -> str:
    """The compact grid-point label of a table row, e.g. '(-1.5, 2.5)' for keys (c, k)."""
    return "(" + ", ".join(value_label(row[k]) for k in keys) + ")"


def _split(table: pd.DataFrame, corpus: str, group: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(grid cells of the group, reference arms off the grid) of one corpus."""
    part = table[table["corpus"] == corpus]
    key_cols = _key_columns(table)
    on_grid = part[key_cols].notna().any(axis=1) if key_cols else pd.Series(False, index=part.index)
    return part[on_grid & (part["group"] == group)], part[~on_grid]


def _key_columns(table: pd.DataFrame) -> list[str]:
    columns = list(table.columns)
    return columns[columns.index("head") + 1:columns.index("n_ok")]


def _colours(table: pd.DataFrame) -> dict[str, tuple]:
    """Colour per group (grid) and per reference arm, fixed across panels."""
    return head_colours(set(table["group"].astype(str)) | set(table["head"].astype(str)))


def _figure_inputs(runs: pd.DataFrame):
    """(grid table, grid groups, colours) shared by the figures, or None without a grid."""
    groups = grid_groups(runs)
    if not groups:
        return None
    table = grid_table(runs)
    return table, groups, _colours(table)


def grid_rank_vs_ppl(runs: pd.DataFrame, x: str = "press_rank", y: str = "test_ppl") -> str:
    """Rank against perplexity per grid point (mean over seeds, SD bars), one panel per grid.

    Args:
        runs: the runs table.
        x, y: metrics of ``grid_table`` (default Press rank against test perplexity).

    Returns:
        SVG text; each point is labelled with its grid point, the corpus's arms off the grid are
        diamonds labelled with their name, and grid points without a successful run are listed.
    """
    inputs = _figure_inputs(runs)
    if inputs is None:
        return empty_svg(NO_GRID)
    table, groups, colours = inputs
    with plt.rc_context(RC):
        fig, axes = panels(len(groups), 7.0, 5.0)
        for ax, (corpus, group, keys) in zip(axes, groups):
            cells, refs = _split(table, corpus, group)
            for part, name, marker in [(cells, f"{group} ({', '.join(keys)})", "o")] + \
                    [(refs[refs["head"] == h], h, "D") for h in refs["head"]]:
                shown = part[np.isfinite(part[f"{x}_mean"]) & np.isfinite(part[f"{y}_mean"])]
                if shown.empty:
                    continue
                colour = colours[group if marker == "o" else name]
                ax.errorbar(shown[f"{x}_mean"], shown[f"{y}_mean"], xerr=shown[f"{x}_sd"].fillna(0.0),
                            yerr=shown[f"{y}_sd"].fillna(0.0), fmt=marker, ms=5 if marker == "o" else 6,
                            color=colour, ecolor=colour, elinewidth=0.8, capsize=2, label=name, zorder=3)
                for row in shown.to_dict("records"):
                    ax.annotate(point_label(row, keys) if marker == "o" else name,
                                (row[f"{x}_mean"], row[f"{y}_mean"]), xytext=(4, 4),
                                textcoords="offset points", fontsize=7, color="#333")
            missing = [point_label(r, keys) for r in cells.to_dict("records") if r["n_ok"] == 0]
            if missing:
                ax.text(0.02, 0.02, "no successful run: " + " ".join(missing), transform=ax.transAxes,
                        fontsize=7, color="#a00", va="bottom")
            ax.set_xlabel(f"{x} (mean ± SD over seeds)")
            ax.set_ylabel(f"{y} (mean ± SD over seeds)")
            ax.set_title(f"{corpus}: {group} grid, points ({', '.join(keys)})")
            ax.margins(0.12, 0.12)
            ax.legend(frameon=False, fontsize=7, loc="best")
        return to_svg(fig)


def _heatmap(fig, ax, cells: pd.DataFrame, keys: list[str], metric: str, cmap_name: str) -> None:
    rows = sorted(cells[keys[0]].unique())
    cols = sorted(cells[keys[1]].unique())
    values = np.full((len(rows), len(cols)), np.nan)
    notes = np.full(values.shape, str(Gate.NOT_RUN), dtype=object)
    for r in cells.to_dict("records"):
        i, j = rows.index(r[keys[0]]), cols.index(r[keys[1]])
        value = r[f"{metric}_mean"]
        if r["n_ok"] == 0:
            notes[i, j] = "failed"
        elif np.isfinite(value):
            values[i, j], notes[i, j] = value, f"{value:.0f}" if metric == "press_rank" else f"{value:.1f}"
            if r["n_failed"]:
                notes[i, j] += f"\n({r['n_failed']} failed)"
        else:
            notes[i, j] = "no value"
    finite = values[np.isfinite(values)]
    low, high = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
    norm = mcolors.Normalize(low, high if high > low else low + 1.0)
    cmap = plt.get_cmap(cmap_name).with_extremes(bad="white")
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, aspect="auto")
    for (i, j), value in np.ndenumerate(values):
        if np.isfinite(value):
            red, green, blue, _ = cmap(norm(value))
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5  # luminance: white text on dark cells
            ax.text(j, i, notes[i, j], ha="center", va="center", fontsize=8, color="white" if dark else "#111")
        else:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="#bbb", lw=0))
            ax.text(j, i, notes[i, j], ha="center", va="center", fontsize=8, color="#a00")
    ax.set_xticks(range(len(cols)), [value_label(v) for v in cols])
    ax.set_yticks(range(len(rows)), [value_label(v) for v in rows])
    ax.set_xlabel(keys[1])
    ax.set_ylabel(keys[0])
    ax.grid(False)
    fig.colorbar(image, ax=ax, shrink=0.85, label=f"mean {metric}")


def grid_heatmaps(runs: pd.DataFrame) -> str:
    """Mean Press rank and mean test perplexity over each two-option grid, side by side.

    Args:
        runs: the runs table.

    Returns:
        SVG text, one row of two heatmaps per (corpus, group) with exactly two swept options (rows:
        the first option, columns: the second); cells hold the mean over ok seeds, and cells
        without a successful run are hatched and labelled 'failed'. Grids of one or three or more
        options are left out; an empty figure says so when none qualifies.
    """
    table = grid_table(runs)
    groups = grid_groups(runs)
    two = [g for g in groups if len(g[2]) == 2]
    if not two:
        found = ", ".join(f"{c}/{g}: {len(k)}" for c, g, k in groups)
        return empty_svg(f"no grid sweep has exactly two swept options (found {found})" if groups else NO_GRID)
    cells = [_split(table, c, g)[0] for c, g, k in two]
    width = max(3.8, 0.75 * max(c[k[1]].nunique() for c, (_, _, k) in zip(cells, two)) + 2.4)
    height = max(2.8, 0.5 * max(c[k[0]].nunique() for c, (_, _, k) in zip(cells, two)) + 1.6)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(len(two), 2, figsize=(2 * width, height * len(two)), squeeze=False,
                                 layout="constrained")
        for row_axes, part, (corpus, group, keys) in zip(axes, cells, two):
            for ax, metric, cmap in zip(row_axes, ("press_rank", "test_ppl"), ("viridis", "magma_r")):
                _heatmap(fig, ax, part, keys, metric, cmap)
                ax.set_title(f"{corpus} / {group}: mean {metric}")
        return to_svg(fig)


def grid_lines(runs: pd.DataFrame) -> str:
    """Metrics against the first swept option, one line per value of the other options.

    Args:
        runs: the runs table.

    Returns:
        SVG text, one row of panels per (corpus, group) for test_ppl, train_ppl, gap, press_rank
        and n_params (mean with SD bars over ok seeds); the corpus's arms off the grid are dashed
        horizontal reference lines.
    """
    inputs = _figure_inputs(runs)
    if inputs is None:
        return empty_svg(NO_GRID)
    table, groups, colours = inputs
    with plt.rc_context(RC):
        fig, axes = plt.subplots(len(groups), len(LINE_METRICS), squeeze=False, layout="constrained",
                                 figsize=(3.5 * len(LINE_METRICS), 3.2 * len(groups)))
        for row_axes, (corpus, group, keys) in zip(axes, groups):
            cells, refs = _split(table, corpus, group)
            rest = keys[1:]
            series = list(cells.groupby(rest, sort=True, dropna=False)) if rest else [((), cells)]
            shades = plt.get_cmap("viridis")(np.linspace(0.0, 0.85, max(len(series), 1)))
            for ax, metric in zip(row_axes, LINE_METRICS):
                for shade, (values, part) in zip(shades, series):
                    part = part[np.isfinite(part[f"{metric}_mean"])].sort_values(keys[0])
                    label = ", ".join(f"{k}={value_label(v)}" for k, v in zip(rest, values)) or group
                    ax.errorbar(part[keys[0]], part[f"{metric}_mean"], yerr=part[f"{metric}_sd"].fillna(0.0),
                                marker="o", ms=3.5, lw=1.2, capsize=2, color=shade, label=label)
                for ref in refs.to_dict("records"):
                    if np.isfinite(ref[f"{metric}_mean"]):
                        ax.axhline(ref[f"{metric}_mean"], ls="--", lw=0.9, color=colours[ref["head"]],
                                   label=f"{ref['head']} (off grid)")
                ax.set_xlabel(keys[0])
                ax.set_title(f"{corpus} / {group}: {TITLES[metric]}", fontsize=8.5)
            row_axes[0].legend(frameon=False, fontsize=7, loc="best")
        return to_svg(fig)
