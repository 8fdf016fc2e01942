"""Claims that hold by construction: judged as controls, never counted as empirical support.

Some claims follow from algebra or geometry at the scale a study runs: a plain softmax's
double-centred log-probabilities span at most the d directions of its output matrix, so "softmax
outputs reveal the hidden size" can fail only by numerical breakdown. Such a claim (its config
entry carries ``by_construction: <why>``) is still tested, but its verdict says what the test is:
a control of the measurement that ``control_passed`` (the test supported it) or
``control_failed`` (it contradicted it); an inconclusive test stays ``inconclusive``. Neither
control verdict is decisive in the verdict matrix (``audit.report.scales.DECISIVE``) or counted
as support in the headline; the reason leads with why the claim holds by construction.
"""

from __future__ import annotations

PASSED, FAILED = "control_passed", "control_failed"
PREFIX = "by construction: "


def as_control(row: dict, claim: dict) -> dict:
    """A claims-table row of a ``by_construction`` claim with its verdict read as a control; any
    other row as it is."""
    why = claim.get("by_construction")
    if not why:
        return row
    verdict = {"supported": PASSED, "contradicted": FAILED}.get(row["verdict"], row["verdict"])
    return dict(row, verdict=verdict, reason=f"{PREFIX}{why}; the control: {row['verdict']}: {row['reason']}")
