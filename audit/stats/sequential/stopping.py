"""Stop rules of the group-sequential design, vectorised over whole studies.

The same ``replay`` decides one real study at an interim analysis (``python -m audit interim``,
batch of 1) and 10,000 simulated ones (``python -m audit bench sequential``), so the error
rates the benchmark prints are those of the code the workflow runs.

A family is m comparisons (rows of ``comparisons:`` sharing a Holm family). At stage k every
still-active comparison is tested on all its seeds so far; then, in this order:

1. **Efficacy.** Holm's step-down on the repeated p-values (``audit.stats.sequential.repeated.repeated_p``)
   of the family: with r hypotheses not yet rejected, H_i is rejected when some look j <= k of
   it crossed the boundary of the spending design at level alpha / r. This is the graphical
   Holm procedure for group-sequential designs of Maurer & Bretz (2013): alpha of a rejected
   hypothesis is recycled to the others, at their past looks too, and the family-wise error
   rate stays <= alpha (closed testing with Bonferroni-split spending designs).
2. **Equivalence** (only with a declared margin): the same on the TOST p-values with one-sided
   boundaries, a separate family at alpha as in the fixed design's ``tost_p_adj``.
3. **Futility** (declared rule ``futility_power``; 0 turns it off): an undecided comparison
   before the last stage stops when its conditional power under the current trend, for
   efficacy and (with a margin) for equivalence at the final stage, is below the threshold.
   The rule is non-binding: the boundaries ignore it, so it can only lower the error rates.
4. At the last stage an undecided comparison stops as ``max``.

A stopped comparison keeps its data up to its stop; it can still be rejected later when alpha
is recycled to it (its decision then becomes efficacy), never by data it did not wait for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from audit.errors import AuditError
from audit.stats.sequential import boundaries as seq
from audit.stats.tests import welch_from_summaries

CONTINUE, EFFICACY, EQUIVALENCE, FUTILITY, MAX, UNDEFINED = range(6)
DECISIONS = ("continue", "efficacy", "equivalence", "futility", "max", "undefined")


@dataclass(frozen=True)
class Design:
    """A sequential seeds schedule and its decision settings (``seeds:`` mapping of a study)."""

    # the default design, chosen by simulation (python -m audit bench sequential --compare; docs/statistics.md):
    # looks at 4, 8, ..., 28, 30 seeds with linear (HSD gamma 0) spending
    initial: int = 4
    step: int = 4
    maximum: int = 30
    spending: str = "hsd"
    alpha: float = 0.05
    futility_power: float = 0.1
    gamma: float = seq.HSD_GAMMA  # Hwang-Shih-DeCani parameter; used only by spending "hsd"

    def __post_init__(self):
        seq.stage_sizes(self.initial, self.step, self.maximum)  # validates
        if self.spending not in seq.SPENDING:
            raise AuditError(f"seeds.spending: unknown {self.spending!r}; known: {', '.join(seq.SPENDING)}")
        seq.check_gamma(self.gamma)
        if not 0 <= self.futility_power < 1:
            raise AuditError(f"seeds.futility_power must be in [0, 1), got {self.futility_power}")

    @property
    def sizes(self) -> list[int]:
        return seq.stage_sizes(self.initial, self.step, self.maximum)

    @property
    def info_max(self) -> float:
        return float(seq.information(self.maximum, self.maximum))


def level_table(fractions, design: Design, m: int, sides: int, final: bool) -> np.ndarray:
    """Nominal p-levels of the looks for the Holm levels alpha / r, r = 1..m.

    Returns:
        shape (m, K): row r - 1 holds the K looks' nominal levels at level alpha / r.
    """
    return np.stack([seq.nominal_levels(seq.boundaries(fractions, design.alpha / r, design.spending,
                                                       sides, final, design.gamma), sides)
                     for r in range(1, m + 1)])


def holm(hit: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Holm's step-down when each hypothesis' test at every Holm level is known.

    Args:
        hit: shape (..., m, m) bool, hit[..., i, r - 1] = H_i is rejected at level alpha / r.
            Must be monotone in the level (true at alpha / r implies true at alpha / (r - 1)).
        valid: shape (..., m) bool, hypotheses in the family (a test that could not be run is
            left out, so it does not inflate the family size).

    Returns:
        shape (..., m) bool, the rejected hypotheses.
    """
    rejected = np.zeros(valid.shape, bool)
    size = valid.sum(-1)
    for _ in range(valid.shape[-1]):
        left = size - rejected.sum(-1)                       # r hypotheses not yet rejected
        idx = np.clip(left - 1, 0, None)[..., None, None]    # level alpha / r
        at_level = np.take_along_axis(hit, np.broadcast_to(idx, hit.shape[:-1] + (1,)), -1)[..., 0]
        newly = valid & ~rejected & at_level & (left > 0)[..., None]
        if not newly.any():
            break
        rejected |= newly
    return rejected


def _at_level(table: np.ndarray, left: np.ndarray) -> np.ndarray:
    """table (B, m, m) per comparison and Holm level; left (B, 1) hypotheses left -> (B, m)."""
    idx = np.broadcast_to((left - 1)[..., None], table.shape[:-1] + (1,))
    return np.take_along_axis(table, idx, -1)[..., 0]


