"""Unstated n judged family-wide (audit/stats/published/unstated.py; issue 33, finding 3): a row's n
moves its p and, through Holm, every verdict of its family, so the whole family is re-run at every
combination of its unstated rows' admissible n. Golden values: SciPy's Welch test from summaries and
statsmodels' Holm, computed here independently of the module."""

import itertools
import re

import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from audit.stats.io import Settings
from audit.stats.published import unstated
from audit.stats.published.evidence import published_tables

# min_seeds 3 (as the smoke studies): B at n = 3 stays in the Holm family
SETTINGS = Settings(min_seeds=3)
BASE = (57.00, 0.10, 10)
FAMILY = {"family": "g", "baseline": "base", "against": ["A", "B"], "metrics": ["test_ppl"]}
CLAIM = {"id": "a", "source": "s", "comparison": {"head_a": "A", "head_b": "base", "metric": "test_ppl"},
         "expect": "lower"}


def tables(tmp_path, a, b, basis_b="unstated (10 assumed)", basis_a="10 random seeds"):
    path = tmp_path / f"s-{basis_b[:4]}.csv"
    path.write_text("corpus,head,metric,mean,sd,n,source,n_basis\n"
                    f"ptb,base,test_ppl,{BASE[0]},{BASE[1]},{BASE[2]},x,10 random seeds\n"
                    f"ptb,A,test_ppl,{a[0]},{a[1]},10,x,{basis_a}\n"
                    f"ptb,B,test_ppl,{b[0]},{b[1]},10,y,{basis_b}\n")
    config = {"claims": [CLAIM], "published": {"comparisons": [{"set": "summaries", "compare": FAMILY}]}}
    out = published_tables(config, SETTINGS, path)
    return out["published_comparisons"].set_index("head_a"), out["published_claims"].set_index("claim_id")


def welch_p(arm, n):
    return stats.ttest_ind_from_stats(arm[0], arm[1], n, *BASE, equal_var=False).pvalue


def holm_a(a, b, n_b):
    """A's Holm-adjusted p in the family {A, B} with B over n_b runs (statsmodels)."""
    return multipletests([welch_p(a, 10), welch_p(b, n_b)], method="holm")[1][0]


def test_a_stated_row_is_judged_at_every_n_of_another_unstated_row_of_its_family(tmp_path):
    """{base; A stated n, p = 0.038; B n unstated, p = 0.0003 at the assumed n = 10}: A is supported
    at B's n = 10 and not at B's n = 3 (p_adj 0.076), which is in B's own admissible set (3-20,
    no printed p): A's verdict must not stand."""
    a, b = (56.90, 0.10), (56.48, 0.30)
    assert welch_p(a, 10) == pytest.approx(0.038, abs=5e-4) and welch_p(b, 10) == pytest.approx(0.0003, abs=5e-5)
    supported_at = [n for n in range(3, 21) if holm_a(a, b, n) < 0.05]
    assert supported_at == list(range(5, 21)) and holm_a(a, b, 3) == pytest.approx(0.0765, abs=1e-4)
    comp, claims = tables(tmp_path, a, b)
    row = comp.loc["A"]
    # issue 53: A's Welch verdict depends on B's n, but its TOST equivalence (margin 0.5 of the
    # published section) holds at every combination: the verdict that stands at each n is
    # "equivalent", decided on the hull of the TOST intervals over every admissible n
    assert row["verdict"] == "equivalent" and row["reason"].startswith("depends on the unstated n: ")
    assert "over every admissible n: tost p_adj=" in row["reason"]
    assert -0.5 < row["tost_ci_low"] < row["tost_ci_high"] < 0.5
    assert row["diff_ci_low"] < 0 < row["diff_ci_high"]          # the Welch hull holds 0: no difference at n = 3
    # the combinations behind each verdict, with A's p_adj at each (statsmodels' Holm)
    assert f"B vs base (3, 10) [welch p {welch_p(a, 10):.3g}, tost p" in row["reason"]
    assert f"p_adj {holm_a(a, b, 3):.3g}], B vs base (4, 10)" in row["reason"]
    better = row["reason"].split("; a_better at ")[1]
    assert better.startswith("B vs base (5, 10)") and f", and {len(supported_at) - unstated.SHOWN} more" in better
    assert row["n_set_combinations"] == 18 and "18 combinations of (n_a, n_b) checked (all of them)" in row["n_unstated"]
    assert row["n_set_welch_p_min"] == pytest.approx(welch_p(a, 10), rel=1e-9) == row["n_set_welch_p_max"]
    # B's own verdict moves with its n as before; and the claim resting on A does not stand either
    assert comp.loc["B", "verdict"] == "inconclusive" and comp.loc["B", "n_set_combinations"] == 18
    assert claims.loc["a", "verdict"] == "equivalent" and claims.loc["a", "n_combinations"] == 18
    assert claims.loc["a", "rule"] == "inside" and claims.loc["a", "ci_high"] == row["tost_ci_high"]


