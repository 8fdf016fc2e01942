"""What a group-sequential study reports: the per-stage history and the sequentially valid numbers.

``stage_record`` turns the replayed stop rules of an interim analysis (``audit.stats.sequential.interim``)
into two lists:

- ``history``: one entry per comparison and stage at which it was still running: seeds per arm
  (planned and usable), Welch's statistic and p, the information fraction, the efficacy boundary
  it faced (z and nominal two-sided p at the Holm level alpha / r after the step-down, r = the
  hypotheses of its family not rejected by the others), the TOST p and its nominal level, the
  conditional power (futility rule), the decision, and the Holm-adjusted repeated p-value so far.
- ``comparisons``: per comparison, at its stopping look (or its latest, while running): the
  final decision, the *repeated p-value* (Jennison & Turnbull 1989; valid under any stopping
  rule) and its Holm adjustment within the family (the quantity the decisions use: rejected
  exactly when p_rep_adj < alpha), the *stage-wise ordering p-value* (defined only for a stop for
  efficacy or at the last stage), the *repeated confidence interval* at level 1 - alpha per
  comparison (the intersection of the intervals of the looks up to the stop that the repeated p
  uses, at the nominal levels it compares their p with, so that it excludes 0 exactly when the
  unadjusted repeated p is below alpha; a look without a test or without new information enters
  neither: ``repeated.repeated_ci_over_looks``), and the seeds spent against the fixed design of
  equal power.

Seeds against the fixed design (``design_power``, ``fixed_seeds_same_power``): analytic, at the
observed effect. The design's power is the probability that the spending boundaries at level
alpha (planned looks, no Holm split, non-binding futility ignored) are crossed when the true
difference is the observed |diff| with the observed SDs (normal approximation:
Z_k ~ N(theta sqrt(t_k), 1), theta = |diff| / sqrt((sd_a^2 + sd_b^2) / max)); the fixed design's
seeds are the fewest per arm with which Welch's two-sided test at alpha reaches that power
(``audit.stats.power.seeds_needed``; the target is capped at 0.999). An early stop overestimates
|diff| (the well-known bias of group-sequential estimates), so this is an estimate in favour of
the fixed design; ``python -m audit bench sequential`` gives the simulated counterpart.
"""

from __future__ import annotations

import math

import numpy as np

from audit.stats import power
from audit.stats.sequential import boundaries as seq, repeated, stopping

HISTORY_COLUMNS = [
    "family", "family_size", "corpus", "metric", "head_a", "head_b", "stage", "seeds_per_arm", "n_a", "n_b",
    "mean_a", "mean_b", "diff", "welch_t", "welch_df", "welch_p", "z", "info_fraction", "holm_level",
    "boundary_z", "nominal_p", "equivalence_margin", "tost_p", "tost_nominal_p", "conditional_power",
    "decision", "repeated_p_adj", "reason",
]
FINAL_COLUMNS = [
    "final_decision", "stop_stage", "repeated_p", "repeated_p_adj_final", "stagewise_p", "rci_low",
    "rci_high", "rci_level", "seeds_used", "design_power", "fixed_seeds_same_power", "seeds_saved",
]


def _rep_p(s: dict, t: np.ndarray, design: stopping.Design, last: int) -> float:
    """Repeated p of a comparison over its looks 0..last."""
    return repeated.repeated_p(s["p"][: last + 1], t[: last + 1], design.spending, 2,
                               final=last == len(design.sizes) - 1, gamma=design.gamma, alpha=design.alpha)


def _rci(s: dict, t: np.ndarray, design: stopping.Design, last: int) -> tuple[float, float]:
    """Repeated CI of a comparison over its looks 0..last, at the nominal levels ``_rep_p``
    compares the same looks' p with (``repeated.look_level`` at alpha): it excludes 0 exactly when
    ``_rep_p`` < alpha (``repeated.repeated_ci_over_looks``)."""
    final = last == len(design.sizes) - 1
    levels = [repeated.look_level(t[: last + 1], j, design.alpha, design.spending, 2, final, design.gamma)
              for j in range(last + 1)]
    return repeated.repeated_ci_over_looks(s["diff"], s["se"], s["df"], levels, last, p=s["p"])


