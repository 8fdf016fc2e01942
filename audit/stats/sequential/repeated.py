"""Sequentially valid p-values and repeated confidence intervals of a group-sequential design.

A comparison analysed at looks 1..k of a spending design (``boundaries``) can be summarised by
three numbers that stay valid after a data-dependent stop: the stage-wise ordering p-value (when
it stopped for efficacy or reached the end), the repeated p-value (whatever the stopping rule;
Holm's step-down runs on it) and the repeated confidence interval, which excludes 0 exactly when
the repeated p is below the design's alpha. Both repeated quantities compare a look's p with the
same nominal level (``look_level``), so they never disagree by a root finder's tolerance.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats

from audit.stats.sequential.boundaries import (HSD_GAMMA, boundaries, check_fractions, crossing_probabilities,
                                               nominal_levels, z_from_p)


def stagewise_p(p_obs: float, fractions, bounds) -> float:
    """Two-sided stage-wise ordering p-value (Armitage 1957; Fairbanks & Madsen 1982; Tsiatis,
    Rosner & Mehta 1984) of a comparison analysed at the last of ``fractions``.

    Outcomes are ordered by the stage they stop at, then by |Z|: p = P0(cross before stage k)
    + P0(reach stage k and |Z_k| >= |z_obs|). Valid when the comparison stopped for efficacy at
    stage k or reached the final stage; for a stop for equivalence or futility before the end
    the ordering is not defined and the caller reports the repeated p-value instead.

    Args:
        p_obs: the stage-k two-sided p of the test (mapped to |z_obs| by ``z_from_p``).
        fractions: shape (k,), information fractions of stages 1..k.
        bounds: shape (k,), the boundaries used; only stages 1..k-1 enter.
    """
    if not np.isfinite(p_obs):
        return math.nan
    c = np.array(bounds, float)[: len(fractions)]
    c[-1] = z_from_p(p_obs)
    return float(min(1.0, crossing_probabilities(c, fractions).sum()))


def look_level(fractions, j: int, alpha: float, kind: str = "obf", sides: int = 2, final: bool = False,
               gamma: float = HSD_GAMMA) -> float:
    """Nominal level of look ``j`` (0-based) of the spending design at level ``alpha``: the p below
    which that look rejects, given the looks 0..j (later looks never enter a boundary).

    The one computation behind both the repeated p-value (its root in alpha) and the repeated
    confidence interval (the same look at the design's alpha), so the two compare a look's p with
    the very same number.

    Args:
        fractions: shape (k,), information fractions of the looks so far; j < k.
        final: the last of ``fractions`` is the final analysis (spends all of alpha); only look
            ``k - 1`` can be final.
    """
    t = np.asarray(fractions, float).reshape(-1)
    is_final = bool(final) and j == len(t) - 1
    return float(nominal_levels(boundaries(t[: j + 1], alpha, kind, sides, is_final, gamma)[j:], sides)[0])


def repeated_p(p_history, fractions, kind: str = "obf", sides: int = 2, final: bool = False,
               gamma: float = HSD_GAMMA, alpha: float | None = None) -> float:
    """Repeated p-value (Jennison & Turnbull 1989, 2000 ch. 9) after the looks so far.

    The smallest level alpha' at which some look j <= k would have rejected:
    min_j {alpha': p_j <= nominal_j(alpha')}. It is valid whatever the stopping rule (also
    after a data-dependent stop for equivalence or futility), and p_rep < alpha exactly when
    the design at level alpha has rejected, so Holm on repeated p-values is the graphical
    Holm procedure for group-sequential designs (Maurer & Bretz 2013).

    Args:
        p_history: shape (k,), the p of each look (two-sided for sides=2, one-sided/TOST for
            sides=1); NaN for a look without a test (or without new information): it does
            not enter.
        fractions: shape (k,), information fractions of those looks.
        final: the last look is the final analysis (spends all of alpha').
        gamma: the HSD parameter when ``kind`` is ``hsd``.
        alpha: the design's level, if the result is to be compared with it: each look's root is
            then bracketed on the side of alpha that the comparison p_j < ``look_level(alpha)``
            gives, so "p_rep < alpha" is exactly "some look's p is below its nominal level at
            alpha" and never depends on the root finder's tolerance.

    Returns:
        p in (0, 1]; NaN when no look has a finite p.
    """
    p = np.asarray(p_history, float).reshape(-1)
    t = check_fractions(fractions)
    best = math.nan
    for j in np.flatnonzero(np.isfinite(p)):

        def gap(a, j=j):
            return look_level(t, j, a, kind, sides, final, gamma) - p[j]

        hi = 1 - 1e-9
        if p[j] <= 0:
            a = 0.0
        elif p[j] >= hi or gap(hi) < 0:
            a = 1.0
        elif gap(p[j]) >= 0:  # nominal_j(a) <= a: only a single final look has equality
            a = float(p[j])
        else:
            low, high = p[j], hi
            if alpha is not None and p[j] < alpha < hi:
                if gap(alpha) > 0:   # the look rejects at alpha: its root lies strictly below alpha
                    high = alpha
                else:
                    low = alpha
            a = optimize.brentq(gap, low, high, xtol=1e-12, rtol=1e-6)
            if high == alpha:
                a = min(a, float(np.nextafter(alpha, 0.0)))
        best = a if not np.isfinite(best) else min(best, a)
    return float(best)


def repeated_ci_over_looks(diff, se, df, level_p, stop: int, *, p) -> tuple[float, float]:
    """The repeated confidence intervals of looks 0..stop intersected (Jennison & Turnbull 2000,
    ch. 9): they cover the true difference simultaneously with probability >= 1 - alpha, so their
    intersection does too. The last look's interval alone can straddle 0 after an earlier look
    crossed (a Holm step-down that rejects on an earlier look's repeated p).

    Agreement with the repeated p-value (``repeated_p`` over the same ``p``, with ``level_p``
    from ``look_level`` at alpha), by construction:

    - the looks are the same: only looks with a finite ``p`` enter. A look without a test, or
      without new information (``interim.fractions`` sets its p to NaN; its diff and se are
      those of the look before), contributes to neither; its interval at its own (planned)
      nominal level would be narrower than the data warrant;
    - each look's interval excludes 0 exactly when |diff| / se > t_df^-1(1 - level / 2), i.e.
      when its p < its nominal level, the comparison ``repeated_p(alpha=...)`` decides by;
    - the intersection excludes 0 exactly when some look's interval does (an interval inside
      all of them misses 0 iff one of them does); should the intervals not overlap (looks that
      disagree beyond the design's level; some look then excludes 0), the interval of the
      latest look that excludes 0 is returned, never one that covers 0.

    So the interval excludes 0 exactly when the repeated p is below alpha, up to the rounding of
    Student's t tail against its quantile (relative 1e-15; no finite-precision root enters).

    Args: arrays of shape (K,) per look (``level_p``: the nominal two-sided levels; ``p``: the
    looks' two-sided p, NaN where a look does not count); ``stop``: the index of the stopping
    (or latest) look. Returns (low, high), NaN when no look has a test.
    """
    lows, highs = repeated_ci(*(np.asarray(a, float)[: stop + 1] for a in (diff, se, df, level_p)))
    ok = np.isfinite(np.asarray(p, float)[: stop + 1]) & np.isfinite(lows) & np.isfinite(highs)
    if not ok.any():
        return math.nan, math.nan
    low, high = float(lows[ok].max()), float(highs[ok].min())
    if low <= high:
        return low, high
    latest = np.flatnonzero(ok & ((lows > 0) | (highs < 0)))[-1]
    return float(lows[latest]), float(highs[latest])


def repeated_ci(diff, se, df, level_p) -> tuple:
    """Repeated confidence interval diff -/+ t_{df}^-1(1 - level_p / 2) se (Jennison & Turnbull
    1989): with ``level_p`` the stage's two-sided nominal level of the design at alpha, the
    intervals of all stages cover the true difference simultaneously with probability >= 1 - alpha,
    so the interval at a data-dependent stop is valid.

    Args: arrays of the same shape (or scalars). Returns (low, high).
    """
    with np.errstate(invalid="ignore"):
        half = stats.t.isf(np.asarray(level_p, float) / 2, df) * se
    return diff - half, diff + half
