"""Multiple-comparison correction that tolerates missing p-values.

statsmodels' ``multipletests`` mishandles NaN input (all-NaN output in older versions,
statsmodels#2899; in 0.15 the NaNs still count towards the family size m) and older versions
crash on an empty array. Here NaN p-values are dropped from the family, counted, and left NaN
in the output, so one undefined test never poisons or inflates the others.
"""

from __future__ import annotations

import numpy as np
from statsmodels.stats.multitest import multipletests

METHOD = "holm"  # Holm's step-down: controls the family-wise error rate, no independence needed


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
        out[keep] = multipletests(p[keep], method=method)[1]
    return out, int(keep.sum()), int((~keep).sum())
