"""Multiple-comparison correction that tolerates missing p-values.

statsmodels' ``multipletests`` mishandles NaN input (all-NaN output in older versions,
statsmodels#2899; in 0.15 the NaNs still count towards the family size m) and older versions
crash on an empty array. Here NaN p-values are dropped from the family, counted, and left NaN
in the output, so one undefined test never poisons or inflates the others.

Holm itself is computed here (``holm``), not by ``multipletests``: statsmodels 0.15 runs
``gc.collect()`` on every call, 0.1-0.2 s over a heap holding torch and pandas, and the audit
adjusts a family thousands of times (every trajectory budget, every admissible n of a published
row): it made the test suite 3.5x slower. The two agree to the last bit (tests/stats/
test_multiplicity.py) and with R's ``p.adjust(method = "holm")`` (tests/fixtures/r_golden.R).
"""

from __future__ import annotations

import numpy as np
from statsmodels.stats.multitest import multipletests

METHOD = "holm"  # Holm's step-down: controls the family-wise error rate, no independence needed


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values of finite ``p`` (shape (m,), m >= 1): with p sorted
    ascending, p_adj_(j) = min(1, max_{k <= j} (m - k + 1) p_(k)), returned in the input's order
    (equal p get equal adjusted p, so the sort's handling of ties does not matter)."""
    order = np.argsort(p, kind="stable")
    scaled = np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order])
    out = np.empty(len(p))
    out[order] = np.minimum(scaled, 1.0)
    return out


def adjust(pvalues, method: str = METHOD) -> tuple[np.ndarray, int, int]:
    """Adjust the finite p-values of one family; NaN entries are excluded and stay NaN.

    Args:
        pvalues: shape (m,), raw p-values of one family, NaN for tests that could not be run.
        method: a statsmodels ``multipletests`` method name (default Holm).

    Returns:
        (adjusted, family_size, n_dropped): adjusted has shape (m,) with NaN where the input
        was NaN; family_size is the number of finite p-values the correction used.
    """
    p = np.asarray(pvalues, dtype=float).reshape(-1)
    out = np.full(p.shape, np.nan)
    keep = np.isfinite(p)
    if keep.any():
        out[keep] = holm(p[keep]) if method == "holm" else multipletests(p[keep], method=method)[1]
    return out, int(keep.sum()), int((~keep).sum())


def step_alphas(pvalues, alpha: float) -> np.ndarray:
    """The level at which Holm's step-down tested each hypothesis of one family (NaN: no test).

    With the finite p sorted, p_(1) <= ... <= p_(m), and r the hypotheses Holm rejects at
    ``alpha``, the j-th smallest was tested at alpha / (m - j + 1) when j <= r (its step rejected
    it) and every other at alpha / (m - r), the step where the procedure stopped. So
    p_i < step_alphas_i exactly when Holm's adjusted p_i is below alpha, and an interval that
    inverts test i at level 1 - step_alphas_i excludes the null exactly when Holm rejects: the
    interval printed beside a Holm decision (``audit.stats.decision``). Ties keep the order of
    ``adjust``'s sort (stable), whose adjusted p decides r.

    Args:
        pvalues: shape (m,), raw p-values of one family, NaN for tests that could not be run.
        alpha: the family-wise level.

    Returns:
        shape (m,): per test its step's alpha, NaN where the input was NaN.
    """
    p = np.asarray(pvalues, dtype=float).reshape(-1)
    out = np.full(p.shape, np.nan)
    keep = np.flatnonzero(np.isfinite(p))
    m = len(keep)
    if not m:
        return out
    order = keep[np.argsort(p[keep], kind="stable")]
    adjusted = adjust(p)[0]
    rejected = 0
    while rejected < m and adjusted[order[rejected]] < alpha:
        rejected += 1
    for j, index in enumerate(order):   # j = 0 is the smallest p
        out[index] = alpha / (m - j) if j < rejected else alpha / (m - rejected)
    return out


def step_text(step_alpha: float, alpha: float, m: int, tost: bool = False) -> str:
    """How a Holm step's level was chosen, for a row's ``ci_how`` ('' when no test). ``tost``:
    the interval of TOST at that step, 1 - 2 x the step's alpha."""
    if not np.isfinite(step_alpha) or m < 1:
        return ""
    k = round(alpha / step_alpha)
    two = "2 " if tost else ""
    if m == 1:
        return f"1 - {two}alpha = {1 - (2 if tost else 1) * alpha:.4g} (a family of one test)"
    return (f"holm step level: 1 - {two}alpha / {k} = {1 - (2 if tost else 1) * step_alpha:.4g} "
            f"(family of m = {m})")
