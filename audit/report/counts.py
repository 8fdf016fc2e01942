"""What the page counts: each claim row's role and gate, read from its decision record.

The claims tables carry, per row, ``role`` (evidence, or a control that holds by construction)
and ``gate`` (tested, or why not: not run, untestable, too few seeds, ...; ``audit.stats.decision``).
The headline, the verdict cards, the "cannot test" list and the verdict matrix all split the rows
by these two values, here, so that each count is the number of cells of that kind in the matrix
(issue 53: a control flagged by the guard had been counted as "1 not informative" among the claims,
and an untested one as "1 not tested"). Tables written before the columns existed (no ``gate``)
are read by the reason's head, as they were then.
"""

from __future__ import annotations

UNTESTED = ("not run", "untestable")   # gates of a claim this study cannot test at all


def gate(claim: dict) -> str:
    """The row's gate ('tested' or why not)."""
    value = claim.get("gate")
    if isinstance(value, str) and value:
        return value
    head = str(claim.get("reason") or "").split(":", 1)[0].strip()
    return head if head in UNTESTED else "tested"


def is_control(claim: dict) -> bool:
    """Whether the row is a control (a claim that holds by construction), whatever its verdict."""
    role = claim.get("role")
    if isinstance(role, str) and role:
        return role == "control"
    return str(claim.get("verdict") or "").startswith("control_")


def split(claims: list[dict]) -> dict[str, list[dict]]:
    """``claims`` (evidence the page can judge: tested or not yet decided), ``untested`` (evidence
    that this study cannot test: not run, untestable) and ``controls`` (every control row)."""
    evidence = [c for c in claims if not is_control(c)]
    return {"claims": [c for c in evidence if gate(c) not in UNTESTED],
            "untested": [c for c in evidence if gate(c) in UNTESTED],
            "controls": [c for c in claims if is_control(c)]}


def counts(claims: list[dict]) -> dict[str, int]:
    """verdict -> rows; a control without a test counts by its gate ('not run', 'untestable')."""
    out: dict[str, int] = {}
    for claim in claims:
        key = gate(claim) if is_control(claim) and gate(claim) in UNTESTED else str(claim["verdict"])
        out[key] = out.get(key, 0) + 1
    return out