def conditional_power(diff, se, info_now, info_max, crit_eff, crit_eq, margin):
    """Conditional power at the final stage under the current trend (theta = current estimate).

    Given the estimate ``diff`` with standard error ``se`` at information ``info_now`` (up to
    the common variance), the final estimate at ``info_max`` is N(diff, s^2) with
    s^2 = se^2 (info_now / info_max) (1 - info_now / info_max).

    Args:
        crit_eff: final two-sided z boundary; efficacy needs |final| > crit_eff se_final.
        crit_eq: final one-sided z boundary; equivalence needs |final| < margin - crit_eq se_final.
        margin: NaN for no equivalence test.

    Returns:
        (cp_eff, cp_eq), arrays of the broadcast shape; cp_eq is 0 without a margin.
    """
    ratio = np.clip(info_now / info_max, 0, 1)
    se_final = se * np.sqrt(ratio)
    s = np.maximum(se * np.sqrt(ratio * (1 - ratio)), 1e-300)
    a = crit_eff * se_final
    cp_eff = stats.norm.sf((a - diff) / s) + stats.norm.cdf((-a - diff) / s)
    b = np.nan_to_num(margin - crit_eq * se_final, nan=0.0)
    cp_eq = np.where(b > 0, stats.norm.cdf((b - diff) / s) - stats.norm.cdf((-b - diff) / s), 0.0)
    return cp_eff, cp_eq


def replay(p2, p_tost, diff, se, info, eff_table, eq_table, design: Design, last_stage: int,
           margin=np.nan) -> dict:
    """Run the stop rules from stage 1 to stage ``last_stage`` + 1 of a family.

    Shapes: B studies (1 for a real one), m comparisons, K stages available so far.

    Args:
        p2: (B, m, K) two-sided Welch p of each comparison on its first n_k seeds per arm
            (NaN where undefined). p_tost: (B, m, K) TOST p (NaN without a margin).
        diff, se: (B, m, K) mean difference a - b and its Welch standard error.
        info: (B, m, K) information n_a n_b / (n_a + n_b) of each look.
        eff_table, eq_table: nominal levels broadcastable to (B, m, m, K): [..., i, r - 1, k] is
            look k's two-sided (efficacy) / one-sided (equivalence) level at alpha / r.
        last_stage: index of the planned final stage (len(design.sizes) - 1).
        margin: equivalence margin, scalar or (B, m); NaN for none.

    Returns:
        dict of (B, m) arrays: ``decision`` (codes of ``DECISIONS``), ``stop`` (stage index of the
        stop, -1 while continuing), ``rejected`` and ``equivalent`` (Holm decisions at the
        last analysed stage), ``cp`` (the conditional power at the last look).
    """
    B, m, K = p2.shape
    eff_table = np.broadcast_to(eff_table, (B, m, m, eff_table.shape[-1]))
    eq_table = np.broadcast_to(eq_table, (B, m, m, eq_table.shape[-1]))
    margin = np.broadcast_to(np.asarray(margin, float), (B, m))
    decision = np.full((B, m), CONTINUE)
    stop = np.full((B, m), -1)
    hit_eff, hit_eq = np.zeros((B, m, m), bool), np.zeros((B, m, m), bool)
    tested, tested_eq = np.zeros((B, m), bool), np.zeros((B, m), bool)
    rejected, equivalent = np.zeros((B, m), bool), np.zeros((B, m), bool)
    cp = np.full((B, m), np.nan)
    for k in range(K):
        active = decision == CONTINUE
        pk, tk = np.where(active, p2[..., k], np.nan), np.where(active, p_tost[..., k], np.nan)
        hit_eff |= pk[..., None] < eff_table[..., k]
        hit_eq |= tk[..., None] < eq_table[..., k]
        tested |= np.isfinite(pk)
        tested_eq |= np.isfinite(tk)
        rejected, equivalent = holm(hit_eff, tested), holm(hit_eq, tested_eq)
        decided = np.full((B, m), CONTINUE)
        decided[equivalent] = EQUIVALENCE
        decided[rejected] = EFFICACY
        if k >= last_stage:
            decided[decided == CONTINUE] = MAX
        else:
            left = np.maximum(tested.sum(-1, keepdims=True) - rejected.sum(-1, keepdims=True), 1)
            left_eq = np.maximum(tested_eq.sum(-1, keepdims=True) - equivalent.sum(-1, keepdims=True), 1)
            crit_eff = seq.z_from_p(_at_level(eff_table[..., -1], left))
            crit_eq = seq.z_from_p(_at_level(eq_table[..., -1], left_eq), sides=1)
            cp_eff, cp_eq = conditional_power(diff[..., k], se[..., k], info[..., k], design.info_max,
                                              crit_eff, crit_eq, margin)
            cp = np.where(active, np.maximum(cp_eff, cp_eq), cp)
            futile = (decided == CONTINUE) & np.isfinite(pk) & (cp < design.futility_power)
            decided[futile] = FUTILITY
        decided[(decided == CONTINUE) & ~np.isfinite(pk)] = UNDEFINED
        newly = active & (decided != CONTINUE)
        decision[newly], stop[newly] = decided[newly], k
        # a comparison stopped earlier that Holm now rejects (alpha recycled to it) is efficacy
        decision[~active & rejected & (decision != EFFICACY)] = EFFICACY
    return dict(decision=decision, stop=stop, rejected=rejected, equivalent=equivalent, cp=cp)


def welch_arrays(mean_a, var_a, n_a, mean_b, var_b, n_b, margin=np.nan) -> dict:
    """``audit.stats.tests.welch_from_summaries`` (Welch's two-sided p and TOST from summaries,
    element-wise) plus each look's information n_a n_b / (n_a + n_b)."""
    n_a, n_b = np.asarray(n_a, float), np.asarray(n_b, float)
    out = welch_from_summaries(mean_a, var_a, n_a, mean_b, var_b, n_b, margin)
    return dict(out, info=seq.information(n_a, n_b))
