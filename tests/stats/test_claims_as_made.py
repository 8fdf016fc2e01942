"""Issue 33, finding 5: the post-2021 claims judged as their authors made them, ours labelled
ours -- undecided tokens counted either way, the random-direction floor of the gradient share,
the `ours` field and the untestable kind, and the claims file's own entries."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from audit.report import render
from audit.stats.claims import COLUMNS, claims_table
from audit.stats.io import Settings, load_config

FAST = Settings(bootstrap_resamples=200)
SCALE_VERDICT = "not_informative_at_scale"   # audit.stats.one_sample_claims.SCALE_VERDICT
ROOT = Path(__file__).resolve().parents[2]


def softmax_runs(n=10, **columns):
    """n ok softmax runs on ptb; each keyword a list (or a scalar for every run)."""
    rows = [dict(corpus="ptb", head="softmax", seed=str(s), status="ok", test_ppl=57.0 + 0.1 * s) for s in range(n)]
    for key, value in columns.items():
        for s, row in enumerate(rows):
            row[key] = value[s] if isinstance(value, (list, np.ndarray)) else value
    return pd.DataFrame(rows)


def binomial_claim(**extra):
    return {"id": "rare", "source": "test", "expect": "below",
            "one_sample": {"head": "softmax", "metric": "unargmaxable_box100", "bound": 0.5, "test": "binomial",
                           "threshold": 0, **extra}}


def test_unresolved_tokens_give_a_verdict_only_where_both_accountings_agree():
    """0 of 10 runs proved to have unargmaxable tokens, but 4 runs with tokens left unresolved:
    counted argmaxable the rate is 0/10 (p = 0.5^10, supported); counted unargmaxable it is
    4/10 (p = P(Binom(10, 0.5) <= 4) = 0.377): no verdict. Today's code counts them argmaxable."""
    runs = softmax_runs(unargmaxable_box100=0, argmax_unresolved_box100=[3, 0, 1, 0, 0, 7, 0, 0, 2, 0])
    row = claims_table(runs, {"claims": [binomial_claim(unresolved="argmax_unresolved_box100")]}, FAST, None, None).iloc[0]
    assert row.verdict == "inconclusive", row.reason
    assert row.p == pytest.approx(stats.binom.cdf(4, 10, 0.5))          # the larger of the two p's
    assert "0/10" in row.reason and "4/10 with the unresolved tokens counted unargmaxable" in row.reason
    # every token resolved: both accountings agree, and the verdict stands
    runs["argmax_unresolved_box100"] = 0
    row = claims_table(runs, {"claims": [binomial_claim(unresolved="argmax_unresolved_box100")]}, FAST, None, None).iloc[0]
    assert row.verdict == "supported" and row.p == pytest.approx(0.5 ** 10) and "both accountings" in row.reason
    # a run whose undecided count is unknown is no evidence either way: it leaves the sample
    runs.loc[:5, "argmax_unresolved_box100"] = np.nan
    row = claims_table(runs, {"claims": [binomial_claim(unresolved="argmax_unresolved_box100")]}, FAST, None, None).iloc[0]
    assert row.n_a == 4 and row.verdict == "inconclusive" and row.reason.startswith("too few seeds: n=4")
    # without the unresolved column in the runs table: not run, never a verdict
    row = claims_table(runs.drop(columns="argmax_unresolved_box100"),
                       {"claims": [binomial_claim(unresolved="argmax_unresolved_box100")]}, FAST, None, None).iloc[0]
    assert row.verdict == "inconclusive" and row.reason.startswith("not run")


def floor_claim(bound):
    return {"id": f"g{bound}", "source": "test", "expect": "below",
            "one_sample": {"head": "softmax", "metric": "gradient_norm_share", "bound": bound, "test": "t",
                           "scale_floor": "random_direction"}}


def test_a_verdict_that_follows_from_geometry_reads_not_informative_at_this_scale():
    """V = 2,000, d = 64: a random direction keeps sqrt(65 / 2000) = 0.180 of its norm. Against
    the bound 0.05 the share (0.25) is contradicted by geometry alone: no verdict, the floor shown.
    Against 0.312 the floor lies below the bound and the verdict (supported) stands."""
    shares = 0.25 + 0.01 * np.random.default_rng(0).standard_normal(10)
    runs = softmax_runs(gradient_norm_share=shares, emb_size=64, vocab_size=2000)
    t = claims_table(runs, {"claims": [floor_claim(0.05), floor_claim(0.312)]}, FAST, None, None).set_index("claim_id")
    floor = math.sqrt(65 / 2000)
    assert f"{floor:.3g}" == "0.18"
    assert t.loc["g0.05", "verdict"] == SCALE_VERDICT
    assert t.loc["g0.05", "reason"].startswith("not informative at this scale") and f"{floor:.3g}" in t.loc["g0.05", "reason"]
    assert t.loc["g0.312", "verdict"] == "supported" and f"floor sqrt((d+1)/V) = {floor:.3g}" in t.loc["g0.312", "reason"]
    # at V = 50,000 the floor is 0.036 < 0.05: the test speaks, and the share 0.25 contradicts it
    big = softmax_runs(gradient_norm_share=shares, emb_size=64, vocab_size=50_000)
    assert claims_table(big, {"claims": [floor_claim(0.05)]}, FAST, None, None).iloc[0].verdict == "contradicted"
    # no emb_size / vocab_size: the floor is unknown, so no verdict either
    bare = softmax_runs(gradient_norm_share=shares)
    row = claims_table(bare, {"claims": [floor_claim(0.312)]}, FAST, None, None).iloc[0]
    assert row.verdict == SCALE_VERDICT and "unknown" in row.reason


