"""Rigour by construction (issue 53): every verdict one record with the interval it follows from.

The property test builds many random studies (alpha 0.05 and 0.1; every claim kind; every table
of the stats verb through its registry entry; own runs, further runs tables and the published
record with and without an unstated n; guard-flagged arms; controls) and checks on every row,
with a rule written here and not imported: a decisive verdict's interval excludes the null (lies
inside the margin, for an equivalence) at the level printed beside it, an undecided one's does
not, a withheld verdict says so, a control is a control, and every Holm family's m is the number
of tests its rows hold.
"""

import math

import numpy as np
import pandas as pd
import pytest

from audit.errors import AuditError
from audit.stats import tables as registry
from audit.stats.claims import claims_table
from audit.stats.comparisons import comparisons_table
from audit.stats.decision import Decision
from audit.stats.io import Settings
from audit.stats.multiplicity import adjust, step_alphas
from audit.stats.published import unstated
from audit.stats.published.evidence import published_tables

FAST = Settings(bootstrap_resamples=200)
BASE = pd.DataFrame([dict(corpus="ptb", vocab_size=2000, n_test=82430, unigram_ppl=196.5)])
DECISIVE = {"a_better", "b_better", "equivalent", "supported", "contradicted"}


def exact(mean: float, sd: float, n: int, seed: int = 0) -> np.ndarray:
    z = np.random.default_rng(seed).normal(size=n)
    return mean + sd * (z - z.mean()) / z.std(ddof=1)


def runs_of(arms: dict, **columns) -> pd.DataFrame:
    rows = []
    for head, values in arms.items():
        for s, v in enumerate(values):
            rows.append(dict(corpus="ptb", head=head, seed=str(s), status="ok", test_ppl=v, vocab_size=2000.0,
                             test_tokens=82429.0, **{k: c[head][s] for k, c in columns.items()}))
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- the rule, written independently
def decides(rule: str, low: float, high: float, null: float, margin: float) -> bool:
    if not (np.isfinite(low) and np.isfinite(high)):
        return False
    if rule == "inside":
        return -margin < low and high < margin
    if rule == "weak":
        a_low = 0.0 if low <= 0 <= high else min(abs(low), abs(high))
        return max(abs(low), abs(high)) < null or a_low >= null
    return high < null or low > null


def check_claim_row(r: dict) -> None:
    """One claims row (own, evidence or published) against the rule."""
    verdict, gate, guard = r["verdict"], r["gate"], r["guard"] if isinstance(r["guard"], str) else ""
    if verdict == "not_informative":
        assert guard and r["reason"].startswith("not informative"), r
        return
    assert not guard, r
    if r["role"] == "control":
        assert verdict not in DECISIVE, r                      # a control is never evidence
    else:
        assert not verdict.startswith("control_"), r
    if gate != "tested" or verdict == "not_informative_at_scale":
        return
    margin = r["margin"] if np.isfinite(r["margin"]) else math.nan
    hit = decides(r["rule"], r["ci_low"], r["ci_high"], r["null"], margin)
    decisive = verdict in DECISIVE or verdict in ("control_passed", "control_failed")
    assert hit == decisive, (r["claim_id"], verdict, r["rule"], r["ci_low"], r["ci_high"], r["ci_level"], r["reason"])
    assert 0 < r["ci_level"] < 1, r


def check_comparison_row(r: dict) -> None:
    """One comparisons row: its Welch interval decides exactly for a difference, its TOST
    interval exactly for an equivalence (or beside a difference inside the margin)."""
    if r["verdict"] == "not_informative":
        assert r["guard"], r
        return
    tested = np.isfinite(r["p_adj"])
    if not tested:
        assert r["verdict"] == "inconclusive", r
        return
    differ = decides("excludes", r["diff_ci_low"], r["diff_ci_high"], 0.0, math.nan)
    assert differ == (r["verdict"] in ("a_better", "b_better")), r
    assert differ == (r["p_adj"] < r["alpha"]), r       # the interval inverts the adjusted test
    if differ:
        better_low = r["diff"] < 0
        assert (r["verdict"] == "a_better") == (better_low == bool(r["lower_is_better"])), r
    if np.isfinite(r["tost_ci_low"]):
        inside = decides("inside", r["tost_ci_low"], r["tost_ci_high"], 0.0, r["equivalence_margin"])
        assert inside == (r["tost_p_adj"] < r["alpha"]), r
        if r["verdict"] == "equivalent":
            assert inside, r
        if r["verdict"] == "inconclusive":
            assert not inside, r


