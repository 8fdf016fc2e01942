"""Why a comparisons row has no test, and the one gate of the Welch and multi-bootstrap tests.

A row enters its Holm family only with ``stats.min_seeds`` usable runs per arm and both heads
run (``eligible`` on a table, ``gated`` on one finalized row); every other row keeps a reason
whose gate (``audit.stats.decision.Gate``, the head of the reason) is one of ``DROP_KINDS``. Shared by ``audit.stats.comparisons`` and
``audit.stats.multiboot`` (which comparisons imports), so that both gate alike.
"""

from __future__ import annotations

import pandas as pd

from audit.stats.decision import Gate
from audit.stats.io import Settings

# why a row has no p_adj, in the order the notes count them
DROP_KINDS = (Gate.NOT_RUN, Gate.TOO_FEW_SEEDS, Gate.RUNS_FAILED, Gate.UNDEFINED)


def drop_kind(reason: str) -> Gate | None:
    """Why a row left its Holm family, from the reason ``verdict`` gave: one of ``DROP_KINDS``
    (``Gate.UNDEFINED`` = an undefined p-value), or None for a row with a test."""
    gate = Gate.of(reason)
    return gate if gate in DROP_KINDS else None


def eligible(df: pd.DataFrame, settings: Settings) -> pd.Series:
    """Rows that may enter a Holm family: ``min_seeds`` usable runs per arm and both heads run.
    The one gate of both tests (``multiboot.row_columns`` asks ``gated``)."""
    return (df[["n_a", "n_b"]].min(axis=1) >= settings.min_seeds) & ~df["not_run"].astype(bool)


def gated(row: dict, settings: Settings) -> bool:
    """``eligible`` of one finalized row (which keeps the ``not run`` only in its reason)."""
    return min(row["n_a"], row["n_b"]) < settings.min_seeds or drop_kind(row["reason"]) is Gate.NOT_RUN
