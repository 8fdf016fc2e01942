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

from audit.stats.decision import CONTROLS, Gate, Role, Verdict


def gate(claim: dict) -> Gate:
    """The row's gate (tested, or why not)."""
    return Gate.of_row(claim)


def is_control(claim: dict) -> bool:
    """Whether the row is a control (a claim that holds by construction), whatever its verdict."""
    role = claim.get("role")
    if isinstance(role, str) and role:
        return Role(role) is Role.CONTROL
    return Verdict.of(claim.get("verdict")) in CONTROLS


def split(claims: list[dict]) -> dict[str, list[dict]]:
    """``claims`` (evidence the page can judge: tested or not yet decided), ``untested`` (evidence
    that this study cannot test: not run, untestable) and ``controls`` (every control row)."""
    evidence = [c for c in claims if not is_control(c)]
    return {"claims": [c for c in evidence if not gate(c).untested],
            "untested": [c for c in evidence if gate(c).untested],
            "controls": [c for c in claims if is_control(c)]}


def counts(claims: list[dict]) -> dict[str, int]:
    """verdict -> rows; a control without a test counts by its gate ('not run', 'untestable')."""
    out: dict[str, int] = {}
    for claim in claims:
        key = str(gate(claim)) if is_control(claim) and gate(claim).untested else str(claim["verdict"])
        out[key] = out.get(key, 0) + 1
    return out
