"""The names of the rank summaries of a log-P spectrum: one list for every producer and reader.

``audit.evaluate.spectrum.rank_summary`` writes these keys for a trained run
(``audit.evaluate.run``) and for a synthetic fit (``audit.synthetic.fit``); the runs table,
the synthetic tables and the report read them. Import-free on purpose: the synthetic plan is
read while Snakemake parses the workflow, where neither torch nor SciPy should load.
"""

from __future__ import annotations

EPSILONS = (1e-3, 1e-4, 1e-5)  # epsilon-effective ranks reported


def erank_key(eps: float) -> str:
    """The key of the epsilon-effective rank at ``eps``: 1e-3 -> 'erank_1e-3'."""
    return f"erank_{eps:.0e}".replace("e-0", "e-")


RANK_KEYS = ("press_rank", "entropy_rank") + tuple(erank_key(eps) for eps in EPSILONS)


def rank_keys(prefix: str = "") -> list[str]:
    """``RANK_KEYS`` after ``prefix`` ('f_logits_', 'true_'), in the same order."""
    return [prefix + key for key in RANK_KEYS]
