"""The audit's figures: matplotlib (Agg) drawings returned as SVG text, byte-identical per input.

Each function takes the tables it draws (pandas frames, numpy arrays) and returns one SVG
document as a string; ``python -m audit report figure`` (see ``audit.report.cli``) writes it to
``reports/<study>/figures/<name>.svg`` and the HTML rule inlines it. The matplotlib settings
that make the SVG byte-identical per input live in ``audit.plots``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from audit.plots import RC, empty_svg, head_colours, panels, plt, to_svg
from audit.report.levels import DEFAULT_LEVEL, level as level_text


def rank_decay(curves: dict[tuple[str, str], list[np.ndarray]]) -> str:
    """Normalised singular-value decay of the log-P matrix, one panel per corpus.

    Args:
        curves: (corpus, head) -> list over seeds of descending singular values, each (r,).

    Returns:
        SVG text: sigma_k / sigma_1 on a log axis against k; thin lines per seed, a thick line for
        the median over seeds (over the common length r_min).
    """
    curves = {key: [np.asarray(v, float) for v in vals if np.size(v)] for key, vals in curves.items()}
    curves = {key: vals for key, vals in curves.items() if vals}
    if not curves:
        return empty_svg("no successful run saved a log-P spectrum")
    corpora = sorted({corpus for corpus, _ in curves})
    colours = head_colours(head for _, head in curves)
    with plt.rc_context(RC):
        fig, axes = panels(len(corpora), 6.0, 3.8)
        for ax, corpus in zip(axes, corpora):
            for (c, head), vals in sorted(curves.items()):
                if c != corpus:
                    continue
                # sigma / sigma_1, floored so that exact zeros stay on the log axis
                normed = [np.maximum(v / v[0], 1e-17) if v[0] > 0 else np.full_like(v, 1e-17) for v in vals]
                for v in normed:
                    ax.plot(np.arange(1, len(v) + 1), v, color=colours[head], lw=0.6, alpha=0.35)
                r = min(len(v) for v in normed)
                median = np.median(np.stack([v[:r] for v in normed]), axis=0)
                ax.plot(np.arange(1, r + 1), median, color=colours[head], lw=2.0,
                        label=f"{head} (n={len(vals)})")
            ax.set_yscale("log")
            ax.set_xscale("log")
            ax.set_xlabel("index k of the singular value")
            ax.set_ylabel("σ_k / σ_1")
            ax.set_title(f"{corpus}: log-P singular-value decay")
            ax.legend(frameon=False, fontsize=8)
        return to_svg(fig)


def _corr_note(correlations: pd.DataFrame | None, corpus: str, x: str, y: str) -> str:
    if correlations is None or correlations.empty:
        return "no correlation declared in the study config"
    rows = correlations[(correlations["corpus"].astype(str) == corpus) & (correlations["x"] == x)
                        & (correlations["y"] == y) & (correlations["level"] == "runs")
                        & (correlations["restriction"].astype(str) == "none")]
    if rows.empty:
        return "no correlation declared for these columns"
    r = rows.iloc[0]
    # both intervals are the row's Fisher-z intervals at its ci_level, printed as the table recorded it
    return (f"Pearson r = {r['pearson_r']:.2f} [{r['pearson_ci_low']:.2f}, {r['pearson_ci_high']:.2f}], "
            f"perm. p = {r['pearson_perm_p']:.3g}\nSpearman ρ = {r['spearman_rho']:.2f} "
            f"[{r['spearman_ci_low']:.2f}, {r['spearman_ci_high']:.2f}], n = {int(r['n'])} runs"
            f"\nintervals: {level_text(r.get('ci_level'))} (Fisher z)")


def rank_vs_metric(runs: pd.DataFrame, correlations: pd.DataFrame | None,
                   x: str = "press_rank", y: str = "test_ppl") -> str:
    """Scatter of a rank column against a perplexity column, one point per successful run.

    Args:
        runs: the runs table (columns corpus, head, status, x, y).
        correlations: the correlations table or None; its unrestricted run-level row for (x, y)
            is printed in each panel.
        x, y: column names.

    Returns:
        SVG text, one panel per corpus, points coloured by head.
    """
    ok = _ok(runs, [x, y])
    if ok.empty:
        return empty_svg(f"no successful run has both {x} and {y}")
    colours = head_colours(ok["head"])
    with plt.rc_context(RC):
        corpora = sorted(ok["corpus"].astype(str).unique())
        fig, axes = panels(len(corpora), 5.6, 4.0)
        for ax, corpus in zip(axes, corpora):
            part = ok[ok["corpus"].astype(str) == corpus]
            for head, group in part.groupby("head", sort=True):
                ax.scatter(group[x], group[y], s=26, color=colours[str(head)], edgecolor="white",
                           linewidth=0.5, label=f"{head} (n={len(group)})", zorder=3)
            ax.set_xlabel(x)
            ax.set_ylabel(y)
            ax.set_title(f"{corpus}: {x} vs {y}")
            ax.text(0.02, 0.98, _corr_note(correlations, corpus, x, y), transform=ax.transAxes,
                    va="top", ha="left", fontsize=7.5, color="#333")
            ax.margins(0.08, 0.25)
            ax.legend(frameon=False, fontsize=8, loc="lower right")
        return to_svg(fig)


def _ok(runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    if any(c not in runs for c in columns):
        return runs.iloc[0:0]
    ok = runs[runs["status"].astype(str) == "ok"] if "status" in runs else runs
    ok = ok.copy()
    for c in columns:
        ok[c] = pd.to_numeric(ok[c], errors="coerce")
    ok = ok.dropna(subset=columns)
    if "corpus" not in ok:
        ok["corpus"] = "all"
    return ok


def seed_strip(runs: pd.DataFrame, metric: str = "test_ppl", level: float = DEFAULT_LEVEL) -> str:
    """Strip plot of one metric per head, every seed a point, with the mean and its t-interval.

    Args:
        runs: the runs table (corpus, head, seed, status, metric).
        metric: the column to plot.
        level: confidence level of the t-interval (the study's 1 - stats.alpha); each panel's
            title prints it.

    Returns:
        SVG text, one panel per corpus. Points are spread sideways by seed order (deterministic,
        no random jitter) so that tied values stay visible.
    """
    from scipy import stats

    ok = _ok(runs, [metric])
    if ok.empty:
        return empty_svg(f"no successful run has {metric}")
    colours = head_colours(ok["head"])
    with plt.rc_context(RC):
        corpora = sorted(ok["corpus"].astype(str).unique())
        n_heads = ok["head"].nunique()
        fig, axes = panels(len(corpora), max(3.6, 1.1 * n_heads + 1.6), 3.8)
        for ax, corpus in zip(axes, corpora):
            part = ok[ok["corpus"].astype(str) == corpus]
            heads = sorted(part["head"].astype(str).unique())
            for i, head in enumerate(heads):
                values = part[part["head"].astype(str) == head].sort_values("seed")[metric].to_numpy()
                offsets = np.linspace(-0.22, 0.22, len(values)) if len(values) > 1 else np.zeros(1)
                ax.scatter(i + offsets, values, s=22, color=colours[head], edgecolor="white",
                           linewidth=0.5, zorder=3)
                mean = values.mean()
                ax.hlines(mean, i - 0.32, i + 0.32, color="#222", lw=1.6, zorder=4)
                if len(values) > 1:
                    half = stats.t.ppf(0.5 + level / 2, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
                    ax.vlines(i + 0.36, mean - half, mean + half, color="#222", lw=1.2, zorder=4)
            ax.set_xticks(range(len(heads)), [f"{h}\n(n={int((part['head'].astype(str) == h).sum())})"
                                              for h in heads])
            ax.set_xlim(-0.6, len(heads) - 0.4)
            ax.set_ylabel(metric)
            ax.set_title(f"{corpus}: {metric} per seed\nbars: mean and its {level_text(level)} (t)")
            ax.grid(axis="x", visible=False)
        return to_svg(fig)


def wins_heatmap(wins: pd.DataFrame) -> str:
    """Pairwise word-similarity wins: cell (i, j) = benchmarks where head i's mean rho beats j's.

    Args:
        wins: the ``wordsim_wins`` table (corpus, head_i, head_j, wins, n_benchmarks).

    Returns:
        SVG text, one heatmap per corpus; the diagonal is blank.
    """
    if wins is None or wins.empty:
        return empty_svg("the word-similarity wins table has no rows (fewer than two heads?)")
    with plt.rc_context(RC):
        corpora = sorted(wins["corpus"].astype(str).unique())
        heads_all = sorted(set(wins["head_i"].astype(str)) | set(wins["head_j"].astype(str)))
        side = max(3.2, 0.62 * len(heads_all) + 1.8)
        fig, axes = panels(len(corpora), side + 0.9, side)
        for ax, corpus in zip(axes, corpora):
            part = wins[wins["corpus"].astype(str) == corpus]
            heads = sorted(set(part["head_i"].astype(str)) | set(part["head_j"].astype(str)))
            index = {h: k for k, h in enumerate(heads)}
            grid = np.full((len(heads), len(heads)), np.nan)
            for row in part.itertuples():
                grid[index[str(row.head_i)], index[str(row.head_j)]] = row.wins
            total = int(part["n_benchmarks"].max())
            image = ax.imshow(grid, cmap="Blues", vmin=0, vmax=max(total, 1))
            for (i, j), value in np.ndenumerate(grid):
                if np.isfinite(value):
                    ax.text(j, i, f"{int(value)}", ha="center", va="center", fontsize=9,
                            color="white" if value > 0.6 * total else "#111")
            # a head the guard flags (its reason leads the note, audit.stats.guard.guard_wins) is
            # named so on both axes: its wins count but say nothing about output heads
            notes = [str(n) for n in part.get("note", pd.Series(dtype=str)).fillna("")]
            labels = [f"{h} (not informative)" if any(n.startswith("not informative") and
                                                      (f": {h}: " in n or f"; {h}: " in n) for n in notes) else h
                      for h in heads]
            ax.set_xticks(range(len(heads)), labels, rotation=30, ha="right")
            ax.set_yticks(range(len(heads)), labels)
            ax.set_xlabel("head j")
            ax.set_ylabel("head i")
            ax.grid(False)
            ax.set_title(f"{corpus}: benchmarks (of {total}) where i beats j")
            fig.colorbar(image, ax=ax, shrink=0.8)
        return to_svg(fig)


def jacobian_spectra(curves: dict[tuple[str, str], list[np.ndarray]], threshold: float | None = None) -> str:
    """Mean normalised Jacobian singular values (d log p / d h) per head, one panel per corpus.

    Args:
        curves: (corpus, head) -> one array per run of the context-averaged singular values,
            each normalised by its context's largest (descending).
        threshold: the relative threshold below which values count as degenerate (drawn).
    """
    if not curves:
        return empty_svg("no run recorded Jacobian spectra")
    corpora = sorted({corpus for corpus, _ in curves})
    colours = head_colours(head for _, head in curves)
    with plt.rc_context(RC):
        fig, axes = panels(len(corpora))
        for ax, corpus in zip(axes, corpora):
            for (c, head), runs in sorted(curves.items()):
                if c != corpus:
                    continue
                length = min(len(r) for r in runs)
                mean = np.mean([r[:length] for r in runs], axis=0)
                ax.plot(np.arange(1, length + 1), np.maximum(mean, 1e-12), color=colours[head],
                        label=f"{head} (n={len(runs)})", linewidth=1.4)
            if threshold:
                ax.axhline(threshold, color="#555", linestyle="--", linewidth=0.8, label=f"threshold {threshold:g}")
            ax.set_yscale("log")
            ax.set_xlabel("index of singular value")
            ax.set_ylabel("σ / σ_max (mean over contexts and seeds)")
            ax.set_title(f"Jacobian spectra of the heads, {corpus}")
            ax.legend(fontsize=7, frameon=False)
        return to_svg(fig)
