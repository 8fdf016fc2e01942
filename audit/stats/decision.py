"""One decision record per test: the verdict and the interval it follows from, made together.

Issue 53: a verdict, the interval printed beside it, the family its p was adjusted in and its guard
state used to be computed in different places and joined later by column names, and each table
could get the join wrong. A ``Decision`` holds all of them and refuses to exist when its verdict
and its interval disagree (``Decision.__post_init__``), so a table row that carries one cannot
print a verdict beside an interval that says otherwise.

The rule a record checks (``Rule``):

- ``excludes``: a decisive verdict's interval excludes ``null`` (a difference of 0, a one-sample
  bound shifted to 0, a correlation of 0); an undecided one's holds it;
- ``inside``: an equivalence is decided when the interval lies inside (-margin, margin) (TOST at
  level a is the 1 - 2a interval inside the margin); undecided when it does not;
- ``weak``: "|r| is weak" is supported when the interval of |r| lies below the threshold
  (``null``), contradicted when it lies at or above it, undecided when it straddles it.

A verdict the guard withheld (``guard`` set, verdict ``not_informative``) and a test that never
ran (``gate`` other than tested) carry no constraint: the page marks them as what they are.

Intervals beside Holm-adjusted decisions are taken at the level Holm's step-down tested each
hypothesis at (``audit.stats.multiplicity.step_alphas``): a rejected hypothesis at its step's
alpha / (m - j + 1), every other at alpha / (m - r) after r rejections. Each such interval
excludes the null exactly when its adjusted p is below alpha (that is the step-down rule), and its
printed level is its own marginal confidence level; together they are not simultaneous intervals
(Strassburger & Bretz 2008 give those, at the cost of a one-sided bound at 0 for every rejected
hypothesis): docs/statistics.md, "How a verdict is made".
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import Enum

import numpy as np

from audit.errors import AuditError


class Verdict(str, Enum):
    """Every verdict a table may print (the CSV holds the value)."""

    A_BETTER = "a_better"
    B_BETTER = "b_better"
    EQUIVALENT = "equivalent"
    SUPPORTED = "supported"
    CONTRADICTED = "contradicted"
    INCONCLUSIVE = "inconclusive"
    NOT_INFORMATIVE = "not_informative"                    # withheld by the guard (audit.stats.guard)
    NOT_INFORMATIVE_AT_SCALE = "not_informative_at_scale"  # would follow from geometry alone
    CONTROL_PASSED = "control_passed"                      # by construction (audit.stats.controls)
    CONTROL_FAILED = "control_failed"
    CONTROL_UNDECIDED = "control_undecided"

    def __str__(self) -> str:   # f-strings and CSV cells print the value, never "Verdict.X"
        return self.value

    @classmethod
    def of(cls, cell) -> "Verdict | None":
        """The verdict a table cell holds (None for an empty, NaN or unknown cell)."""
        try:
            return cls(str(cell))
        except ValueError:
            return None

    @property
    def control(self) -> bool:
        """Whether the verdict is a control's (a claim that holds by construction)."""
        return self in CONTROLS

    @property
    def decisive(self) -> bool:
        """Whether the verdict says the test decided (a difference, a side, an equivalence)."""
        return self in DECISIVE or self in (Verdict.CONTROL_PASSED, Verdict.CONTROL_FAILED)


DECISIVE = (Verdict.A_BETTER, Verdict.B_BETTER, Verdict.EQUIVALENT, Verdict.SUPPORTED, Verdict.CONTRADICTED)
CONTROLS = (Verdict.CONTROL_PASSED, Verdict.CONTROL_FAILED, Verdict.CONTROL_UNDECIDED)


