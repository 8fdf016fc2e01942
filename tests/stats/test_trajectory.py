"""Verdicts traced over the training budget (audit.stats.trajectory, audit.stats.trajectory_marks)
on constructed studies: run folders whose per-epoch logs follow planted curves, no training."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from audit.errors import AuditError
from audit.stats import trajectory as T
from audit.stats import trajectory_marks as M
from audit.stats.comparisons import comparisons_table
from audit.stats.io import Settings
from tests.support.trajectory_study import (EPOCH_TOKENS, fast_and_worse, late_gain, parallel, slow_and_better,
                                            still_gaining, study_config, write_study)


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
                                                  (0.25, 7, "changed"), (1.0, 2, "changed"),
                                                  # never changed: held since the first budget, at any share
                                                  (1.0, 1, "held"), (0.95, 1, "held")])
def test_held_means_the_same_verdict_over_the_last_share_of_the_budget(share, since, expect):
    tokens = [float(e) for e in range(1, 9)]
    verdicts = ["inconclusive"] * (since - 1) + ["supported"] * (9 - since)
    assert M.settle(tokens, verdicts, share) == (expect, float(since))


def test_the_studys_share_decides_held_or_changed_and_the_trend_window_on_one_trajectory(tmp_path):
    """One trajectory (the verdict changes once, at epoch 3 of 8: 450,000 of 1,200,000 tokens),
    marked at two shares of stats.trajectory.held_share: the last half starts at 600,000 tokens,
    after the change (held); the last 75% at 300,000, before it (changed)."""
    runs, dirs = write_study(tmp_path, {"late": late_gain, "base": parallel(0.0)})
    config = study_config(tmp_path, "late", "base")
    epochs = T.read_epochs(dirs)
    table = T.trajectory_table(runs, epochs, config, Settings.from_config(config["stats"]))
    claim = table[table["trace"] == "a-lowers-ppl"].set_index("epoch")["verdict"]
    assert set(claim.loc[:2]) == {"inconclusive"} and set(claim.loc[3:]) == {"supported"}
    marks = {}
    for share in (0.5, 0.75):
        settings = Settings.from_config({**config["stats"], "trajectory": {"held_share": share}})
        assert settings.held_share == share
        marks[share] = mark_of(M.marks_table(table, T.best_so_far(epochs), runs, config, settings), "a-lowers-ppl")
    assert marks[0.5]["mark"] == "held" and marks[0.5]["since_tokens"] == 3 * EPOCH_TOKENS
    assert marks[0.5]["text"].startswith("held since 450,000 tokens: supported at every budget from 450,000 tokens")
    assert "(at least the last half of the budget)" in marks[0.5]["text"] and marks[0.5]["held_share"] == 0.5
    assert marks[0.75]["mark"] == "changed" and marks[0.75]["since_tokens"] == 3 * EPOCH_TOKENS
    assert marks[0.75]["text"].startswith("changed at 450,000 tokens: inconclusive before 450,000 tokens")
    assert "(inside the last 75%)" in marks[0.75]["text"] and "over each run's last 75% of epochs" in marks[0.75]["text"]
    # the trend window follows the share: per run the slope over its last ceil(0.75 x 8) = 6 epochs
    slopes = {}
    for (head, _), run in epochs.sort_values("epoch").groupby(["head", "seed"]):
        best = np.minimum.accumulate(run["valid_ppl"].to_numpy())[-6:]
        slopes.setdefault(head, []).append(np.polyfit(run["tokens"].to_numpy()[-6:] / 1e6, best, 1)[0])
    assert marks[0.75]["trend_slope"] == pytest.approx(np.mean(slopes["late"]) - np.mean(slopes["base"]), rel=1e-9)
    assert marks[0.5]["trend_slope"] != pytest.approx(marks[0.75]["trend_slope"], rel=1e-3)


@pytest.mark.parametrize("value, message", [
    (0, r"config key stats.trajectory.held_share: 0 is less than or equal to the minimum of 0"),
    (1.5, r"config key stats.trajectory.held_share: 1.5 is greater than the maximum of 1"),
    ("half", r"config key stats.trajectory.held_share: 'half' is not of type 'number'")])
def test_a_held_share_outside_0_to_1_is_refused_naming_the_key(value, message):
    with pytest.raises(AuditError, match=r"^s.yaml: " + message + "$"):
        Settings.from_config({"trajectory": {"held_share": value}}, "s.yaml")
    with pytest.raises(AuditError, match=r"config key stats.trajectory: Additional properties .*'share'"):
        Settings.from_config({"trajectory": {"share": 0.5}}, "s.yaml")
    # a Settings made in code never reaches the schema: the marks refuse it on their own, naming the key
    with pytest.raises(AuditError, match=r"^config key stats.trajectory.held_share: must lie in \(0, 1\]; got 0$"):
        M.marks_table(pd.DataFrame(columns=T.COLUMNS), pd.DataFrame(), pd.DataFrame({"corpus": []}), {}, Settings(held_share=0))


def test_the_default_share_is_the_schemas_and_stays_out_of_the_stats_config():
    from audit.config import check_stats_config
    from audit.schema import schema_defaults

    assert Settings().held_share == 0.5 == schema_defaults("stats_trajectory", unfilled=True)["held_share"]
    # x-default: a study that sets nothing keeps its stats_config.yaml, so Snakemake reruns no table
    assert "trajectory" not in check_stats_config({"stats": {"alpha": 0.05}}, "s.yaml")["stats"]


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
