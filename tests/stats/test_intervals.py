"""Each interval is the one its verdict used (issue 46, findings 2 and 5), and the documented
verdict-interval rule (``audit.stats.intervals``) holds on every row of the comparisons and claims
tables of random studies."""

import math

import numpy as np
import pandas as pd
import pytest

from audit.stats.claims import claims_table
from audit.stats.comparisons import comparisons_table
from audit.stats.intervals import interval_breaks
from audit.stats.io import Settings

FAST = Settings(bootstrap_resamples=200)


def exact(mean: float, sd: float, n: int, seed: int = 0) -> np.ndarray:
    z = np.random.default_rng(seed).normal(size=n)
    return mean + sd * (z - z.mean()) / z.std(ddof=1)


def runs_of(arms: dict, **columns) -> pd.DataFrame:
    rows = []
    for head, values in arms.items():
        for s, v in enumerate(values):
            rows.append(dict(corpus="ptb", head=head, seed=str(s), status="ok", test_ppl=v,
                             **{k: c[head][s] for k, c in columns.items()}))
    return pd.DataFrame(rows)


def claims_of(runs, claims, comparisons=(), settings=FAST):
    config = {"comparisons": list(comparisons), "correlations": [], "claims": claims}
    comp = comparisons_table(runs, config, settings)
    return comp, claims_table(runs, config, settings, comp, None)


def test_equivalent_never_stands_beside_an_interval_that_crosses_the_margin():
    # finding 5: margin 0.2, equal means; the 95% Welch interval crosses the margin while TOST at
    # alpha = 0.05 (the 90% interval inside the margin) says equivalent
    a, b = exact(50.0, 0.235, 10, 1), exact(50.0, 0.235, 10, 2)
    runs = runs_of({"mos": a, "softmax": b})
    claim = {"id": "eq", "source": "s", "statement": "same", "expect": "equivalent", "equivalence_margin": 0.2,
             "comparison": {"head_a": "mos", "head_b": "softmax", "metric": "test_ppl"}}
    family = {"family": "f", "pairs": [["mos", "softmax"]], "metrics": ["test_ppl"], "equivalence_margin": 0.2}
    comp, claims = claims_of(runs, [claim], [family])
    row, c = comp.iloc[0], claims.iloc[0]
    assert row["verdict"] == "equivalent" and row["ci_level"] == pytest.approx(0.95)
    assert row["diff_ci_low"] < -0.2 < 0.2 < row["diff_ci_high"]            # the 95% one crosses it
    assert row["tost_ci_level"] == pytest.approx(0.90)
    assert -0.2 < row["tost_ci_low"] < row["tost_ci_high"] < 0.2            # the one TOST used
    assert c["verdict"] == "supported"
    assert (c["ci_low"], c["ci_high"], c["ci_level"]) == (row["tost_ci_low"], row["tost_ci_high"], row["tost_ci_level"])
    assert "1 - 2 alpha" in c["estimate_name"]


def test_the_tost_interval_is_the_one_tost_inverts():
    # p_tost < alpha exactly when the 1 - 2 alpha interval lies inside the margin (statsmodels'
    # ttost_ind with Welch's df against our interval), over random arms and margins
    rng = np.random.default_rng(7)
    for _ in range(60):
        a, b = rng.normal(0, rng.uniform(0.1, 2), rng.integers(3, 9)), rng.normal(0, 1, rng.integers(3, 9))
        margin = float(rng.uniform(0.2, 2.5))
        runs = runs_of({"mos": 50 + a, "softmax": 50 + b})
        fam = {"family": "f", "pairs": [["mos", "softmax"]], "metrics": ["test_ppl"], "equivalence_margin": margin}
        row = comparisons_table(runs, {"comparisons": [fam]}, FAST).iloc[0]
        inside = -margin < row["tost_ci_low"] and row["tost_ci_high"] < margin
        assert inside == (row["tost_p"] < 0.05), (row["tost_p"], row["tost_ci_low"], row["tost_ci_high"], margin)


