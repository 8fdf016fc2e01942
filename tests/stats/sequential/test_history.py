"""The sequentially valid numbers of a study (audit/stats/sequential/history.py): the repeated p-value
and the repeated confidence interval rest on the same looks and the same nominal levels, so the
interval excludes 0 exactly when the repeated p is below alpha (issue 33, finding 2)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from audit.config import check_study
from audit.stats.sequential import interim

ALPHA = 0.05
SOFTMAX = np.array([57.0, 57.4, 56.6, 57.2])
MOS = np.array([56.135, 56.635, 55.935, 56.535])


def config(heads, seeds):
    return check_study({"study": "t", "heads": [{"name": h, "head": "softmax"} for h in heads],
                        "seeds": seeds,
                        "comparisons": [{"family": "f", "baseline": heads[0], "against": list(heads[1:]),
                                         "metrics": ["test_ppl"]}]})


def test_a_look_whose_runs_all_failed_adds_nothing_to_the_repeated_ci():
    """4 seeds per arm, Welch p 0.021; every run of stage 2 (seeds 5-10) failed. Stage 2 has no
    test, so the repeated p is look 1's alone, p / 0.4 (linear spending spends 0.4 alpha at
    t = 4/10), 0.052. The interval was look 1's data at look 2's planned final level and
    excluded 0; it must be look 1's interval at look 1's level, 0.4 alpha = 0.02, and cover 0."""
    rows = [dict(corpus="ptb", head=h, seed=str(s), status="ok" if s <= 4 else "failed",
                 test_ppl=v[s - 1] if s <= 4 else math.nan)
            for h, v in (("softmax", SOFTMAX), ("mos", MOS)) for s in range(1, 11)]
    runs = pd.DataFrame(rows)
    cfg = config(["softmax", "mos"], {"initial": 4, "step": 6, "max": 10, "futility_power": 0.0})
    assert interim.analyse(runs[runs["seed"].astype(int) <= 4], cfg, 1)["comparisons"][0]["final_decision"] == "continue"
    record = interim.analyse(runs, cfg, 2)
    c = record["comparisons"][0]
    welch = stats.ttest_ind(MOS, SOFTMAX, equal_var=False)
    assert welch.pvalue == pytest.approx(0.0208, abs=1e-4)
    assert c["repeated_p"] == pytest.approx(welch.pvalue / 0.4, rel=1e-6) and c["repeated_p"] > ALPHA
    ci = welch.confidence_interval(1 - 0.4 * ALPHA)       # SciPy's Welch interval at level 0.98
    assert (c["rci_low"], c["rci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-7)
    assert c["rci_low"] < 0 < c["rci_high"] and c["final_decision"] == "max"


def _values(rng, n, mean, kind):
    if kind == "ties":     # a coarse grid: ties within and across arms, constant arms
        return np.round(rng.normal(mean, 0.4, n) * 2) / 2
    if kind == "constant":
        return np.full(n, round(mean))
    return rng.normal(mean, rng.uniform(0.05, 0.5), n)


def _status(rng, sizes, max_n):
    """Per seed: ok or failed, with whole stages failing (no new information) and arms left
    with one usable run."""
    ok = rng.random(max_n) > rng.choice([0.0, 0.1, 0.3])
    for lo, hi in zip(sizes[:-1], sizes[1:]):
        if rng.random() < 0.3:
            ok[lo:hi] = False
    if rng.random() < 0.15:
        ok[: sizes[0]] = False
        ok[rng.integers(sizes[0])] = True
    return ok


def random_study(rng):
    """One study over all its stages: a design of 2-4 looks, a baseline and 2-3 other heads with
    random effects (zero to large), value kinds (normal, tied, constant) and failures."""
    initial = int(rng.integers(2, 5))
    seeds = {"initial": initial, "step": int(rng.integers(1, 4)), "max": initial + int(rng.integers(2, 7)),
             "spending": str(rng.choice(["hsd", "obf", "pocock"])), "futility_power": float(rng.choice([0.0, 0.2]))}
    heads = ["base"] + [f"h{i}" for i in range(int(rng.integers(2, 4)))]
    cfg = config(heads, seeds)
    sizes = interim.schedule.stage_sizes(cfg["seeds"])
    max_n = sizes[-1]
    table = {}
    for h in heads:
        mean = 57.0 + (0.0 if h == "base" else rng.choice([0.0, 0.3, 1.0, 3.0]) * rng.choice([-1, 1]))
        kind = rng.choice(["normal", "normal", "ties", "constant"], p=[0.45, 0.3, 0.2, 0.05])
        table[h] = (_values(rng, max_n, mean, kind), _status(rng, sizes, max_n))
    counts = {h: sizes[0] for h in heads}
    records = []
    for stage in range(1, len(sizes) + 1):
        runs = pd.DataFrame([dict(corpus="ptb", head=h, seed=str(s + 1), status="ok" if table[h][1][s] else "failed",
                                  test_ppl=table[h][0][s] if table[h][1][s] else math.nan)
                             for h in heads for s in range(counts[h])])
        record = interim.analyse(runs, cfg, stage)
        records.append(record)
        if record["done"]:
            break
        counts = {a["head"]: a["next"] for a in record["arms"]}
    return records


def test_the_repeated_ci_excludes_zero_exactly_when_the_repeated_p_is_below_alpha():
    """Property, over seeded random studies with failed stages, ties, constant and one-seed
    arms: on every comparison of every stage record, the repeated CI excludes 0 iff the
    repeated p < alpha, and both are undefined together."""
    rng = np.random.default_rng(20240533)
    seen = dict(rows=0, excluded=0, no_information=0, undefined=0)
    for _ in range(30):
        for record in random_study(rng):
            # a look without new information: Welch's statistic is defined, its p is left out
            blank = {(h["head_a"], h["stage"]) for h in record["history"]
                     if h["welch_p"] is None and h["welch_t"] is not None}
            for c in record["comparisons"]:
                low, high, p = (math.nan if c[k] is None else c[k] for k in ("rci_low", "rci_high", "repeated_p"))
                assert math.isnan(p) == math.isnan(low) == math.isnan(high), c
                excluded = low > 0 or high < 0
                assert excluded == (p < ALPHA), c
                seen["rows"] += 1
                seen["excluded"] += excluded
                seen["undefined"] += math.isnan(p)
                seen["no_information"] += any((c["head_a"], k) in blank for k in range(1, c["last_look"] + 1))
    # the draws reach every case the property is about
    assert seen["rows"] > 120 and seen["excluded"] > 30 and seen["no_information"] > 10 and seen["undefined"] > 5, seen