def test_ours_and_untestable_reach_the_claims_table_and_the_page(tmp_path):
    runs = softmax_runs(unargmaxable_box100=0, argmax_unresolved_box100=0)
    config = {"claims": [dict(binomial_claim(), ours="the bound 0.5 is ours: rarely as < half"),
                         {"id": "sat", "source": "Godey 2024", "statement": "small heads saturate",
                          "untestable": "the runs keep their best epoch"}]}
    t = claims_table(runs, config, FAST, None, None)
    assert list(t.columns) == COLUMNS
    by = t.set_index("claim_id")
    assert by.loc["rare", "ours"] == "the bound 0.5 is ours: rarely as < half" and by.loc["sat", "ours"] == ""
    assert by.loc["sat", "verdict"] == "inconclusive" and by.loc["sat", "reason"] == "untestable: the runs keep their best epoch"
    runs_path, config_path, claims_path = tmp_path / "runs.csv", tmp_path / "c.yaml", tmp_path / "claims.csv"
    runs.to_csv(runs_path, index=False)
    t.to_csv(claims_path, index=False)
    config_path.write_text(yaml.safe_dump({"study": "t", "heads": [{"name": "softmax"}]}))
    html = render.render(str(runs_path), str(config_path), [str(claims_path)], [])
    card = html[html.index('id="claim-'):]
    assert '<span class="badge v-ours">ours</span> the bound 0.5 is ours: rarely as &lt; half' in card
    # the untestable claim sits with the claims not tested, with its why, never as a verdict card
    untested = html[html.index("Claims this study cannot test"):]
    assert "untestable: the runs keep their best epoch" in untested
    assert 'class="claim v-border-inconclusive" id="claim-sat' not in html
    # ... and out of the headline's verdict counts: "1 not tested" beside the tested claim's verdict
    head = html[html.index('<p class="meta">'):html.index("</p>", html.index('<p class="meta">'))]
    assert '<span class="badge v-not_run">1 not tested</span>' in head
    assert head.count('<span class="badge v-') == 2, head


def test_the_claims_file_judges_grivas_on_the_authors_box_and_shows_ours_beside_it():
    """Softmax runs with unargmaxable tokens over [-1, 1]^d in every run (the body's box, as at
    the default's size) but none over [-100, 100]^d: Grivas et al.'s claim is supported on their
    setting, our box's own row contradicted and marked ours; the hidden-size claim is judged on
    hidden_gap_miss, as a control (it holds by construction); saturation is untestable; every bound of ours says so."""
    config = load_config(ROOT / "configs" / "claims.yaml")
    runs = softmax_runs(unargmaxable=[1500 + s for s in range(10)], argmax_unresolved=0, unargmaxable_box100=0,
                        argmax_unresolved_box100=0, hidden_gap_miss=0, gradient_norm_share=0.25,
                        emb_size=64, vocab_size=2000)
    runs["gradient_norm_share"] += 0.01 * np.random.default_rng(1).standard_normal(10)
    by = claims_table(runs, config, FAST, None, None).set_index("claim_id")
    assert by.loc["softmax-rarely-unargmaxable", "verdict"] == "supported"
    assert "unargmaxable_box100" in by.loc["softmax-rarely-unargmaxable", "evidence"]
    assert by.loc["softmax-unargmaxable-in-the-bodys-box", "verdict"] == "contradicted"
    assert by.loc["softmax-unargmaxable-in-the-bodys-box", "source"].startswith("this audit")
    # holds by construction (issue 46): a control that passed, not empirical support
    assert by.loc["softmax-outputs-reveal-hidden-size", "verdict"] == "control_passed"
    assert by.loc["softmax-passes-small-gradient-share", "verdict"] == SCALE_VERDICT
    assert by.loc["softmax-rejects-most-gradient-norm", "verdict"] == "supported"
    assert by.loc["small-heads-saturate", "reason"].startswith("untestable: ")
    for cid in ("softmax-rarely-unargmaxable", "softmax-unargmaxable-in-the-bodys-box", "softmax-passes-small-gradient-share",
                "softmax-rejects-most-gradient-norm", "softmax-outputs-reveal-hidden-size", "logp-rank-correlation-is-weak",
                "high-rank-not-sufficient", "mos-no-better-than-matched-softmax", "learned-plif-no-better-than-frozen"):
        assert "ours" in by.loc[cid, "ours"], cid
    assert "0.312" in by.loc["softmax-passes-small-gradient-share", "ours"] or "0.31" in by.loc["softmax-rejects-most-gradient-norm", "ours"]