def test_a_claim_judged_either_way_shows_the_union_of_both_intervals():
    # finding 2: no decided unargmaxable token in any of 10 runs, undecided ones in 6: inconclusive,
    # and the interval is no longer the accounting most favourable to the claim alone
    n = 10
    undecided = [3, 1, 0, 2, 0, 5, 0, 1, 0, 4]
    runs = runs_of({"softmax": exact(57, 1, n)}, unargmaxable_box100={"softmax": [0] * n},
                   argmax_unresolved_box100={"softmax": undecided})
    claim = {"id": "rare", "source": "s", "statement": "rare", "expect": "below",
             "one_sample": {"head": "softmax", "metric": "unargmaxable_box100", "bound": 0.5, "test": "binomial",
                            "unresolved": "argmax_unresolved_box100"}}
    _, claims = claims_of(runs, [claim])
    c = claims.iloc[0]
    assert c["verdict"] == "inconclusive"
    # rate - bound: as argmaxable 0/10 runs, Clopper-Pearson 90% [0, 0.259]; as not 6/10, [0.304, 0.852]
    assert c["ci_low"] == pytest.approx(0.0 - 0.5)
    assert c["ci_high"] == pytest.approx(0.8513 - 0.5, abs=2e-3) and c["ci_high"] > 0   # not [-0.5, -0.241]
    assert "union of both accountings" in c["estimate_name"]
    assert interval_breaks(c["verdict"], c["ci_low"], c["ci_high"], "below", kind="one_sample") == ""


def _random_study(rng: np.random.Generator):
    heads = ["softmax", "mos", "gss"]
    n = {h: int(rng.integers(2, 9)) for h in heads}
    arms = {h: 50 + rng.normal(rng.choice([0, 0, 0.3, 1.5]), rng.uniform(0.05, 1.5), n[h]) for h in heads}
    shares = {h: rng.uniform(0, 0.12, n[h]) for h in heads}
    counts = {h: rng.integers(0, 2, n[h]) * rng.integers(0, 3, n[h]) for h in heads}
    undecided = {h: rng.integers(0, 2, n[h]) for h in heads}
    runs = runs_of(arms, gradient_norm_share=shares, unargmaxable=counts, argmax_unresolved=undecided)
    margin = float(rng.uniform(0.1, 2.0))
    families = [{"family": "f", "baseline": "softmax", "against": ["mos", "gss"], "metrics": ["test_ppl"],
                 "equivalence_margin": margin}]
    expects = ["lower", "higher", "equivalent", "not_lower", "not_higher"]
    claims = [{"id": f"c{i}", "source": "s", "statement": "s", "expect": e,
               **({"equivalence_margin": margin} if e != "lower" or i % 2 else {}),
               "comparison": {"head_a": ["mos", "gss"][i % 2], "head_b": "softmax", "metric": "test_ppl"}}
              for i, e in enumerate(expects)]
    claims += [{"id": "share", "source": "s", "statement": "s", "expect": str(rng.choice(["below", "above"])),
                "one_sample": {"head": "mos", "metric": "gradient_norm_share", "bound": 0.05, "test": "t"}},
               {"id": "rare", "source": "s", "statement": "s", "expect": "below",
                "one_sample": {"head": "softmax", "metric": "unargmaxable", "bound": 0.4, "test": "binomial",
                               "unresolved": "argmax_unresolved"}}]
    return runs, families, claims, margin


def test_every_row_of_every_table_obeys_the_verdict_interval_rule():
    rng = np.random.default_rng(46)
    seen = set()
    for _ in range(40):
        runs, families, claims, margin = _random_study(rng)
        comp, table = claims_of(runs, claims, families, Settings(bootstrap_resamples=100, alpha=float(rng.choice([0.05, 0.1]))))
        for r in comp.to_dict("records"):
            tost = r["verdict"] == "equivalent"
            low, high = (r["tost_ci_low"], r["tost_ci_high"]) if tost else (r["diff_ci_low"], r["diff_ci_high"])
            assert interval_breaks(r["verdict"], low, high, margin=r["equivalence_margin"]) == "", r
            seen.add(r["verdict"])
        for r in table.to_dict("records"):
            kind = "one_sample" if r["kind"] == "one_sample" else "comparison"
            m = r["equivalence_margin"] if "equivalence_margin" in r else margin
            why = interval_breaks(r["verdict"], r["ci_low"], r["ci_high"], r["expect"], m, kind)
            assert why == "", (why, r["claim_id"], r["reason"])
            seen.add(f"{r['expect']}:{r['verdict']}")
    # the random studies reach the verdicts the rule speaks about
    assert {"a_better", "b_better", "equivalent"} <= seen
    assert {"equivalent:supported", "lower:supported", "not_lower:supported"} & seen
    assert math.isfinite(margin)