def _holm(p: list[float]) -> list[float]:
    from audit.stats.multiplicity import adjust

    return list(adjust(np.asarray(p, float))[0])


def _reason(code: int, h: dict, design: stopping.Design) -> str:
    if code == stopping.EFFICACY:
        return (f"Welch p crossed the boundary at some look (Holm-adjusted repeated p "
                f"{h['repeated_p_adj']:.3g} < {design.alpha:g})")
    if code == stopping.EQUIVALENCE:
        return f"TOST p {h['tost_p']:.3g} < nominal {h['tost_nominal_p']:.3g}: |diff| < margin"
    if code == stopping.FUTILITY:
        return f"conditional power {h['conditional_power']:.3g} < futility_power {design.futility_power:g}"
    if code == stopping.MAX:
        return f"undecided with all {design.maximum} seeds"
    if code == stopping.UNDEFINED:
        return "Welch's test undefined at this look (fewer than 2 usable seeds, both arms constant, or no new information)"
    return f"p {h['welch_p']:.3g} >= nominal {h['nominal_p']:.3g}; more seeds"


def stage_record(rows, stats, t, tables, prefix, families, design: stopping.Design, settings: dict,
                 stage: int) -> dict:
    """``{"history": [...], "comparisons": [...]}`` of an interim analysis (module docstring).

    Args:
        rows: the hypotheses (``interim.comparison_rows``); stats: their looks (``interim.looks``);
        t: (rows, K) information fractions; tables: row -> (eff (m, K), eq (m, K)) nominal levels
        at Holm levels alpha / r; prefix: per stage j, row -> replay state after stage j;
        families: label -> row indices.
    """
    K = len(design.sizes)
    rep: dict[tuple[int, int], float] = {}

    def last_look(i, j):   # the comparison's latest look at stage j: its stop, or j
        stop = prefix[j][i]["stop"]
        return j if stop == -1 else int(stop)

    def rp(i, j):
        key = (i, last_look(i, j))
        if key not in rep:
            rep[key] = _rep_p(stats[i], t[i], design, key[1])
        return rep[key]

    history = []
    for idx in families.values():
        for j in range(stage):
            state = {i: prefix[j][i] for i in idx}
            adj = dict(zip(idx, _holm([rp(i, j) for i in idx])))
            tested = [i for i in idx if np.isfinite(stats[i]["p"][: last_look(i, j) + 1]).any()]
            tested_eq = [i for i in idx if np.isfinite(stats[i]["p_tost"][: last_look(i, j) + 1]).any()]
            for i in idx:
                if j > 0 and prefix[j - 1][i]["decision"] != stopping.CONTINUE:
                    continue   # stopped before this stage: no look
                s, r = stats[i], rows[i]
                left = max(len(tested) - sum(bool(state[q]["rejected"]) for q in tested if q != i), 1)
                left_eq = max(len(tested_eq) - sum(bool(state[q]["equivalent"]) for q in tested_eq if q != i), 1)
                eff, eq = tables[i]
                h = dict(family=r["family"], family_size=len(idx), corpus=r["corpus"], metric=r["metric"],
                         head_a=r["head_a"], head_b=r["head_b"], stage=j + 1, seeds_per_arm=design.sizes[j],
                         n_a=int(s["n_a"][j]), n_b=int(s["n_b"][j]), mean_a=s["mean_a"][j], mean_b=s["mean_b"][j],
                         diff=s["diff"][j], welch_t=s["diff"][j] / s["se"][j], welch_df=s["df"][j],
                         welch_p=s["p"][j], z=float(seq.z_from_p(s["p"][j])), info_fraction=t[i][j],
                         holm_level=design.alpha / left, nominal_p=eff[left - 1, j],
                         boundary_z=float(seq.z_from_p(eff[left - 1, j])),
                         equivalence_margin=r["equivalence_margin"], tost_p=s["p_tost"][j],
                         tost_nominal_p=eq[left_eq - 1, j] if np.isfinite(r["equivalence_margin"]) else math.nan,
                         conditional_power=state[i]["cp"] if j < K - 1 else math.nan,
                         decision=stopping.DECISIONS[int(state[i]["decision"])], repeated_p_adj=adj[i])
                h["reason"] = _reason(int(state[i]["decision"]), h, design)
                history.append(h)
    final = []
    last = stage - 1
    for idx in families.values():
        adj = dict(zip(idx, _holm([rp(i, last) for i in idx])))
        for i in idx:
            final.append(_final(i, rows[i], stats[i], t[i], prefix, adj[i], rp(i, last), design, history))
    return {"history": history, "comparisons": final}