class Gate(str, Enum):
    """Whether a row has a test, and if not why: the head of its reason, as a value of its own."""

    TESTED = "tested"
    NOT_RUN = "not run"              # an arm or a column is absent
    TOO_FEW_SEEDS = "too few seeds"  # below stats.min_seeds
    RUNS_FAILED = "runs failed"      # failures left too few seeds
    UNDEFINED = "undefined"          # the statistic cannot be computed (constant arms, ...)
    UNTESTABLE = "untestable"        # the claim names why no test exists

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, reason: str) -> "Gate":
        """The gate a reason written by the statistics starts with (``TESTED`` for any other)."""
        head = str(reason or "").split(":", 1)[0].strip()
        return next((g for g in cls if g is not cls.TESTED and g.value == head), cls.TESTED)

    @classmethod
    def of_row(cls, row: dict) -> "Gate":
        """A table row's gate: its ``gate`` column, or (a table written before the column, an
        empty or NaN cell) the head of its reason."""
        value = row.get("gate")
        return cls(value) if isinstance(value, str) and value else cls.of(row.get("reason"))

    def because(self, why: str) -> str:
        """The reason of a row this gate stopped: ``"<gate>: <why>"``, the one form ``of`` reads."""
        return f"{self.value}: {why}"

    @property
    def untested(self) -> bool:
        """Whether this study cannot test the row at all (an arm or column absent, or the claim
        names why no test exists), as opposed to tested, or tried on too few seeds."""
        return self in (Gate.NOT_RUN, Gate.UNTESTABLE)


class Rule(str, Enum):
    """How a record's verdict follows from its interval (module docstring)."""

    EXCLUDES = "excludes"
    INSIDE = "inside"
    WEAK = "weak"

    def __str__(self) -> str:
        return self.value


class Role(str, Enum):
    """Whether a record is evidence on a claim or a control that holds by construction."""

    EVIDENCE = "evidence"
    CONTROL = "control"

    def __str__(self) -> str:
        return self.value


