"""Power of Welch's test at a declared margin, and the seeds per arm that reach a target power.

This is prospective power at a declared effect (the equivalence margin), never "observed power".
The test it describes is the one that drives the verdicts: Welch's two-sided t-test at ``alpha``.
Its power is the usual noncentral-t approximation (Satterthwaite df at the planning SDs): with
the observed SDs ``s_a``, ``s_b`` as planning values,

    se = sqrt(s_a^2 / n_a + s_b^2 / n_b)            (the Welch standard error of the difference)
    df = se^4 / ((s_a^2 / n_a)^2 / (n_a - 1) + (s_b^2 / n_b)^2 / (n_b - 1))   (Welch-Satterthwaite)
    power = P(T > t_crit) + P(T < -t_crit),   T ~ noncentral t(df, nc = margin / se),
    t_crit = t_{1 - alpha/2}(df).

So the margin is standardised by the Welch standard error, not by one SD. With equal n and
equal SDs this is exactly R's ``power.t.test(..., strict = TRUE)`` (df = 2n - 2, pooled SD).

Why not statsmodels' ``TTestIndPower``: it is the pooled-variance test only, and its
``power`` calls SciPy's noncentral t far in the tail, where ``nct.cdf`` returns NaN erratically
(standardised margins d of about 4-10 at n = 10-12 gave NaN power where the power is 1.0).
Here each tail comes from SciPy's ``nct``; a tail that is not a probability is recomputed by
integrating over the chi distribution of the standard error (``_tail_by_integration``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import integrate, stats

from audit.stats.tests import welch_se_df

_MAX_SEEDS = 10 ** 7   # beyond this, seeds_needed is reported as NaN rather than searched further


def _tail_by_integration(x: float, df: float, nc: float, upper: bool) -> float:
    """P(T > x) (upper) or P(T <= x) of T ~ noncentral t(df, nc), by quadrature.

    T = (Z + nc) / U with Z standard normal and U = chi_df / sqrt(df), independent, so
    P(T > x) = E_U[Phi(nc - x U)] and P(T <= x) = E_U[Phi(x U - nc)]. U's density is integrated
    between its 1e-15 and 1 - 1e-15 quantiles (the neglected mass is below 2e-15).
    """
    u = stats.chi(df, scale=1 / math.sqrt(df))
    sign = 1.0 if upper else -1.0

    def integrand(v):
        return stats.norm.cdf(sign * (nc - x * v)) * u.pdf(v)

    lo, hi = u.ppf(1e-15), u.isf(1e-15)
    val, _ = integrate.quad(integrand, lo, hi, epsabs=1e-15, epsrel=1e-12, limit=200,
                            points=[u.median()])
    return float(min(max(val, 0.0), 1.0))


def nct_tail(x: float, df: float, nc: float, upper: bool) -> float:
    """P(T > x) (``upper``) or P(T <= x) of a noncentral t, finite and in [0, 1]."""
    with np.errstate(all="ignore"):
        val = stats.nct.sf(x, df, nc) if upper else stats.nct.cdf(x, df, nc)
    if np.isfinite(val) and 0.0 <= val <= 1.0:
        return float(val)
    return _tail_by_integration(x, df, nc, upper)


def welch_power(sd_a: float, sd_b: float, n_a: int, n_b: int, margin: float, alpha: float) -> float:
    """Power of Welch's two-sided test at ``alpha`` to detect a true difference = ``margin``.

    Args:
        sd_a, sd_b: planning SDs (the observed sample SDs, ddof = 1); one may be zero.
        n_a, n_b: seeds per arm, each >= 2.
        margin: the difference to detect, metric units, > 0.

    Returns:
        Power in [0, 1]; NaN when undefined (a missing input, n < 2, margin not > 0, or both
        SDs zero, where the Welch test itself is undefined).
    """
    if not (margin > 0 and n_a >= 2 and n_b >= 2 and np.isfinite(sd_a) and np.isfinite(sd_b)):
        return math.nan
    se, df = welch_se_df(sd_a ** 2, n_a, sd_b ** 2, n_b)
    if not se > 0:
        return math.nan
    nc = margin / se
    crit = float(stats.t.ppf(1 - alpha / 2, df))
    power = nct_tail(crit, df, nc, upper=True) + nct_tail(-crit, df, nc, upper=False)
    return min(power, 1.0)


def seeds_needed(sd_a: float, sd_b: float, margin: float, alpha: float, target: float) -> float:
    """Seeds per arm for Welch's test to reach ``target`` power at a true difference = margin.

    Assumes equal n per arm (n_a = n_b = n) with the observed SDs as planning values; power is
    ``welch_power`` and increases with n, so the answer is found by doubling then bisection.

    Returns:
        The smallest integer n >= 2 per arm, or NaN when the inputs do not define it (as for
        ``welch_power``) or n would exceed 10^7.
    """
    def power(n):
        return welch_power(sd_a, sd_b, n, n, margin, alpha)

    if not np.isfinite(power(2)):
        return math.nan
    if power(2) >= target:
        return 2.0
    lo, hi = 2, 4          # invariant: power(lo) < target
    while power(hi) < target:
        lo, hi = hi, hi * 2
        if hi > _MAX_SEEDS:
            return math.nan
    while hi - lo > 1:     # invariant: power(lo) < target <= power(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if power(mid) < target else (lo, mid)
    return float(hi)
