"""Shared matplotlib setup: figures as SVG text, byte-identical per input.

Used by the report's figures and the synthetic study's. Determinism: a fixed ``svg.hashsalt``
makes the clip-path ids stable, ``svg.fonttype = 'none'`` keeps text as text (no glyph outlines
that depend on the installed fonts), and the date metadata is dropped. A figure without data is
an ``empty_svg`` that carries ``EMPTY_MARK``, which the HTML renderer leaves out.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot

import matplotlib.pyplot as plt  # noqa: E402

EMPTY_MARK = "audit:empty-figure"
RC = {
    "svg.hashsalt": "bottleneck-audit",
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e3e3e3",
    "grid.linewidth": 0.6,
    "figure.dpi": 100,
}
PALETTE = plt.get_cmap("tab10").colors


def head_colours(heads) -> dict[str, tuple]:
    """Colour per head, fixed by the heads' sorted order so every figure agrees."""
    return {head: PALETTE[i % len(PALETTE)] for i, head in enumerate(sorted(set(map(str, heads))))}


def to_svg(fig) -> str:
    """Serialise and close ``fig``; the same figure always gives the same bytes."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return buffer.getvalue()


def empty_svg(reason: str) -> str:
    """A small SVG saying why there is no figure; the HTML renderer skips it."""
    from xml.sax.saxutils import escape

    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="480" height="40" viewBox="0 0 480 40">'
            f'<!-- {EMPTY_MARK} --><text x="8" y="24" font-family="sans-serif" font-size="13">'
            f'No figure: {escape(reason)}</text></svg>\n')


def panels(n: int, width: float = 5.2, height: float = 3.6):
    fig, axes = plt.subplots(1, n, figsize=(width * n, height), squeeze=False)
    return fig, list(axes[0])
