"""A pretrained suite's claims traced over its checkpoints (audit.stats.checkpoints) on a constructed
suite (tests/support/checkpoint_suite.py): planted values, no model built or measured."""

from __future__ import annotations

import pandas as pd
import pytest

from audit.errors import AuditError
from audit.stats import checkpoints as C
from audit.stats.io import Settings
from audit.stats.sources import evidence_claims_table
from tests.support.checkpoint_suite import STEPS, suite_config, write_suite


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """The suite, its study config, and the trajectory over its checkpoints (computed once)."""
    root = tmp_path_factory.mktemp("suite")
    runs = write_suite(root)
    config = suite_config(root, runs)
    settings = Settings.from_config(config["stats"])
    return root, runs, config, settings, C.checkpoint_trajectories(config, settings, None)


def mark_of(marks, claim):
    return marks.set_index("claim_id").loc[claim]


def test_each_traced_claim_is_judged_at_every_checkpoint_labelled_by_step(suite):
    *_, table = suite
    assert set(table["claim_id"]) == {"fast-lowers-ppl", "small-share"}
    verdicts = table[table["claim_id"] == "fast-lowers-ppl"].set_index("step")["verdict"]
    # planted: fast leads up to step 2000 (90 vs 95), slow from step 3000 (80 vs 85)
    assert verdicts.to_dict() == {1000: "supported", 2000: "supported", 3000: "contradicted", 4000: "contradicted"}
    assert set(table["revision"]) == {f"step{s}" for s in STEPS} and "epoch" not in table and "tokens" not in table
    assert set(table["evidence_source"]) == {"constructed"} and set(table["traced_on"]) <= {"test_ppl", "gradient_norm_share"}
    assert set(table["data"]) == {C.DATA} and "each checkpoint" in C.DATA


def test_the_last_checkpoint_is_the_evidence_claims_tables_verdict_by_the_same_function(suite):
    _, _, config, settings, table = suite
    final = evidence_claims_table(config, settings, None).set_index("claim_id")
    last = table[table["step"] == STEPS[-1]].set_index("claim_id")
    for claim in last.index:
        assert last.loc[claim, "verdict"] == final.loc[claim, "verdict"], claim
        for column in ("estimate", "ci_low", "ci_high", "ci_level", "p_adj", "n_a"):
            assert last.loc[claim, column] == pytest.approx(final.loc[claim, column], rel=1e-12), (claim, column)


def test_the_marks_over_checkpoints_follow_the_studys_share(suite):
    root, runs, config, settings, table = suite
    marks = C.checkpoint_marks(table, config, settings)
    assert list(marks.columns) == C.MARK_COLUMNS and "since_step" in marks and "since_tokens" not in marks
    moved = mark_of(marks, "fast-lowers-ppl")
    assert moved["mark"] == "changed" and moved["since_step"] == 3000 and moved["final_step"] == 4000
    assert moved["text"].startswith("changed at step 3,000") and "supported before step 3,000" in moved["text"]
    assert "per 10,000 steps over each run's last half of checkpoints" in moved["text"]
    assert "not corrected over 4 checkpoints" in moved["text"] and "epoch" not in moved["text"]
    flat = mark_of(marks, "small-share")
    assert flat["mark"] == "held" and flat["since_step"] == 1000 and not flat["moving"]
    assert "one-sample t of per-run slopes against 0, n = 5" in flat["text"]
    # the last 25% of 4,000 steps begins at step 3,000: the change no longer falls inside it
    quarter = suite_config(root, runs, share=0.25)
    late = mark_of(C.checkpoint_marks(table, quarter, Settings.from_config(quarter["stats"])), "fast-lowers-ppl")
    assert late["since_step"] == 3000 and late["mark"] in ("held", "still moving") and late["held_share"] == 0.25
    assert "contradicted at every checkpoint from step 3,000 to step 4,000 (at least the last 25%" in late["text"]


