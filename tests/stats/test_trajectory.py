"""Verdicts traced over the training budget (audit.stats.trajectory, audit.stats.trajectory_marks)
on constructed studies: run folders whose per-epoch logs follow planted curves, no training."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from audit.errors import AuditError
from audit.stats import trajectory as T
from audit.stats import trajectory_marks as M
from audit.stats.comparisons import comparisons_table
from audit.stats.io import Settings
from tests.support.trajectory_study import (EPOCH_TOKENS, fast_and_worse, parallel, slow_and_better, still_gaining,
                              study_config, write_study)


def traced(tmp_path, curves, head_a, head_b, **kw):
    runs, dirs = write_study(tmp_path, curves, **kw)
    config = study_config(tmp_path, head_a, head_b)
    settings = Settings.from_config(config["stats"])
    epochs = T.read_epochs(dirs)
    table = T.trajectory_table(runs, epochs, config, settings)
    marks = M.marks_table(table, T.best_so_far(epochs), runs, config, settings)
    return runs, epochs, config, settings, table, marks


def mark_of(marks, trace):
    return marks[marks["trace"] == trace].iloc[0]


def test_a_head_that_learns_faster_and_ends_worse_changed_its_verdict(tmp_path):
    *_, table, marks = traced(tmp_path, {"fast": fast_and_worse, "slow": slow_and_better}, "fast", "slow")
    claim = table[table["trace"] == "a-lowers-ppl"].set_index("epoch")
    # planted: fast is lower up to epoch 5 (110 vs 111), higher from epoch 6 (110 vs 108)
    assert claim.loc[5, "verdict"] == "supported" and claim.loc[6, "verdict"] == "contradicted"
    assert (claim.loc[6:, "verdict"] == "contradicted").all()
    mark = mark_of(marks, "a-lowers-ppl")
    assert mark["mark"] == "changed"
    assert mark["since_tokens"] == 6 * EPOCH_TOKENS and mark["final_tokens"] == 8 * EPOCH_TOKENS
    assert mark["text"].startswith("changed at 900,000 tokens") and "supported before 900,000 tokens" in mark["text"]
    assert "traced on valid_ppl per epoch (the claim is on test_ppl)" in mark["text"]
    assert mark_of(marks, "pair: fast - slow")["mark"] == "changed"   # the comparison behind it too


def test_parallel_arms_hold_their_verdict_and_are_not_moving(tmp_path):
    *_, table, marks = traced(tmp_path, {"low": parallel(0.0), "high": parallel(3.0)}, "low", "high")
    assert set(table.loc[table["trace"] == "a-lowers-ppl", "verdict"]) == {"supported"}
    mark = mark_of(marks, "a-lowers-ppl")
    assert mark["mark"] == "held" and mark["since_tokens"] == EPOCH_TOKENS and not mark["moving"]
    assert mark["trend_p"] >= 0.05 and mark["text"].startswith("held since 150,000 tokens")


def test_a_gap_still_widening_is_still_moving_with_the_stated_test(tmp_path):
    runs, epochs, _, settings, table, marks = traced(
        tmp_path, {"gaining": still_gaining, "base": parallel(2.0)}, "gaining", "base")
    mark = mark_of(marks, "a-lowers-ppl")
    assert set(table.loc[table["trace"] == "a-lowers-ppl", "verdict"]) == {"supported"}
    assert mark["mark"] == "still moving" and mark["moving"]
    # independently: per run the least-squares slope over its last 4 of 8 epochs, per million tokens,
    # of the best validation perplexity so far; Welch's t from its textbook formula
    slopes = {}
    for (head, seed), run in epochs.sort_values("epoch").groupby(["head", "seed"]):
        best = np.minimum.accumulate(run["valid_ppl"].to_numpy())[-4:]
        x = run["tokens"].to_numpy()[-4:] / 1e6
        slopes.setdefault(head, []).append(((x - x.mean()) * (best - best.mean())).sum() / ((x - x.mean()) ** 2).sum())
    a, b = np.array(slopes["gaining"]), np.array(slopes["base"])
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    assert mark["trend_slope"] == pytest.approx(a.mean() - b.mean(), rel=1e-9)
    assert mark["trend_slope"] == pytest.approx(-1.5 / 0.15, rel=0.05)   # planted: -1.5 ppl per 150k tokens
    assert mark["trend_t"] == pytest.approx(t, rel=1e-9) and mark["trend_df"] == pytest.approx(df, rel=1e-9)
    assert mark["trend_p"] == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-9)
    assert "welch t on per-run slopes, n = 6, 6, two-sided p = " in mark["text"] and "< alpha 0.05" in mark["text"]


def test_the_last_budget_is_the_final_decision_on_validation_perplexity(tmp_path):
    def settled(epoch):   # flat to 0.002 ppl from epoch 5: the noise decides the best epoch
        return 100 + 300 * math.exp(-1.5 * epoch)

    runs, epochs, config, settings, table, _ = traced(
        tmp_path, {"low": settled, "high": lambda e: settled(e) + 0.4}, "low", "high")
    # the planted noise leaves some runs' best epoch before the last: the runs table's valid_ppl
    # (the first best epoch's) is not the last epoch's
    last = epochs[epochs["epoch"] == 8].set_index(["head", "seed"])["valid_ppl"]
    assert (runs.set_index(["head", "seed"])["valid_ppl"] < last).any()
    final = comparisons_table(runs.assign(test_ppl=runs["valid_ppl"]), config, settings)
    final = final[final["metric"] == "test_ppl"].iloc[0]
    end = table[(table["kind"] == "comparison") & (table["epoch"] == 8)].iloc[0]
    assert final["family_size"] == 2   # press_rank stays in the family at every budget: the same m
    for ours, theirs in (("verdict", "verdict"), ("estimate", "diff"), ("ci_low", "diff_ci_low"),
                         ("ci_high", "diff_ci_high"), ("p_adj", "p_adj"), ("ci_level", "ci_level")):
        assert end[ours] == (pytest.approx(final[theirs], rel=1e-12) if ours != "verdict" else final[theirs]), ours


def test_claims_on_metrics_measured_once_are_listed_as_not_traced(tmp_path):
    *_, table, marks = traced(tmp_path, {"low": parallel(0.0), "high": parallel(3.0)}, "low", "high")
    assert set(table["trace"]) == {"a-lowers-ppl", "pair: low - high"}   # no press_rank row
    for claim in ("a-raises-rank", "rank-tracks-ppl"):
        row = mark_of(marks, claim)
        assert row["mark"] == "not traced" and "press_rank is measured once, after training" in row["text"]


def test_each_look_of_a_sequential_study_is_traced_on_its_own_runs(tmp_path):
    runs, dirs = write_study(tmp_path, {"low": parallel(0.0), "high": parallel(3.0)})
    config = study_config(tmp_path, "low", "high")
    settings = Settings.from_config(config["stats"])
    table = T.trajectory_table(runs, T.read_epochs(dirs), config, settings, looks=[3, 6])
    claim = table[table["trace"] == "a-lowers-ppl"]
    assert claim.groupby("look")["n_a"].agg(set).to_dict() == {"3 seeds per arm": {3}, "6 seeds per arm": {6}}
    assert len(claim) == 16   # 2 looks x 8 epochs


@pytest.mark.parametrize("share, since, expect", [(0.5, 4, "held"), (0.5, 5, "changed"), (0.25, 6, "held"),
                                                  (0.25, 7, "changed")])
def test_held_means_the_same_verdict_over_the_last_share_of_the_budget(share, since, expect):
    tokens = [float(e) for e in range(1, 9)]
    verdicts = ["inconclusive"] * (since - 1) + ["supported"] * (9 - since)
    assert M.settle(tokens, verdicts, share) == (expect, float(since))


def test_a_log_entry_without_its_tokens_is_refused_naming_the_file(tmp_path):
    folder = tmp_path / "ptb" / "softmax" / "1"
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(
        {"corpus": "ptb", "head": "softmax", "seed": 1, "status": "ok",
         "log": [{"epoch": 1, "tokens": 10, "valid_ppl": 5.0, "train_ppl": 6.0}, {"epoch": 2, "valid_ppl": 4.0, "train_ppl": 5.0}]}))
    with pytest.raises(AuditError, match=r"metrics.json: log entry 2 has no key 'tokens'"):
        T.read_epochs([folder])
    with pytest.raises(AuditError, match=r"missing .*2/metrics.json"):
        T.read_epochs([tmp_path / "ptb" / "softmax" / "2"])


def test_best_so_far_keeps_the_first_best_epoch():
    import pandas as pd

    epochs = pd.DataFrame({"corpus": "c", "head": "h", "seed": "1", "epoch": [1, 2, 3, 4],
                           "tokens": [1.0, 2.0, 3.0, 4.0], "valid_ppl": [9.0, 7.0, 7.0, 8.0],
                           "train_ppl": [10.0, 8.0, 6.0, 5.0]})
    out = T.best_so_far(epochs)
    assert out["best_epoch"].tolist() == [1, 2, 2, 2]
    assert out["train_ppl"].tolist() == [10.0, 8.0, 8.0, 8.0]   # the best epoch's, not the epoch's own


def test_a_claim_whose_arms_were_not_run_has_no_trajectory_and_says_so(tmp_path):
    runs, dirs = write_study(tmp_path, {"low": parallel(0.0), "high": parallel(3.0)})
    config = study_config(tmp_path, "low", "absent")   # head_b has no runs in this study
    settings = Settings.from_config(config["stats"])
    epochs = T.read_epochs(dirs)
    table = T.trajectory_table(runs, epochs, config, settings)
    assert table.empty   # "not run" rows are never traced as "inconclusive at every budget"
    marks = M.marks_table(table, T.best_so_far(epochs), runs, config, settings)
    assert mark_of(marks, "a-lowers-ppl")["text"] == "not traced: no verdict at any budget (the claim was not run here)"