def _f(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def decides(rule: Rule | str, low, high, null: float = 0.0, margin: float = math.nan) -> bool:
    """Whether the interval [low, high] decides under ``rule`` (NaN ends: it does not).

    ``excludes``: the interval misses ``null``; ``inside``: it lies inside (-margin, margin);
    ``weak``: |r|'s interval lies wholly below ``null`` or wholly at or above it.
    """
    low, high, null, margin = _f(low), _f(high), _f(null), _f(margin)
    if not (np.isfinite(low) and np.isfinite(high)):
        return False
    rule = Rule(rule)
    if rule is Rule.EXCLUDES:
        return high < null or low > null
    if rule is Rule.INSIDE:
        return bool(np.isfinite(margin)) and -margin < low and high < margin
    abs_low = 0.0 if low <= 0 <= high else min(abs(low), abs(high))
    abs_high = max(abs(low), abs(high))
    return abs_high < null or abs_low >= null


@dataclass(frozen=True)
class Decision:
    """A verdict with everything it rests on; construction fails when the two disagree.

    ``low``/``high`` at two-sided coverage ``level`` (``how`` says how that level was chosen);
    ``p``/``p_adj`` the test's raw and adjusted p within ``family`` of ``family_m`` tests;
    ``gate`` whether a test ran; ``guard`` the guard's reason ('' when none); ``role``
    evidence or control.
    """

    verdict: Verdict
    reason: str
    rule: Rule = Rule.EXCLUDES
    low: float = math.nan
    high: float = math.nan
    level: float = math.nan
    how: str = ""
    null: float = 0.0
    margin: float = math.nan
    p: float = math.nan
    p_adj: float = math.nan
    family: str = ""
    family_m: float = math.nan
    gate: Gate | None = None   # None: read from the reason's head (``Gate.of``)
    guard: str = ""
    role: Role = Role.EVIDENCE

    def __post_init__(self):
        if self.gate is None:
            object.__setattr__(self, "gate", Gate.of(self.reason))
        for name, kind in (("verdict", Verdict), ("gate", Gate), ("rule", Rule), ("role", Role)):
            object.__setattr__(self, name, kind(getattr(self, name)))
        broken = self.broken()
        if broken:
            raise AuditError(f"decision record: {broken}")

    def broken(self) -> str:
        """Why the verdict contradicts the interval beside it ('' when it does not)."""
        if self.guard or self.gate is not Gate.TESTED:
            return ""   # withheld or never tested: marked as such, whatever the interval
        verdict = self.verdict
        if verdict in (Verdict.NOT_INFORMATIVE, Verdict.NOT_INFORMATIVE_AT_SCALE):
            return ""   # withheld: the reason says by what
        decided = decides(self.rule, self.low, self.high, self.null, self.margin)
        if verdict.decisive and not decided:
            return (f"{verdict} beside [{self.low:.4g}, {self.high:.4g}] ({self.rule}, null {self.null:g}, "
                    f"margin {self.margin:g}), which does not decide")
        if verdict in (Verdict.INCONCLUSIVE, Verdict.CONTROL_UNDECIDED) and decided:
            return (f"{verdict} beside [{self.low:.4g}, {self.high:.4g}] ({self.rule}, null {self.null:g}, "
                    f"margin {self.margin:g}), which decides")
        return ""

    def columns(self, prefix: str = "") -> dict:
        """The record as table columns (enums as their values)."""
        return {f"{prefix}{k}": (str(v) if isinstance(v, Enum) else v) for k, v in asdict(self).items()}


def record(row: dict, low: str = "ci_low", high: str = "ci_high", level: str = "ci_level", rule=None,
           margin=None, verdict=None) -> Decision:
    """The decision record of a table row: its verdict with the interval named by ``low``/``high``
    (the row's ``rule``, ``null`` and ``margin`` unless given); raises ``AuditError`` when they
    disagree. ``verdict`` overrides the row's (one test of a row that holds two)."""
    return Decision(verdict=verdict or str(row["verdict"]), reason=str(row.get("reason") or ""),
                    rule=rule or row.get("rule") or Rule.EXCLUDES, low=_f(row.get(low)), high=_f(row.get(high)),
                    level=_f(row.get(level)), how=str(row.get("ci_how") or ""), null=_f(row.get("null", 0.0)),
                    margin=_f(row.get("margin", math.nan) if margin is None else margin), p=_f(row.get("p")),
                    p_adj=_f(row.get("p_adj")), family=str(row.get("family") or ""),
                    family_m=_f(row.get("family_m", row.get("family_size"))),
                    gate=Gate.of_row(row),
                    guard=str(row.get("guard") or ""), role=str(row.get("role") or Role.EVIDENCE))


def stamped(row: dict) -> dict:
    """A claims-table row checked as its decision record, with its ``gate`` (a claim row carries
    ``rule``, ``null`` and ``margin``: the interval its verdict follows from)."""
    return dict(row, gate=str(record(row).gate))


def comparison_records(row: dict) -> tuple[Decision, Decision | None]:
    """The two tests of a comparisons row as records, each raising when it disagrees with the
    row's verdict: Welch's (a difference, ``diff_ci_*``: decided for ``a_better``/``b_better``,
    undecided otherwise) and TOST's (an equivalence, ``tost_ci_*``; None without a margin:
    decided for ``equivalent`` and beside a difference whose interval also lies inside the
    margin, undecided otherwise). A guarded row (``not_informative``) binds neither."""
    verdict = Verdict(str(row["verdict"]))
    margin = _f(row.get("equivalence_margin"))
    has_tost = bool(np.isfinite(_f(row.get("tost_ci_low"))))
    if verdict is Verdict.NOT_INFORMATIVE:
        welch_v = tost_v = verdict
    else:
        welch_v = verdict if verdict in (Verdict.A_BETTER, Verdict.B_BETTER) else Verdict.INCONCLUSIVE
        both = welch_v is not Verdict.INCONCLUSIVE and has_tost and decides(
            Rule.INSIDE, row["tost_ci_low"], row["tost_ci_high"], margin=margin)   # "but |diff| < margin"
        tost_v = Verdict.EQUIVALENT if verdict is Verdict.EQUIVALENT or both else Verdict.INCONCLUSIVE
    welch = record(row, "diff_ci_low", "diff_ci_high", "ci_level", Rule.EXCLUDES, math.nan, str(welch_v))
    tost = (record(row, "tost_ci_low", "tost_ci_high", "tost_ci_level", Rule.INSIDE, margin, str(tost_v))
            if has_tost else None)
    return welch, tost