def _final(i, row, s, t, prefix, p_adj, p_rep, design, history) -> dict:
    K, state = len(design.sizes), prefix[-1][i]
    look = len(prefix) - 1 if state["stop"] == -1 else int(state["stop"])
    code = int(state["decision"])
    at_stop = next(h for h in history if (h["family"], h["corpus"], h["metric"], h["head_a"], h["head_b"],
                                           h["stage"]) == (row["family"], row["corpus"], row["metric"],
                                                           row["head_a"], row["head_b"], look + 1))
    bounds = seq.boundaries(t, design.alpha, design.spending, 2, True, design.gamma)
    stagewise = (repeated.stagewise_p(s["p"][look], t[: look + 1], bounds[: look + 1])
                 if at_stop["decision"] in ("efficacy", "max") else math.nan)
    low, high = _rci(s, t, design, look)
    used = design.sizes[look]
    dpower, fixed = design_power(s["diff"][look], s["sd_a"][look], s["sd_b"][look], design)
    return dict(family=row["family"], corpus=row["corpus"], metric=row["metric"], head_a=row["head_a"],
                head_b=row["head_b"], lower_is_better=row["lower_is_better"],
                final_decision=stopping.DECISIONS[code], stop_stage=None if state["stop"] == -1 else look + 1,
                n_a=int(s["n_a"][look]), n_b=int(s["n_b"][look]), diff=s["diff"][look], repeated_p=p_rep,
                repeated_p_adj_final=p_adj, stagewise_p=stagewise, rci_low=float(low), rci_high=float(high),
                rci_level=1 - design.alpha, seeds_used=used, design_power=dpower,
                fixed_seeds_same_power=fixed, seeds_saved=fixed - used if np.isfinite(fixed) else math.nan,
                last_look=look + 1, final_stage=look == K - 1)


def design_power(diff: float, sd_a: float, sd_b: float, design: stopping.Design) -> tuple[float, float]:
    """(power of the design at the observed effect, fixed-design seeds per arm of equal power);
    NaN when the effect or the SDs are undefined (see the module docstring)."""
    var = (sd_a ** 2 + sd_b ** 2) / design.maximum
    if not (np.isfinite(diff) and np.isfinite(var) and var > 0 and diff != 0):
        return math.nan, math.nan
    planned = np.array([float(seq.information(n, n)) for n in design.sizes]) / design.info_max
    bounds = seq.boundaries(planned, design.alpha, design.spending, 2, True, design.gamma)
    p = float(min(1.0, seq.crossing_probabilities(bounds, planned, 2, abs(diff) / math.sqrt(var)).sum()))
    return p, power.seeds_needed(sd_a, sd_b, abs(diff), design.alpha, min(p, 0.999))


def history_table(record: dict):
    """The report's sequential table: the history, with each comparison's final numbers on the
    row of its last look (``HISTORY_COLUMNS`` + ``FINAL_COLUMNS``)."""
    import pandas as pd

    table = pd.DataFrame(record["history"], columns=HISTORY_COLUMNS)
    for col in FINAL_COLUMNS:
        table[col] = None
    for c in record["comparisons"]:
        hit = ((table["family"] == c["family"]) & (table["corpus"] == c["corpus"]) & (table["metric"] == c["metric"])
               & (table["head_a"] == c["head_a"]) & (table["head_b"] == c["head_b"]) & (table["stage"] == c["last_look"]))
        for col in FINAL_COLUMNS:
            table.loc[hit, col] = c[col]
    return table.sort_values(["family", "corpus", "metric", "head_a", "head_b", "stage"], kind="stable",
                             ignore_index=True)