def check_family_sizes(table: pd.DataFrame) -> None:
    """Every family's m is the number of tests its rows hold (Welch, and multi-bootstrap)."""
    for _, part in table.groupby("family"):
        tests = int(np.isfinite(part["p_adj"].astype(float)).sum())
        if "mb_p_adj" in part:
            tests += int(np.isfinite(part["mb_p_adj"].astype(float)).sum())
        assert (part["family_size"] == tests).all(), part[["family", "family_size", "p_adj"]]


# ---------------------------------------------------------------- unit tests of the record
def test_a_record_whose_verdict_and_interval_disagree_cannot_be_made():
    with pytest.raises(AuditError, match="does not decide"):
        Decision(verdict="supported", reason="x", low=-1.0, high=1.0, level=0.95)
    with pytest.raises(AuditError, match="which decides"):
        Decision(verdict="inconclusive", reason="x", low=0.5, high=1.0, level=0.95)
    with pytest.raises(AuditError, match="does not decide"):
        Decision(verdict="equivalent", reason="x", rule="inside", low=-0.3, high=0.1, margin=0.2)
    # withheld by the guard or never tested: marked as such, whatever the interval
    Decision(verdict="not_informative", reason="not informative: x", low=0.5, high=1.0, guard="x")
    Decision(verdict="inconclusive", reason="too few seeds: n=2", low=0.5, high=1.0)
    assert Decision(verdict="supported", reason="x", low=0.1, high=0.5).columns()["verdict"] == "supported"


@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_holm_step_levels_decide_exactly_as_the_adjusted_p(alpha):
    rng = np.random.default_rng(53)
    for _ in range(300):
        p = rng.uniform(0, 0.15, int(rng.integers(1, 9))) ** rng.uniform(1, 3)
        p[rng.random(len(p)) < 0.1] = np.nan
        steps, adj = step_alphas(p, alpha), adjust(p)[0]
        finite = np.isfinite(p)
        assert np.array_equal(np.isfinite(steps), finite)
        assert np.array_equal((p < steps)[finite], (adj < alpha)[finite]), (p, steps, adj)
        # the levels Holm's step-down used: alpha / (m - j + 1) for the rejected, alpha / (m - r) else
        m, r = int(finite.sum()), int((adj[finite] < alpha).sum())
        order = np.argsort(np.where(finite, p, np.inf), kind="stable")[:m]
        expected = [alpha / (m - j) if j < r else alpha / (m - r) for j in range(m)]
        assert steps[order] == pytest.approx(expected)


def test_equivalent_stands_beside_the_tost_interval_at_its_step():
    a, b = exact(50.0, 0.235, 10, 1), exact(50.0, 0.235, 10, 2)
    runs = runs_of({"mos": a, "softmax": b})
    claim = {"id": "eq", "source": "s", "statement": "same", "expect": "equivalent", "equivalence_margin": 0.2,
             "comparison": {"head_a": "mos", "head_b": "softmax", "metric": "test_ppl"}}
    family = {"family": "f", "pairs": [["mos", "softmax"]], "metrics": ["test_ppl"], "equivalence_margin": 0.2}
    config = {"comparisons": [family], "correlations": [], "claims": [claim]}
    comp = comparisons_table(runs, config, FAST)
    c = claims_table(runs, config, FAST, comp, None).iloc[0]
    row = comp.iloc[0]
    assert row["verdict"] == "equivalent" and row["tost_ci_level"] == pytest.approx(0.90)
    assert -0.2 < row["tost_ci_low"] < row["tost_ci_high"] < 0.2
    assert c["verdict"] == "supported" and c["rule"] == "inside" and c["margin"] == 0.2
    assert (c["ci_low"], c["ci_high"], c["ci_level"]) == (row["tost_ci_low"], row["tost_ci_high"], row["tost_ci_level"])


