"""Claims that hold by construction: judged as controls, never counted as empirical support.

Some claims follow from algebra or geometry at the scale a study runs: a plain softmax's
double-centred log-probabilities span at most the d directions of its output matrix, so "softmax
outputs reveal the hidden size" can fail only by numerical breakdown. Such a claim (its config
entry carries ``by_construction: <why>``) is still tested, but its verdict says what the test is:
a control of the measurement that ``control_passed`` (the test supported it), ``control_failed``
(it contradicted it) or ``control_undecided`` (it decided neither: too few runs, say). No control
verdict is decisive in the verdict matrix (``audit.report.scales.DECISIVE``) or counted among the
claims in the headline; the reason leads with why the claim holds by construction. A row with no
test (``not run``, ``untestable``) or another verdict (not informative) is left as it is.
"""

from __future__ import annotations

PASSED, FAILED, UNDECIDED = "control_passed", "control_failed", "control_undecided"
CONTROL = {"supported": PASSED, "contradicted": FAILED, "inconclusive": UNDECIDED}
PREFIX = "by construction: "


def as_control(row: dict, claim: dict) -> dict:
    """A claims-table row of a ``by_construction`` claim with its verdict read as a control; any
    other row, and a row without a test, as it is."""
    why = claim.get("by_construction")
    reason = str(row.get("reason") or "")
    if not why or row["verdict"] not in CONTROL or reason.startswith(("not run", "untestable")):
        return row
    return dict(row, verdict=CONTROL[row["verdict"]], reason=f"{PREFIX}{why}; the control: {row['verdict']}: {reason}")