def test_claims_the_checkpoints_cannot_trace_say_why(suite):
    *_, config, settings, table = suite
    marks = C.checkpoint_marks(table, config, settings)
    assert mark_of(marks, "late-rise")["text"].startswith("not traced: late_loss_slope is not measured per checkpoint")
    assert mark_of(marks, "rarely-unargmaxable")["text"] == "not traced: unargmaxable is measured at 1 checkpoint only"


def test_a_runs_table_without_checkpoints_beside_it_has_no_trajectory(tmp_path, suite):
    _, runs, config, settings, _ = suite
    alone = tmp_path / "runs.csv"
    alone.write_bytes(runs.read_bytes())
    entry = dict(config["evidence"][0], runs=str(alone))
    assert C.entry_trajectory(entry, config, settings, None).empty
    marks = C.checkpoint_marks(pd.DataFrame(columns=C.COLUMNS), dict(config, evidence=[entry]), settings)
    assert marks.empty and list(marks.columns) == C.MARK_COLUMNS


def test_a_checkpoints_table_with_a_run_twice_at_a_step_or_no_step_is_refused_naming_the_file(tmp_path, suite):
    _, runs, *_ = suite
    table = pd.read_csv(runs.parent / "checkpoints.csv")
    path = tmp_path / "checkpoints.csv"
    pd.concat([table, table.iloc[:1]]).to_csv(path, index=False)
    with pytest.raises(AuditError, match=r"checkpoints.csv: duplicate run corpus='ptb' head='fast' seed='0' step=1000"):
        C.read_checkpoints(path)
    table.drop(columns=["step"]).to_csv(path, index=False)
    with pytest.raises(AuditError, match=r"checkpoints.csv: missing required column 'step'$"):
        C.read_checkpoints(path)


def test_the_suites_sentences_join_the_last_checkpoint_as_they_join_the_evidence_claims(tmp_path):
    """A real collect writes sentences.npz beside runs.csv: the final test_ppl comparison then gains
    its multi-bootstrap test in the same Holm family (m doubles), at the last checkpoint exactly as in
    evidence_claims, and at no earlier checkpoint (its sums are the last checkpoint's)."""
    import numpy as np

    from audit.stats import multiboot
    from audit.stats.sources import sibling_sentences

    runs = write_suite(tmp_path)
    config = suite_config(tmp_path, runs)
    settings = Settings.from_config(config["stats"])
    before = C.checkpoint_trajectories(config, settings, None)
    table = pd.read_csv(runs)
    # 30 sentences of 20 tokens around each run's test_ppl, noisy enough that the multi-bootstrap
    # p exceeds Welch's: Welch is then Holm's first step, tested at 1 - alpha / 2 instead of 1 - alpha
    rng = np.random.default_rng(1)
    keys = [(r.corpus, r.head, str(r.seed)) for r in table.itertuples()]
    nll = {k: 20 * np.log(p) + rng.normal(0, 60, 30) for k, p in zip(keys, table["test_ppl"])}
    multiboot.save(multiboot.Sentences(nll, {k: np.full(30, 20, np.int64) for k in keys}), sibling_sentences(runs))
    final = evidence_claims_table(config, settings, None).set_index("claim_id").loc["fast-lowers-ppl"]
    after = C.checkpoint_trajectories(config, settings, None)
    at = lambda t, step: t[(t["claim_id"] == "fast-lowers-ppl") & (t["step"] == step)].iloc[0]  # noqa: E731
    assert "1 multi-bootstrap" in final["p_name"]                       # the family the file makes
    assert (at(before, STEPS[-1])["ci_level"], final["ci_level"]) == (0.95, 0.975)
    for column in ("verdict", "p_adj", "ci_low", "ci_high", "ci_level"):
        assert at(after, STEPS[-1])[column] == pytest.approx(final[column], rel=1e-12), column
    for step in STEPS[:-1]:
        assert at(after, step)["ci_level"] == at(before, step)["ci_level"] == 0.95
