"""Why a comparisons row has no test, and the one gate of the Welch and multi-bootstrap tests.

A row enters its Holm family only with ``stats.min_seeds`` usable runs per arm and both heads
run (``eligible`` on a table, ``gated`` on one finalized row); every other row keeps a reason
whose head is one of ``DROP_KINDS``. Shared by ``audit.stats.comparisons`` and
``audit.stats.multiboot`` (which comparisons imports), so that both gate alike.
"""

from __future__ import annotations

import pandas as pd

from audit.stats.io import Settings

DROP_KINDS = ("not run", "too few seeds", "runs failed", "undefined")  # why a row has no p_adj


def drop_kind(reason: str) -> str:
    """Why a row left its Holm family, from the reason ``verdict`` gave: one of ``DROP_KINDS``
    (``undefined`` = an undefined p-value), or '' for a row with a test."""
    head = str(reason).split(":", 1)[0].strip()
    return head if head in DROP_KINDS else ""


def eligible(df: pd.DataFrame, settings: Settings) -> pd.Series:
    """Rows that may enter a Holm family: ``min_seeds`` usable runs per arm and both heads run.
    The one gate of both tests (``multiboot.row_columns`` asks ``gated``)."""
    return (df[["n_a", "n_b"]].min(axis=1) >= settings.min_seeds) & ~df["not_run"].astype(bool)


def gated(row: dict, settings: Settings) -> bool:
    """``eligible`` of one finalized row (which keeps the ``not run`` only in its reason)."""
    return min(row["n_a"], row["n_b"]) < settings.min_seeds or drop_kind(row["reason"]) == "not run"