def test_a_family_whose_verdicts_do_not_move_is_unchanged(tmp_path):
    """Both differences are large: at every n of B the family's verdicts are those at the assumed
    n, so the table's verdicts and numbers are those of the same table with B's n stated."""
    a, b = (56.80, 0.10), (56.30, 0.10)
    assert all(holm_a(a, b, n) < 0.05 for n in range(3, 21))
    assert all(multipletests([welch_p(a, 10), welch_p(b, n)], method="holm")[1][1] < 0.05 for n in range(3, 21))
    comp, claims = tables(tmp_path, a, b)
    stated, stated_claims = tables(tmp_path, a, b, basis_b="10 random seeds")
    assert list(comp["verdict"]) == list(stated["verdict"]) == ["a_better", "a_better"]
    # issue 53: over an unstated n the p-values are the largest over the admissible n and the
    # intervals their hull, so each holds at every n: never smaller than the stated n's
    for col in ("welch_p", "p_adj"):
        assert (comp[col].to_numpy() >= stated[col].to_numpy() * (1 - 1e-12)).all()
    assert (comp["diff_ci_low"] <= stated["diff_ci_low"] + 1e-12).all()
    assert (comp["diff_ci_high"] >= stated["diff_ci_high"] - 1e-12).all()
    worst = max(multipletests([welch_p(a, 10), welch_p(b, n)], method="holm")[1][1] for n in range(3, 21))
    assert comp.loc["B", "p_adj"] == pytest.approx(worst, rel=1e-9)
    assert claims.loc["a", "verdict"] == stated_claims.loc["a", "verdict"] == "supported"
    # the reason is the one at the first combination (B's n = 3), then where else it holds
    reason = comp.loc["A", "reason"]
    assert reason.startswith(f"welch p_adj={holm_a(a, b, 3):.3g} < 0.05 (its ") and "; a_better at each of the 18 combinations" in reason
    assert (stated["n_unstated"] == "").all() and stated["n_set_combinations"].isna().all()


def test_combinations_all_when_few_else_a_stated_seeded_sample():
    sets = [[(i, 10) for i in range(3, 21)], [(10, j) for j in range(3, 21)]]
    everything = list(itertools.product(*sets))
    combos, text = unstated.combinations(sets, seed=7, limit=324)
    assert combos == everything and text == "324 combinations of (n_a, n_b) checked (all of them)"
    combos, text = unstated.combinations(sets, seed=7, limit=50)
    assert len(set(combos)) == 50 and set(combos) <= set(everything)
    assert combos == sorted(combos, key=everything.index)            # in the product's order
    assert text.startswith("50 of the 324 combinations") and "default_rng(7)" in text
    assert unstated.combinations(sets, seed=7, limit=50)[0] == combos != unstated.combinations(sets, seed=8, limit=50)[0]


def test_many_combinations_are_sampled_and_the_count_is_shown(tmp_path, monkeypatch):
    """A and B both unstated (18 x 18 = 324 combinations); above the limit a seeded sample is
    checked and every row of the family says how many."""
    monkeypatch.setattr(unstated, "MAX_COMBINATIONS", 40)
    comp, claims = tables(tmp_path, (56.90, 0.10), (56.48, 0.30), basis_a="unstated (10 assumed)")
    assert list(comp["n_set_combinations"]) == [40, 40] and claims.loc["a", "n_combinations"] == 40
    text = comp.loc["A", "n_unstated"]
    assert "40 of the 324 combinations" in text and f"default_rng({SETTINGS.bootstrap_seed})" in text
    assert "A vs base: n unstated for a = A" in text and "B vs base: n unstated for a = B" in text
    assert re.search(r"this row \(\d+, 10\) \+ B vs base \(\d+, 10\)", comp.loc["A", "reason"])
