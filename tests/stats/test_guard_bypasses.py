"""Each way around the guard that issue 33 found, closed: constructed runs tables whose verdicts
the guard let stand (on 9868dd9) and must now label not informative, with the reason."""

import numpy as np
import pandas as pd

from audit.stats import guard
from audit.stats.claims import claims_table
from audit.stats.comparisons import comparisons_table
from audit.stats.correlations import correlations_table
from audit.stats.io import Settings
from tests.stats.test_guard import BASE, CONFIG, FAST, runs_table

RANK_CLAIM = {"id": "mos-rank", "source": "s", "statement": "MoS raises the rank", "expect": "higher",
              "comparison": {"head_a": "mos", "head_b": "softmax", "metric": "press_rank"}}


def judged(runs, config, settings=FAST, baselines=BASE):
    """(claims before the guard, claims after it), indexed by claim id."""
    comp = comparisons_table(runs, config, settings)
    table = claims_table(runs, config, settings, comp, correlations_table(runs, config, settings))
    return table.set_index("claim_id"), guard.guard_claims(table, runs, baselines, config).set_index("claim_id")


def test_an_arm_without_a_finite_perplexity_is_not_informative_on_every_metric():
    runs = runs_table({"softmax": 150.0, "mos": 100.0})
    mos = runs["head"] == "mos"
    runs.loc[mos, "test_ppl"] = np.nan                       # ranks measured, perplexity not
    runs.loc[mos, "press_rank"] += 40.0
    config = dict(CONFIG, comparisons=[], correlations=[], claims=[RANK_CLAIM])
    before, after = judged(runs, config)
    assert before.loc["mos-rank", "verdict"] == "supported"   # the rank test alone decides
    assert after.loc["mos-rank", "verdict"] == guard.VERDICT
    assert after.loc["mos-rank", "reason"].startswith(
        "not informative: mos: no finite test perplexity (6 ok runs, 0 failed); the test alone: supported")
    # no baselines table at all: this check still applies
    assert guard.guard_claims(before.reset_index(), runs, None, config)["verdict"].iloc[0] == guard.VERDICT


def test_an_arm_whose_failed_runs_exceed_the_share_is_not_informative():
    runs = runs_table({"softmax": 150.0, "mos": 100.0}, n=4)
    failed = pd.DataFrame(dict(corpus="ptb", head="mos", seed=[str(s) for s in range(4, 10)], status="failed",
                               test_ppl=np.nan, press_rank=np.nan, vocab_size=np.nan, test_tokens=np.nan))
    runs = pd.concat([runs, failed], ignore_index=True)      # mos: 6 of 10 planned runs failed
    few = Settings(bootstrap_resamples=500, min_seeds=4)
    before, after = judged(runs, CONFIG, few)
    assert before.loc["mos-lowers", "verdict"] == "supported"
    assert after.loc["mos-lowers", "verdict"] == guard.VERDICT
    assert "mos: 6 of 10 planned runs failed (more than stats.max_failed_share = 0.2" in after.loc["mos-lowers", "reason"]
    # at the boundary: 1 of 5 failed is 0.2, not more: nothing to say
    one = pd.concat([runs_table({"mos": 100.0}, n=4), failed.iloc[:1]], ignore_index=True)
    assert guard.flagged(one, BASE) == {}
    assert guard.flagged(one, BASE, max_failed_share=0.1)[("ptb", "mos")].startswith("mos: 1 of 5 planned runs failed")


def test_runs_without_a_vocabulary_match_no_baseline_of_another_vocabulary():
    # softmax at 250 is worse than the K = 2,000 unigram (196.5); only the full-vocabulary row is given
    runs = runs_table({"softmax": 250.0, "mos": 100.0}).drop(columns="vocab_size")
    full = BASE[BASE["vocab_size"] == 10000]
    before, after = judged(runs, CONFIG, baselines=full)
    assert before.loc["mos-lowers", "verdict"] == "supported"
    assert after.loc["mos-lowers", "verdict"] == guard.VERDICT
    assert ("softmax: no baseline for this vocabulary (ptb, no single vocab_size, 82,429 test tokens scored; "
            "the baselines table has ptb K = 10,000 over 4,999)") in after.loc["mos-lowers", "reason"]


def test_two_baseline_rows_never_switch_the_guard_off():
    # both arms worse than either unigram; the runs do not say their vocabulary
    runs = runs_table({"softmax": 900.0, "mos": 700.0}).drop(columns="vocab_size")
    before, after = judged(runs, CONFIG)
    assert before.loc["mos-lowers", "verdict"] == "supported"
    assert after.loc["mos-lowers", "verdict"] == guard.VERDICT
    assert "no baseline for this vocabulary" in after.loc["mos-lowers", "reason"]


def test_the_baseline_must_be_scored_on_the_same_test_tokens():
    # K = 2,000 runs scored on 4,999 tokens; the K = 2,000 baseline is over all 82,430 tokens
    runs = runs_table({"softmax": 150.0, "mos": 100.0}, tokens=4999.0)
    assert judged(runs, CONFIG)[1].loc["mos-lowers", "verdict"] == guard.VERDICT
    assert guard.flagged(runs, BASE)[("ptb", "mos")].startswith(
        "mos: no baseline for this vocabulary (ptb, K = 2,000, 4,999 test tokens scored; the baselines table "
        "has ptb K = 2,000 over 82,429; K = 10,000 over 4,999)")
    # the same runs on the baseline's own tokens: both beat 196.5, nothing flagged
    assert guard.flagged(runs.assign(test_tokens=82429.0), BASE) == {}
    # a baselines table from before n_test was written matches nothing
    assert set(guard.flagged(runs.assign(test_tokens=82429.0), BASE.drop(columns="n_test"))) == {
        ("ptb", "mos"), ("ptb", "softmax")}


def test_comparisons_and_correlations_carry_the_same_label():
    runs = runs_table({"softmax": 150.0, "mos": 100.0, "gss": 120.0}, tokens=4999.0)
    comp = guard.guard_comparisons(comparisons_table(runs, CONFIG, FAST), runs, BASE)
    assert set(comp["verdict"]) == {guard.VERDICT}
    corr = guard.guard_correlations(correlations_table(runs, CONFIG, FAST), runs, BASE, CONFIG)
    assert corr["note"].str.startswith("not informative: gss: no baseline for this vocabulary").all()
    assert corr["pearson_r"].equals(correlations_table(runs, CONFIG, FAST)["pearson_r"])   # statistics kept


def test_an_untestable_claim_beside_a_guarded_arm_keeps_its_row():
    # the guard asked every claim for its arms and read claim["correlation"] of an untestable one
    # (KeyError, the whole stats job down) once a guarded arm was in the study
    runs = runs_table({"softmax": 150.0, "mos": 100.0})
    runs.loc[runs["head"] == "mos", "test_ppl"] = np.nan
    untestable = {"id": "saturates", "source": "s", "statement": "small heads saturate", "untestable": "why not"}
    config = dict(CONFIG, comparisons=[], correlations=[], claims=[RANK_CLAIM, untestable])
    before, after = judged(runs, config)
    assert guard.claim_heads(untestable, runs, "ptb", []) == []   # was every head: relabelled
    assert guard.claim_heads(untestable, runs, "ptb", [{"name": "c"}]) == []   # was a KeyError
    assert after.loc["mos-rank", "verdict"] == guard.VERDICT
    assert after.loc["saturates"].equals(before.loc["saturates"])
