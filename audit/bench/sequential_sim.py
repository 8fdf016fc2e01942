"""The simulated studies of the group-sequential benchmarks: LK's published effects, seeds drawn
per arm, Welch looks, the workflow's stop rules replayed, and the fixed design at equal power.

Shared by ``audit.bench.sequential`` (one design's error rates and seeds) and
``audit.bench.sequential_compare`` (the candidate designs side by side), so neither imports the other.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import numpy as np

from audit.errors import AuditError
from audit.stats.sequential import stopping

# the published tables the benchmark can draw from (``--effects``) and its corpus labels: the sets and
# corpora of audit/data/published.csv
TABLES = {"table1": "lk-sm-table1", "table2": "lk-table2"}
CORPORA = {"ptb": "ptb", "wt2": "wikitext-2"}
PUBLISHED_CSV = Path(__file__).resolve().parents[1] / "data" / "published.csv"


@functools.cache
def published_effects() -> tuple[tuple[str, ...], dict]:
    """LK's test perplexities of the five arms, read from ``audit/data/published.csv``
    (shared/reference/protocol.md section 6).

    Returns:
        (heads, effects): the arms' labels in the table's row order (the baseline first): LK's
        row label in lower case, LMS-PLIF as plif; and effects[table][corpus] = ((mean, sd), ...)
        in that order, for each table of ``TABLES`` and corpus of ``CORPORA``.
    """
    with PUBLISHED_CSV.open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["metric"] == "test_ppl" and r["kind"] == "seeds"]
    heads, effects = None, {}
    for table, name in TABLES.items():
        effects[table] = {}
        for corpus, published in CORPORA.items():
            arms = [r for r in rows if r["set"] == name and r["corpus"] == published]
            labels = tuple(r["row"].lower().removeprefix("lms-") for r in arms)
            if not arms or labels != (heads or labels):
                raise AuditError(f"{PUBLISHED_CSV}: set {name!r}, corpus {published!r}: arms {labels}, "
                                 f"expected {heads}")
            heads = labels
            effects[table][corpus] = tuple((float(r["mean"]), float(r["sd"])) for r in arms)
    return heads, effects


def __getattr__(name: str):
    """``HEADS`` and ``EFFECTS``: the two halves of ``published_effects()``, read at first use."""
    if name == "HEADS":
        return published_effects()[0]
    if name == "EFFECTS":
        return published_effects()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def prefix_stats(x: np.ndarray, sizes) -> tuple[np.ndarray, np.ndarray]:
    """Means and sample variances of the first n seeds, for each n in ``sizes``.

    Args: x (..., n_max). Returns: (mean, var), each (..., len(sizes)).
    """
    n = np.asarray(sizes)
    s1, s2 = np.cumsum(x, -1)[..., n - 1], np.cumsum(x * x, -1)[..., n - 1]
    mean = s1 / n
    return mean, np.maximum(s2 - n * mean * mean, 0.0) / (n - 1)


def looks(draws: np.ndarray, sizes, margin: float) -> dict:
    """Welch statistics of every head (arms 1..) against arm 0 after each stage size.

    Args: draws (N, arms, n_max). Returns: dict of (N, arms - 1, len(sizes)) arrays.
    """
    # centre on the baseline's mean first: perplexities ~57 with SDs ~0.1 would lose digits in
    # the sum-of-squares variance
    x = draws - draws[:, :1, :1]
    mean, var = prefix_stats(x, sizes)
    n = np.asarray(sizes, float)
    return stopping.welch_arrays(mean[:, 1:], var[:, 1:], n, mean[:, :1], var[:, :1], n, margin)


def fixed_power(draws, truth, alpha: float, n_values) -> np.ndarray:
    """Power per comparison of the fixed design (Welch, Holm within the family) with n seeds.

    Returns: (len(n_values), arms - 1), the rate of rejections in the true direction.
    """
    w = looks(draws, n_values, np.nan)
    m = draws.shape[1] - 1
    out = np.zeros((len(n_values), m))
    levels = alpha / np.arange(1, m + 1)
    for j in range(len(n_values)):
        p = w["p"][..., j]
        rejected = stopping.holm(p[..., None] < levels, np.isfinite(p))
        out[j] = (rejected & (np.sign(w["diff"][..., j]) == np.sign(truth))).mean(0)
    return out


def simulate(means, sds, design: stopping.Design, sims: int, rng: np.random.Generator,
             margin: float = np.nan, fixed_max: int = 60) -> dict:
    """Simulate ``sims`` studies of one family; returns per-comparison and study results."""
    means, sds = np.asarray(means, float), np.asarray(sds, float)
    sizes = design.sizes
    n_draw = max(design.maximum, fixed_max)
    draws = means[None, :, None] + sds[None, :, None] * rng.standard_normal((sims, len(means), n_draw))
    m = len(means) - 1
    w = looks(draws[..., : design.maximum], sizes, margin)
    t = np.asarray(sizes, float) / design.maximum
    eff = stopping.level_table(t, design, m, sides=2, final=True)
    eq = stopping.level_table(t, design, m, sides=1, final=True)
    out = stopping.replay(w["p"], w["p_tost"], w["diff"], w["se"], w["info"], eff, eq, design,
                          len(sizes) - 1, margin)
    truth = means[1:] - means[0]
    seeds = np.asarray(sizes)[out["stop"]]                      # (sims, m) seeds per arm at stop
    diff_at_stop = np.take_along_axis(w["diff"], out["stop"][..., None], -1)[..., 0]
    right = out["rejected"] & (np.sign(diff_at_stop) == np.sign(truth))
    study = seeds.sum(-1) + seeds.max(-1)                       # heads + the shared softmax arm
    n_values = np.arange(2, n_draw + 1)
    fixed = fixed_power(draws, truth, design.alpha, n_values)
    return dict(out=out, seeds=seeds, right=right, study=study, truth=truth, fixed=fixed,
                n_values=n_values, fixed10=fixed_power(draws[..., :10], truth, design.alpha, [10])[0])


def same_power(res: dict, power: float, col: int):
    """The fewest seeds per arm with which the fixed design reaches ``power`` on comparison
    ``col`` (on the same simulated seeds); ``">60"`` (the most drawn) when none does."""
    reach = np.flatnonzero(res["fixed"][:, col] >= power)
    return int(res["n_values"][reach[0]]) if reach.size else f">{res['n_values'][-1]}"
