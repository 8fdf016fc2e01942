"""One guard for every table of the stats verb (issue 46, findings 1 and 6): word-similarity
differences and wins, comparisons, correlations, claims and evidence, enumerated from the verb's
own table lists, so a table added later that skips the guard fails here; and a run that ended ok
without a finite test perplexity counts as a failed run."""

import numpy as np
import pandas as pd
import pytest
import yaml

from audit.errors import AuditError
from audit.stats import guard, tables
from audit.stats.cli import EVIDENCE_TABLES, PUBLISHED_TABLES, TABLES, main
from audit.stats.comparisons import comparisons_table
from tests.stats.test_guard import BASE, CONFIG, FAST, runs_table

BENCH = "simlex"


def pairs_table(runs: pd.DataFrame) -> pd.DataFrame:
    """40 word pairs per run: softmax's cosines track the gold ratings, mos's are noise, so the
    paired bootstrap finds a large difference (p_adj far below alpha) before the guard."""
    gold = np.random.default_rng(0).uniform(0, 10, 40)
    rows = []
    for r in runs.itertuples():
        rng = np.random.default_rng(int(r.seed) + 100 * (r.head == "mos"))
        cosine = gold / 10 + rng.normal(0, 0.05, 40) if r.head == "softmax" else rng.uniform(-1, 1, 40)
        rows += [dict(corpus=r.corpus, head=r.head, seed=r.seed, benchmark=BENCH, word1=f"a{i}", word2=f"b{i}",
                      gold=gold[i], cosine=cosine[i]) for i in range(40)]
    return pd.DataFrame(rows)


def involves(table: pd.DataFrame, head: str) -> pd.Series:
    cols = [c for c in ("head_a", "head_b", "head_i", "head_j") if c in table]
    if cols:
        return table[cols].astype(str).eq(head).any(axis=1)
    return pd.Series(True, index=table.index)   # claims and correlations: checked by claim below


def test_every_table_the_stats_verb_writes_is_guarded(tmp_path):
    # softmax's median test ppl 899.5 sits above the K = 2,000 unigram's 196.5: not informative
    runs = runs_table({"softmax": 899.5, "mos": 100.0})
    runs[f"wordsim_{BENCH}"] = np.where(runs["head"] == "softmax", 0.9, 0.1)
    runs.to_csv(tmp_path / "runs.csv", index=False)
    pairs_table(runs).to_csv(tmp_path / "pairs.csv", index=False)
    BASE.to_csv(tmp_path / "baselines.csv", index=False)
    config = dict(CONFIG, stats={"bootstrap_resamples": 400, "min_seeds": 5},
                  correlations=[{"name": "r", "x": "press_rank", "y": "test_ppl", "heads": ["softmax", "mos"]}],
                  evidence=[{"name": "again", "runs": str(tmp_path / "runs.csv")}])
    config["claims"] = [c for c in config["claims"] if c["id"] != "gss-lowers"]
    config["comparisons"] = [dict(config["comparisons"][0], against=["mos"])]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    args = ["--runs", str(tmp_path / "runs.csv"), "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path),
            "--wordsim-pairs", str(tmp_path / "pairs.csv"), "--baselines", str(tmp_path / "baselines.csv")]
    names = TABLES + EVIDENCE_TABLES
    assert main(args + [a for n in names for a in ("--table", n)]) == 0
    # every table of the verb is either written on runs (and checked here) or exempt with a reason
    assert all(tables.table(n).exempt for n in PUBLISHED_TABLES)
    for name in names:
        table = pd.read_csv(tmp_path / f"{name}.csv")
        rows = table[involves(table, "softmax")]
        assert len(rows), f"{name}: no row drawn from the flagged arm, so this test would see nothing"
        if "verdict" in table:
            assert (rows["verdict"] == guard.VERDICT).all(), (name, rows["verdict"].tolist())
            assert rows["reason"].str.startswith("not informative: softmax: below the unigram baseline").all()
        else:
            assert rows["note"].str.startswith("not informative: softmax: below the unigram baseline").all(), name
    # the wins heatmap names the flagged head on its axes, and only that one
    from audit.report.figures import wins_heatmap
    svg = wins_heatmap(pd.read_csv(tmp_path / "wordsim_wins.csv"))
    assert "softmax (not informative)" in svg and "mos (not informative)" not in svg
    # finding 1: the word-similarity difference was decisive before the guard, and the page's
    # "the test alone" keeps it
    diffs = pd.read_csv(tmp_path / "wordsim_diffs.csv").iloc[0]
    assert diffs["p_adj"] < 1e-6
    assert "; the test alone: b_better" in diffs["reason"] or "; the test alone: a_better" in diffs["reason"]


def test_a_table_the_registry_does_not_hold_is_refused():
    # issue 53: a table's guard is named by its registry entry, never guessed from its columns
    runs = runs_table({"softmax": 899.5, "mos": 100.0})
    table = pd.DataFrame([dict(corpus="ptb", arm="softmax", p_adj=0.01)])
    with pytest.raises(AuditError, match="unknown table 'new_table'"):
        tables.guard_table("new_table", table, runs, BASE, CONFIG)


def test_runs_ok_without_a_test_perplexity_count_as_failed():
    # 10 ok runs of mos, 6 of them without a test perplexity; the same arm's rank comparison used
    # all 10 and its perplexity comparison 4, unlabelled, before
    runs = runs_table({"softmax": 150.0, "mos": 100.0}, n=10)
    lost = runs.index[runs["head"] == "mos"][:6]
    runs.loc[lost, "test_ppl"] = np.nan
    config = dict(CONFIG, comparisons=[dict(CONFIG["comparisons"][0], against=["mos"],
                                            metrics=["test_ppl", "press_rank"])])
    table = guard.guard_comparisons(comparisons_table(runs, config, FAST), runs, BASE)
    assert set(table["metric"]) == {"test_ppl", "press_rank"}
    assert (table["verdict"] == guard.VERDICT).all()
    assert table["reason"].str.startswith(
        "not informative: mos: 0 of 10 planned runs failed and 6 ended ok without a finite test perplexity "
        "(counted as failed)").all()
    status = guard.arm_status(runs, BASE).set_index("head")
    assert (status.loc["mos", "n_no_ppl"], status.loc["mos", "n"]) == (6, 4)
    # the same six runs marked failed: labelled too, as before
    failed = runs.copy()
    failed.loc[lost, "status"] = "failed"
    assert guard.flagged(failed, BASE)[("ptb", "mos")].startswith("mos: 6 of 10 planned runs failed (more than")
    # one such run of ten is within stats.max_failed_share = 0.2: counted, not flagged
    one = runs_table({"softmax": 150.0, "mos": 100.0}, n=10)
    one.loc[lost[:1], "test_ppl"] = np.nan
    assert ("ptb", "mos") not in guard.flagged(one, BASE)
    assert guard.arm_status(one, BASE).set_index("head").loc["mos", "n_no_ppl"] == 1


def test_the_warnings_and_the_headline_show_them_as_failed():
    from audit.report.checks import find_warnings
    from audit.report.render import _n_failed

    runs = runs_table({"softmax": 150.0, "mos": 100.0}, n=5)
    runs.loc[runs.index[:2], "test_ppl"] = np.nan
    runs.loc[runs.index[2], "status"] = "failed"
    warned = find_warnings(runs, {})
    failed = warned[warned["kind"] == "failed"]
    assert len(failed) == 3
    assert failed["detail"].str.startswith("status ok but no finite test perplexity").sum() == 2
    assert _n_failed(runs) == 3