def test_a_claim_judged_either_way_shows_the_union_of_both_intervals():
    n = 10
    undecided = [3, 1, 0, 2, 0, 5, 0, 1, 0, 4]
    runs = runs_of({"softmax": exact(57, 1, n)}, unargmaxable_box100={"softmax": [0] * n},
                   argmax_unresolved_box100={"softmax": undecided})
    claim = {"id": "rare", "source": "s", "statement": "rare", "expect": "below",
             "one_sample": {"head": "softmax", "metric": "unargmaxable_box100", "bound": 0.5, "test": "binomial",
                            "unresolved": "argmax_unresolved_box100"}}
    c = claims_table(runs, {"claims": [claim]}, FAST, None, None).iloc[0]
    assert c["verdict"] == "inconclusive"
    # a family of one: each side's one-sided Clopper-Pearson bound at 95%; as argmaxable 0/10 runs,
    # lower 0; as not 6/10, upper = the 0.95 quantile of Beta(7, 4) = 0.8513
    assert c["ci_low"] == pytest.approx(0.0 - 0.5)
    assert c["ci_high"] == pytest.approx(0.8513 - 0.5, abs=2e-3) and c["ci_level"] == pytest.approx(0.90)
    check_claim_row(c.to_dict())


# ---------------------------------------------------------------- random studies
def _claims(rng, margin: float) -> list[dict]:
    expects = ["lower", "higher", "equivalent", "not_lower", "not_higher"]
    out = [{"id": f"c{i}", "source": "s", "statement": "s", "expect": e,
            **({"equivalence_margin": margin} if e != "lower" or i % 2 else {}),
            **({"test": "multibootstrap"} if i == 3 else {}),
            **({"by_construction": "algebra"} if i == 4 else {}),
            "comparison": {"head_a": ["mos", "gss", "moc"][i % 3], "head_b": "softmax", "metric": "test_ppl"}}
           for i, e in enumerate(expects)]
    out += [{"id": "only", "source": "s", "statement": "s", "expect": "lower", "equivalence_margin": margin,
             "comparison": {"head_a": "gss", "head_b": "mos", "metric": "test_ppl"}},
            {"id": "share", "source": "s", "statement": "s", "expect": str(rng.choice(["below", "above"])),
             "one_sample": {"head": "mos", "metric": "gradient_norm_share", "bound": 0.05, "test": "t"}},
            {"id": "rare", "source": "s", "statement": "s", "expect": "below",
             "one_sample": {"head": "softmax", "metric": "unargmaxable", "bound": 0.4, "test": "binomial",
                            "unresolved": "argmax_unresolved"}},
            {"id": "hidden", "source": "s", "statement": "s", "expect": "above", "by_construction": "geometry",
             "one_sample": {"head": "softmax", "metric": "gradient_norm_share", "bound": 0.01, "test": "t"}},
            {"id": "r", "source": "s", "statement": "s", "expect": str(rng.choice(["positive", "negative", "nonzero"])),
             "correlation": {"name": "rank", "level": "runs", "method": str(rng.choice(["pearson", "spearman"]))}},
            {"id": "weak", "source": "s", "statement": "s", "expect": "weak", "weak_below": 0.5,
             "correlation": {"name": "rank", "level": "runs", "method": "pearson"}},
            {"id": "never", "source": "s", "statement": "s", "untestable": "why"}]
    return out


def _study(rng):
    heads = ["softmax", "mos", "gss", "moc"]
    n = {h: int(rng.integers(2, 9)) for h in heads}
    centre = {h: 50 + rng.choice([0, 0, 0.3, 1.5, 4]) for h in heads}
    if rng.random() < 0.3:
        centre["moc"] = 300.0                                  # above the unigram: the guard flags it
    arms = {h: centre[h] + rng.normal(0, rng.uniform(0.05, 1.5), n[h]) for h in heads}
    columns = dict(gradient_norm_share={h: rng.uniform(0, 0.12, n[h]) for h in heads},
                   unargmaxable={h: rng.integers(0, 2, n[h]) * rng.integers(0, 3, n[h]) for h in heads},
                   argmax_unresolved={h: rng.integers(0, 2, n[h]) for h in heads},
                   press_rank={h: rng.normal(30, 5, n[h]) + 0.5 * (arms[h] - 50) for h in heads})
    runs = runs_of(arms, **columns)
    margin = float(rng.uniform(0.1, 2.0))
    config = {"comparisons": [{"family": "f", "baseline": "softmax", "against": ["mos", "gss", "moc"],
                               "metrics": ["test_ppl"], "equivalence_margin": margin}],
              "correlations": [{"name": "rank", "x": "press_rank", "y": "test_ppl"}],
              "claims": _claims(rng, margin)}
    return runs, config


