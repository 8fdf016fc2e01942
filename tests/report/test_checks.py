"""Warnings: each kind is raised exactly when its condition holds."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from audit.report.checks import find_warnings

CONFIG = {"comparisons": [{"family": "f", "baseline": "softmax", "against": ["mos"], "metrics": ["test_ppl"]}],
          "stats": {"min_seeds": 5, "alpha": 0.05}}


def _runs(skewed: np.ndarray) -> pd.DataFrame:
    normalish = np.array([100.2, 99.6, 100.1, 99.9, 100.4, 99.8])
    rows = [{"corpus": "ptb", "head": "softmax", "seed": str(i + 1), "status": "ok", "error": "",
             "test_ppl": v, "epochs_run": 10, "best_epoch": 10 if i == 0 else 7} for i, v in enumerate(normalish)]
    rows += [{"corpus": "ptb", "head": "mos", "seed": str(i + 1), "status": "ok", "error": "",
              "test_ppl": v, "epochs_run": 10, "best_epoch": 6} for i, v in enumerate(skewed)]
    rows.append({"corpus": "ptb", "head": "mos", "seed": "99", "status": "failed",
                 "error": "FloatingPointError: nan loss", "test_ppl": np.nan, "epochs_run": 2, "best_epoch": 1})
    return pd.DataFrame(rows)


def test_each_kind_of_warning():
    skewed = np.array([95.0, 95.1, 95.05, 95.02, 99.0])  # one far outlier: Shapiro-Wilk rejects
    assert stats.shapiro(skewed).pvalue < 0.05 and stats.shapiro(_runs(skewed)["test_ppl"][:6]).pvalue >= 0.05
    table = find_warnings(_runs(skewed), CONFIG)
    kinds = table.groupby("kind")["head"].apply(list).to_dict()
    assert kinds["failed"] == ["mos"] and "diverged" in table[table["kind"] == "failed"]["detail"].iloc[0]
    assert "too_few_seeds" not in kinds  # 5 ok seeds of mos = min_seeds
    assert kinds["non_normal"] == ["mos"]
    unconverged = table[table["kind"] == "unconverged"]
    assert list(zip(unconverged["head"], unconverged["seed"])) == [("softmax", "1")]


def test_best_epoch_last_warns_only_while_the_last_epoch_still_gains():
    """Best = last is expected under a cosine schedule or NT-ASGD; it warns only above
    stats.converged_gain (default 0.01) or when the gain was not recorded."""
    runs = _runs(np.array([95.0, 95.5, 95.2, 95.1, 95.3]))
    runs["best_epoch"] = runs["epochs_run"]                      # every run: best = last
    runs["valid_gain_last"] = 0.004                               # below 1%: no warning
    runs.loc[runs["seed"] == "2", "valid_gain_last"] = 0.03       # above: warned, with the gain
    runs.loc[runs["seed"] == "3", "valid_gain_last"] = np.nan     # unknown: warned
    unconverged = find_warnings(runs, CONFIG).query("kind == 'unconverged'")
    assert sorted(zip(unconverged["head"], unconverged["seed"])) == [("mos", "2"), ("mos", "3"),
                                                                     ("softmax", "2"), ("softmax", "3")]
    details = dict(zip(unconverged["head"] + unconverged["seed"], unconverged["detail"]))
    assert "gain 3.0% > stats.converged_gain 1.0%" in details["softmax2"]
    assert "gain not recorded" in details["mos3"]


def test_too_few_seeds_and_no_shapiro_below_three():
    skewed = np.array([95.0, 99.0])
    table = find_warnings(_runs(skewed), CONFIG)
    assert list(table[table["kind"] == "too_few_seeds"]["head"]) == ["mos"]
    assert "non_normal" not in set(table["kind"])


def test_exclusions_from_the_statistics_tables():
    comparisons = pd.DataFrame([{"family": "f", "corpus": "ptb", "metric": "test_ppl", "head_a": "mos",
                                 "head_b": "softmax", "n_missing_a": 2, "n_missing_b": 0,
                                 "family_dropped": 1, "adj_method": "holm", "p_adj": float("nan"),
                                 "reason": "undefined: both arms constant"}])
    correlations = pd.DataFrame([{"name": "c", "corpus": "ptb", "x": "press_rank", "y": "test_ppl",
                                  "level": "runs", "restriction": "test_ppl in [50, 60]",
                                  "n_outside_window": 3, "n_excluded": 1}])
    table = find_warnings(_runs(np.array([95.0, 95.5, 95.2, 95.1, 95.3])), CONFIG, comparisons, correlations)
    details = " | ".join(table[table["kind"] == "excluded"]["detail"])
    assert "2 ok run(s) without a value of test_ppl" in details
    assert "1 comparison(s) dropped from family f before the holm correction: 1 with an undefined p-value" in details
    assert "3 run(s) outside the declared window" in details
    assert "excluded from correlation" not in details  # n_excluded counts only on the unrestricted row


def test_dropped_comparisons_are_counted_by_reason():
    # issue 20: a too-few-seeds or not-run row is not "an undefined p-value"
    reasons = ["not run: no runs of gss_c1 in corpus 'ptb'", "too few seeds: n_a=2, n_b=6 < min_seeds=5",
               "too few seeds: n_a=3, n_b=6 < min_seeds=5", "undefined: both arms constant", "welch p_adj=0.01 < 0.05"]
    comparisons = pd.DataFrame([{"family": "f", "corpus": "ptb", "metric": "test_ppl", "head_a": f"h{i}",
                                 "head_b": "softmax", "n_missing_a": 0, "n_missing_b": 0, "family_dropped": 4,
                                 "adj_method": "holm", "p_adj": 0.01 if i == 4 else float("nan"), "reason": r}
                                for i, r in enumerate(reasons)])
    table = find_warnings(_runs(np.array([95.0, 95.5, 95.2, 95.1, 95.3])), CONFIG, comparisons)
    details = list(table[table["kind"] == "excluded"]["detail"])
    assert details == ["4 comparison(s) dropped from family f before the holm correction: 1 not run "
                       "(an arm has no runs), 2 with too few seeds, 1 with an undefined p-value"]
    # the same rows after the baseline guard (audit.stats.guard) keep their kinds
    from audit.stats.guard import LABEL
    guarded = comparisons.assign(reason=[f"{LABEL} (h{i}: median 700 >= unigram 685); the test alone: {r}"
                                         for i, r in enumerate(reasons)])
    table = find_warnings(_runs(np.array([95.0, 95.5, 95.2, 95.1, 95.3])), CONFIG, guarded)
    assert list(table[table["kind"] == "excluded"]["detail"]) == details


def test_far_from_converged_per_arm_with_median_gain_and_asgd_epochs():
    runs = _runs(np.array([95.0, 95.1, 95.05, 95.02, 99.0]))
    runs["valid_gain_last"] = np.where(runs["head"] == "mos", 0.2, 0.004)
    runs.loc[(runs["head"] == "mos") & (runs["seed"] == "1"), "valid_gain_last"] = 0.001   # median stays 0.2
    runs["asgd_epoch"] = np.where(runs["seed"].isin(["1", "2"]), 3.0, np.nan)
    table = find_warnings(runs, CONFIG)
    far = table[table["kind"] == "far_from_converged"]
    assert list(far["head"]) == ["mos"]           # softmax's 0.4% is below the default 1%
    detail = far.iloc[0]["detail"]
    assert "median relative valid-ppl gain of the last epoch 20.0% (n = 5)" in detail   # the failed run left out
    assert "NT-ASGD switched: epoch 3 (2 runs), never (3 runs)" in detail
    strict = find_warnings(runs, {**CONFIG, "stats": {**CONFIG["stats"], "converged_gain": 0.001}})
    assert sorted(strict[strict["kind"] == "far_from_converged"]["head"]) == ["mos", "softmax"]


def test_a_softmax_run_failing_the_hidden_size_control_is_flagged():
    runs = pd.DataFrame({"corpus": "ptb", "head": ["softmax", "softmax", "mos"], "seed": ["1", "2", "1"],
                         "status": "ok", "error": "", "test_ppl": [100.0, 101.0, 90.0], "emb_size": 64,
                         # as read back from runs.csv: a bool column with a blank for the mixture
                         "hidden_gap_ok": ["True", "False", np.nan], "hidden_gap_dim": [64, 63, 300]})
    warnings = find_warnings(runs, {"stats": {"min_seeds": 2}})
    flagged = warnings[warnings["kind"] == "hidden_gap"]
    assert list(zip(flagged["head"], flagged["seed"])) == [("softmax", "2")]
    assert "= 63, the body's rank r = 64" in flagged["detail"].iloc[0]
    # issue 33: a run whose estimate is r but whose spectrum goes on past it is flagged with both
    runs["hidden_gap_expected"], runs["hidden_gap_residual"] = [64, 64, np.nan], [2e-7, 3e-4, np.nan]
    runs.loc[1, "hidden_gap_dim"] = 64
    detail = find_warnings(runs, {"stats": {"min_seeds": 2}}).query("kind == 'hidden_gap'")["detail"].iloc[0]
    assert "= 64, the body's rank r = 64, spectrum past it s_(r+1)/s_1 = 0.0003" in detail
