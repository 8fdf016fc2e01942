"""Does a printed p-value follow from the printed means, SDs and n? And if not, which n gives it?

The audited papers print two-sided Student p-values (pooled variance) computed from mean +- SD
over n seeds. ``reproduce`` recomputes Student's p from the printed summaries and compares it with
the printed p at the printed precision (its significant digits). When they differ it searches
the sample sizes that would give the printed value: equal n per arm (and the real-valued n where
Student's p crosses the printed value), then unequal (n_a, n_b). This is arithmetic on the
printed numbers, not a claim about what the authors ran.
"""

from __future__ import annotations

import math

from scipy import optimize

from audit.stats.published.summaries import student_p_from_stats as student_p

_MAX_N = 60   # search range for the n that would give a printed p


def sig_digits(printed: str) -> int:
    """Significant digits of a number as printed: '3.92e-1' -> 3, '0.62' -> 2, '0.0641' -> 3."""
    mantissa = printed.strip().lower().split("e")[0].lstrip("+-")
    digits = mantissa.replace(".", "").lstrip("0")
    return max(1, len(digits))


def round_sig(value: float, digits: int) -> float:
    """``value`` rounded to ``digits`` significant digits."""
    if value == 0 or not math.isfinite(value):
        return value
    return float(f"{value:.{digits - 1}e}")


def reproduce(mean_a, sd_a, n_a, mean_b, sd_b, n_b, printed: str) -> tuple[bool, str]:
    """Whether Student's p from the summaries equals the printed p at its printed digits.

    Returns:
        (reproduced, text): the text gives our p at the printed precision and, when it does not
        reproduce, the n that would give the printed p (or says that none in 2..60 does).
    """
    digits = sig_digits(printed)
    target = round_sig(float(printed), digits)
    ours = student_p(mean_a, sd_a, n_a, mean_b, sd_b, n_b)
    shown = f"{round_sig(ours, max(digits, 3)):.{max(digits, 3)}g}"
    if round_sig(ours, digits) == target:
        return True, f"Student p = {shown} at n = {n_a} / {n_b}: reproduces {printed}"
    text = f"Student p = {shown} at n = {n_a} / {n_b}, not {printed}"

    def p_equal(n):
        return student_p(mean_a, sd_a, n, mean_b, sd_b, n)

    equal = [n for n in range(2, _MAX_N + 1) if round_sig(p_equal(n), digits) == target]
    if equal:
        text += f"; equal n per arm that give {printed}: {', '.join(map(str, equal))}"
    else:
        crossing = next((n for n in range(2, _MAX_N) if (p_equal(n) - target) * (p_equal(n + 1) - target) <= 0), None)
        if crossing is None:
            text += f"; no equal n in 2..{_MAX_N} comes near {printed}"
        else:
            real_n = optimize.brentq(lambda n: p_equal(n) - target, crossing, crossing + 1)
            text += (f"; no equal n gives {printed} (n = {crossing}: {p_equal(crossing):.3g}, n = {crossing + 1}: "
                     f"{p_equal(crossing + 1):.3g}; Student p = {printed} at real-valued n = {real_n:.2f})")
    unequal = [(i, j) for i in range(2, _MAX_N + 1) for j in range(2, _MAX_N + 1)
               if i != j and round_sig(student_p(mean_a, sd_a, i, mean_b, sd_b, j), digits) == target]
    if unequal:
        shown_pairs = ", ".join(f"({i}, {j})" for i, j in unequal[:6])
        more = f" and {len(unequal) - 6} more" if len(unequal) > 6 else ""
        text += f"; unequal (n_a, n_b) that give {printed}: {shown_pairs}{more}"
    return False, text
