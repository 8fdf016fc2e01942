"""Saturation and anisotropy over training (Godey, de la Clergerie & Sagot 2024), per head.

Godey et al. find that small language models "saturate": with a head of d below about 1000 the
last layer's representations become degenerate. Two per-epoch numbers of every run's log
(``metrics.json`` -> ``log``, written by ``audit.train.validation.validation_pass``) show it here:

- ``valid_input_cosine``: the mean cosine similarity of the head's inputs over the validation
  contexts (anisotropy; 0 for directions spread evenly, 1 when all point one way);
- ``output_singular_values``: the singular values of the tied output weight (V x d), summarised
  per epoch by the entropy effective rank (Roy & Vetterli 2007) as a share of d,
  exp(H(p)) / d with p_i = s_i / sum(s): 1 for a flat spectrum, small when a few directions
  carry the weight, the degeneration the paper calls spectral saturation. The last panel shows
  the whole normalised spectrum s_i / s_1 at the first and the last logged epoch.

``read_saturation`` collects the rows (failed runs too, up to where they stopped; runs whose log
predates these keys are left out; a head without an output layer has its anisotropy alone);
``saturation`` draws one row of three panels per corpus, per head the median over seeds (line)
and the band from the lowest to the highest seed.
"""

from __future__ import annotations


import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from audit.plots import RC, empty_svg, head_colours, plt, to_svg
from audit.report.curves import epoch_logs

COLUMNS = ["corpus", "head", "seed", "epoch", "input_cosine", "erank_share", "singular_values", "status"]


def erank_share(singular_values) -> float:
    """Entropy effective rank of a spectrum as a share of its length, in (0, 1]; NaN when the
    spectrum is empty or all zero. Zeros contribute nothing to the entropy (0 log 0 = 0)."""
    s = np.asarray(singular_values, float)
    if s.size == 0 or not np.isfinite(s).all() or s.sum() <= 0:
        return float("nan")
    p = s[s > 0] / s.sum()
    return float(np.exp(-(p * np.log(p)).sum()) / s.size)


def read_saturation(run_dirs) -> pd.DataFrame:
    """DataFrame[COLUMNS]: one row per logged epoch that recorded the two measurements."""
    rows = []
    for metrics, entry in epoch_logs(run_dirs):
        if "valid_input_cosine" not in entry:   # logged before issue 24
            continue
        # a head without output_layer() logs no output spectrum (metrics.json output_spectrum_note):
        # its anisotropy is drawn, its effective rank is NaN and left out of the bands
        sv = [float(v) for v in entry.get("output_singular_values", [])]
        rows.append({"corpus": metrics["corpus"], "head": metrics["head"], "seed": int(metrics["seed"]),
                     "epoch": int(entry["epoch"]), "input_cosine": float(entry.get("valid_input_cosine", np.nan)),
                     "erank_share": erank_share(sv), "singular_values": sv, "status": metrics["status"]})
    return pd.DataFrame(rows, columns=COLUMNS)


def band(data: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per (corpus, head, epoch): n, median, low, high of the finite values of ``column``."""
    finite = data[np.isfinite(data[column].astype(float))]
    grouped = finite.groupby(["corpus", "head", "epoch"], sort=True)[column]
    return grouped.agg(n="count", median="median", low="min", high="max").reset_index()


def spectrum_at(data: pd.DataFrame, which: str) -> pd.DataFrame:
    """Per (corpus, head): the median over seeds of s_i / s_1 at each seed's first or last logged
    epoch (``which``: 'first' or 'last'); column ``spectrum`` (array of length d)."""
    out = []
    for (corpus, head), part in data.groupby(["corpus", "head"], sort=True):
        pick = part.loc[part.groupby("seed")["epoch"].idxmin() if which == "first" else part.groupby("seed")["epoch"].idxmax()]
        spectra = [np.asarray(s, float) / s[0] for s in pick["singular_values"] if len(s) and s[0] > 0]
        if spectra and len({len(s) for s in spectra}) == 1:
            out.append({"corpus": corpus, "head": head, "spectrum": np.median(np.stack(spectra), axis=0)})
    return pd.DataFrame(out, columns=["corpus", "head", "spectrum"])


def saturation(data: pd.DataFrame) -> str:
    """SVG: per corpus, anisotropy and effective-rank share against epoch, and the normalised
    output spectrum at the first and the last epoch, per head."""
    if data.empty:
        return empty_svg("no run logged the singular values of its output weight (runs trained before issue 24)")
    corpora = sorted(data["corpus"].unique())
    colours = head_colours(sorted(data["head"].unique()))
    cosine, erank = band(data, "input_cosine"), band(data, "erank_share")
    first, last = spectrum_at(data, "first"), spectrum_at(data, "last")
    with plt.rc_context(RC):
        fig, axes = plt.subplots(len(corpora), 3, figsize=(15.6, 3.8 * len(corpora)), squeeze=False)
        for row, corpus in zip(axes, corpora):
            for ax, summary, label in ((row[0], cosine, "mean cosine of the head's inputs"),
                                       (row[1], erank, "effective rank of W / d")):
                for head, part in summary[summary["corpus"] == corpus].groupby("head", sort=True):
                    seeds = data[(data["corpus"] == corpus) & (data["head"] == head)]["seed"].nunique()
                    ax.fill_between(part["epoch"], part["low"], part["high"], color=colours[head], alpha=0.2, lw=0)
                    ax.plot(part["epoch"], part["median"], color=colours[head], lw=1.8, label=f"{head} (n={seeds})")
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))   # epochs are whole
                ax.set_xlabel("epoch")
                ax.set_ylabel(label)
            row[0].set_title(f"{corpus}: anisotropy (validation contexts)")
            row[1].set_title(f"{corpus}: spectral saturation of the output weight")
            unmeasured = sorted(set(data.loc[data["corpus"] == corpus, "head"])
                                - set(erank.loc[erank["corpus"] == corpus, "head"]))
            if unmeasured:   # heads without output_layer(): said, not left to be guessed from a gap
                row[1].text(0.02, 0.02, "not measured (no output_layer()): " + ", ".join(unmeasured),
                            transform=row[1].transAxes, fontsize=8, va="bottom")
            row[0].legend(frameon=False, fontsize=8)
            for spectra, style in ((first, "--"), (last, "-")):
                for rec in spectra[spectra["corpus"] == corpus].itertuples():
                    index = np.arange(1, len(rec.spectrum) + 1)
                    row[2].plot(index, rec.spectrum, style, color=colours[rec.head], lw=1.4)
            row[2].set_yscale("log")
            row[2].set_xlabel("index i of the singular value")
            row[2].set_ylabel("s_i / s_1 (median over seeds)")
            row[2].set_title(f"{corpus}: output spectrum, first (dashed) and last (solid) epoch")
        return to_svg(fig)
