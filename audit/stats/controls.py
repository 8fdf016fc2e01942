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

from audit.stats.decision import Gate, Verdict

PASSED, FAILED, UNDECIDED = Verdict.CONTROL_PASSED, Verdict.CONTROL_FAILED, Verdict.CONTROL_UNDECIDED
CONTROL = {Verdict.SUPPORTED: PASSED, Verdict.CONTRADICTED: FAILED, Verdict.INCONCLUSIVE: UNDECIDED}
PREFIX = "by construction: "


def as_control(row: dict, claim: dict) -> dict:
    """A claims-table row with its ``role``: a ``by_construction`` claim is a control in every
    case (its verdict read as a control where it has a test; a row without one, not run or
    untestable, keeps its verdict and reason but is still no claim of the headline or the
    matrix); any other claim is evidence, as it is."""
    why = claim.get("by_construction")
    # the gate from the test's own reason, before a control's reason is prefixed; the guard is
    # empty until audit.stats.guard withholds the verdict
    gate = Gate.of_row(row)
    row = dict(row, guard=row.get("guard") or "", gate=str(gate))
    if not why:
        return dict(row, role="evidence")
    row = dict(row, role="control")
    verdict = Verdict.of(row["verdict"])
    if verdict not in CONTROL or gate.untested:
        return row
    return dict(row, verdict=CONTROL[verdict], reason=f"{PREFIX}{why}; the control: {verdict}: {row.get('reason') or ''}")