def _sentences(runs: pd.DataFrame, rng):
    """Per-sentence NLL for the multi-bootstrap: 30 sentences of 20 tokens per run."""
    from audit.stats.multiboot import Sentences
    nll, tokens = {}, {}
    for r in runs.itertuples():
        key = (r.corpus, r.head, r.seed)
        tokens[key] = np.full(30, 20, np.int64)
        nll[key] = 20 * np.log(r.test_ppl) + rng.normal(0, 2, 30)
    return Sentences(nll, tokens)


def _published(rng, margin: float, unstated: bool) -> pd.DataFrame:
    rows = []
    for head in ("softmax", "mos", "gss"):
        n = int(rng.integers(3, 12))
        rows.append(dict(corpus="ptb", head=head, metric="test_ppl", mean=50 + rng.choice([0, 0.2, 1.0, 3.0]),
                         sd=float(rng.uniform(0.05, 1.0)), n=n, source=f"p {head}", set="t", kind="seeds",
                         n_basis="n unstated" if unstated and head == "mos" else f"{n} seeds"))
    rows.append(dict(corpus="ptb", head="grid", metric="rank", mean=float(rng.uniform(-0.95, 0.95)), sd=math.nan,
                     n=int(rng.integers(5, 12)), source="p r", set="r", kind="correlation", n_basis="runs"))
    return pd.DataFrame(rows)


@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_every_row_of_every_table_follows_its_record(alpha, tmp_path, monkeypatch):
    # an unstated n is judged at a seeded sample of its combinations: 24 keep the test quick
    monkeypatch.setattr(unstated, "MAX_COMBINATIONS", 24)
    rng = np.random.default_rng(int(alpha * 1000))
    seen = set()
    for trial in range(8):
        runs, config = _study(rng)
        settings = Settings(bootstrap_resamples=100, alpha=alpha, min_seeds=3)
        runs.assign(design="sequential: 2 looks").to_csv(tmp_path / "other.csv", index=False)
        config["evidence"] = [{"name": "other", "runs": str(tmp_path / "other.csv")}]
        inputs = registry.Inputs(config=config, settings=settings, source="random", runs=runs, baselines=BASE,
                                 sentences=_sentences(runs, rng))
        built = {t.name: t.make(inputs)[0] for t in registry.TABLES if t.source in ("runs", "evidence")
                 and t.name not in ("wordsim_wins", "wordsim_diffs")}
        for r in built["comparisons"].to_dict("records"):
            check_comparison_row(r)
            seen.add(r["verdict"])
        check_family_sizes(built["comparisons"])
        for name in ("claims", "evidence_claims"):
            for r in built[name].to_dict("records"):
                check_claim_row(r)
                seen.add(f"{r['kind']}:{r['verdict']}")
            claims = built[name]
            in_claims = claims[claims["evidence"].astype(str).str.startswith("family=claims")]
            tested = in_claims[in_claims["gate"] == "tested"]
            assert (in_claims["family_m"] == len(tested)).all() or tested.empty, in_claims[["claim_id", "family_m"]]
        # the published record, with and without an unstated n
        pub = _published(rng, 0.5, unstated=bool(trial % 2))
        pub.to_csv(tmp_path / "pub.csv", index=False)
        pconfig = dict(config, published={"unstated_n": [3, 8], "equivalence_margin": {"test_ppl": 0.5}},
                       claims=[c for c in config["claims"] if "one_sample" not in c])
        for c in pconfig["claims"]:
            if "correlation" in c:
                c["correlation"] = dict(c["correlation"], name="rank")
        tables = published_tables(pconfig, settings, tmp_path / "pub.csv")
        for r in tables["published_comparisons"].to_dict("records"):
            check_comparison_row(r)
        for r in tables["published_claims"].to_dict("records"):
            check_claim_row(r)
            seen.add(f"published {r['kind']}:{r['verdict']}")
    assert {"a_better", "b_better", "inconclusive"} <= seen
    assert {"comparison:supported", "comparison:not_informative", "one_sample:supported"} & seen
    assert any(s.startswith("correlation:") for s in seen) and any(s.startswith("published") for s in seen)
