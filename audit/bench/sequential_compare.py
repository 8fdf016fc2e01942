"""Candidate sequential designs side by side: which one saves seeds and keeps the error rate.

``python -m audit bench sequential --compare [--sims N --seed S --effects table1]``

Each candidate design (spending function and schedule, all with max 30 seeds per arm and the
same alpha and futility rule) simulates the same studies as ``audit.bench.sequential``: per
corpus, the effects scenario (4 head-vs-softmax comparisons, one Holm family) and the null
scenario. Every design sees the same simulated seeds (the generator of a scenario is seeded by
(seed, corpus, scenario), not by the design: common random numbers, so differences between the
designs are not Monte-Carlo noise between them).

A design *saves* in a scenario when its mean seeds per arm for that comparison are below the
fixed design's seeds per arm at equal power (``fixed_seeds_same_power`` of the bench: the
fewest seeds with which Welch + Holm on the same simulated seeds reaches the sequential
design's power). Its family-wise error (any comparison rejected under the null) is *within*
when it is <= alpha + 2 SE with SE = sqrt(alpha (1 - alpha) / sims), the Monte-Carlo SE of a
rate that equals alpha; the printed SE is that of the estimate.

Prints two Markdown tables (to paste into docs/statistics.md as they are): per design the seeds cells
``sequential / fixed`` with the count of savings, runs per study and the null FWER; then the
power of each comparison.
"""

from __future__ import annotations

import math

import numpy as np

from audit.bench import sequential_sim as bench
from audit.stats.sequential.stopping import Design

# (initial, step, spending, gamma): the default (OBF 5/5/30), Pocock, Hwang-Shih-DeCani
# from OBF-like (-4) to Pocock-like (1), and earlier first looks (3 or 4 seeds), where a fixed
# design at MoS's effect needs only 4-5 seeds.
CANDIDATES = [(5, 5, "obf", None), (5, 5, "pocock", None), (5, 5, "hsd", -4.0), (5, 5, "hsd", -2.0),
              (5, 5, "hsd", 1.0), (3, 3, "obf", None), (3, 3, "pocock", None), (3, 3, "hsd", -2.0),
              (3, 3, "hsd", 1.0), (4, 4, "obf", None), (4, 4, "pocock", None), (4, 4, "hsd", -2.0),
              (4, 4, "hsd", 0.0), (4, 4, "hsd", 1.0)]
MAXIMUM = 30


def label(design: Design) -> str:
    """``hsd(-2) 4/4/30``: spending (with HSD's gamma) and initial/step/max."""
    kind = f"hsd({design.gamma:g})" if design.spending == "hsd" else design.spending
    return f"{kind} {design.initial}/{design.step}/{design.maximum}"


def designs(alpha: float, futility_power: float) -> list[Design]:
    """The candidate designs at one alpha and futility rule."""
    return [Design(initial, step, MAXIMUM, spending, alpha, futility_power,
                   Design.gamma if gamma is None else gamma)
            for initial, step, spending, gamma in CANDIDATES]


def evaluate(design: Design, effects: str, sims: int, seed: int, margin: float = math.nan) -> dict:
    """Simulate one design on every corpus of ``effects``, under the effects and the null.

    Returns:
        dict with ``cells``: one per corpus x head (corpus order, then HEADS[1:]) holding
        ``scenario``, ``power``, ``seeds`` (mean per arm), ``fixed`` (int, or ``">60"``) and
        ``saves``; ``runs``: mean runs per study under the effects, per corpus; ``fwer`` and
        ``fwer_se``: per corpus under the null; ``within``: every FWER <= alpha + 2 SE(alpha).
    """
    cells, runs, fwer = [], {}, {}
    for c, (corpus, arms) in enumerate(bench.EFFECTS[effects].items()):
        means, sds = zip(*arms)
        null = bench.simulate([means[0]] * len(means), sds, design, sims,
                              np.random.default_rng([seed, c, 0]), margin)
        fwer[corpus] = float(null["out"]["rejected"].any(-1).mean())
        res = bench.simulate(list(means), sds, design, sims, np.random.default_rng([seed, c, 1]), margin)
        runs[corpus] = float(res["study"].mean())
        for i, head in enumerate(bench.HEADS[1:]):
            power = float(res["right"][:, i].mean())
            seeds = float(res["seeds"][:, i].mean())
            fixed = bench.same_power(res, power, i)
            saves = seeds < fixed if isinstance(fixed, int) else True  # ">60": beyond any fixed design drawn
            cells.append(dict(scenario=f"{corpus} {head}", power=power, seeds=seeds, fixed=fixed, saves=saves))
    bound = design.alpha + 2 * math.sqrt(design.alpha * (1 - design.alpha) / sims)
    return dict(cells=cells, runs=runs, fwer=fwer,
                fwer_se={k: math.sqrt(v * (1 - v) / sims) for k, v in fwer.items()},
                within=all(v <= bound for v in fwer.values()), bound=bound)


def tables(results: list[tuple[Design, dict]], arms: int) -> str:
    """The two Markdown tables of ``results`` (design, ``evaluate`` output)."""
    first = results[0][1]
    scenarios = [cell["scenario"] for cell in first["cells"]]
    corpora = list(first["fwer"])
    head = (["design"] + scenarios + ["saves"] + [f"runs {c} (fixed 10: {10 * arms})" for c in corpora]
            + [f"FWER {c} (SE)" for c in corpora] + [f"<= alpha + 2 SE ({first['bound']:.4f})"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for design, res in results:
        seeds = [f"{c['seeds']:.1f} / {c['fixed']}" + (" ✓" if c["saves"] else "") for c in res["cells"]]
        saves = f"{sum(c['saves'] for c in res['cells'])} of {len(res['cells'])}"
        runs = [f"{res['runs'][c]:.1f}" for c in corpora]
        fwer = [f"{res['fwer'][c]:.4f} ({res['fwer_se'][c]:.4f})" for c in corpora]
        lines.append("| " + " | ".join([label(design)] + seeds + [saves] + runs + fwer
                                       + ["yes" if res["within"] else "no"]) + " |")
    power_head = ["design"] + scenarios
    lines += ["", "| " + " | ".join(power_head) + " |", "|" + "---|" * len(power_head)]
    for design, res in results:
        lines.append("| " + " | ".join([label(design)] + [f"{c['power']:.3f}" for c in res["cells"]]) + " |")
    return "\n".join(lines)


def main(sims: int, seed: int, effects: str, alpha: float, futility_power: float, margin: float) -> str:
    """Evaluate every candidate; returns the Markdown of ``tables``."""
    results = [(d, evaluate(d, effects, sims, seed, margin)) for d in designs(alpha, futility_power)]
    return tables(results, len(next(iter(bench.EFFECTS[effects].values()))))
