"""Claims judged on the further runs tables of `evidence:`, each alone, guarded by the baselines."""

import pandas as pd
import pytest

from audit.errors import AuditError
from audit.stats import guard
from audit.stats.sources import COLUMNS, evidence_claims_table
from tests.stats.test_guard import BASE, CONFIG, FAST, runs_table


def test_each_source_judged_alone(tmp_path):
    runs_table({"softmax": 150.0, "mos": 100.0, "gss": 140.0}).to_csv(tmp_path / "a.csv", index=False)
    runs_table({"softmax": 150.0, "mos": 170.0, "gss": 250.0}).to_csv(tmp_path / "b.csv", index=False)
    config = dict(CONFIG, evidence=[{"name": "small", "runs": str(tmp_path / "a.csv")},
                                    {"name": "other", "runs": str(tmp_path / "b.csv")}])
    table = evidence_claims_table(config, FAST, BASE)
    assert list(table.columns) == COLUMNS
    got = {(r.evidence_source, r.claim_id): r.verdict for r in table.itertuples()}
    assert got[("small", "mos-lowers")] == "supported" and got[("small", "gss-lowers")] == "supported"
    assert got[("other", "mos-lowers")] == "contradicted"
    assert got[("other", "gss-lowers")] == guard.VERDICT      # gss 250 >= unigram 196.5
    assert evidence_claims_table(CONFIG, FAST, BASE).empty


def test_missing_runs_table_is_one_line(tmp_path):
    config = dict(CONFIG, evidence=[{"name": "x", "runs": str(tmp_path / "nope.csv")}])
    with pytest.raises(AuditError, match="nope.csv: runs table not found"):
        evidence_claims_table(config, FAST, BASE)


def test_the_stats_verb_writes_the_evidence_claims_table(tmp_path):
    """`--table evidence_claims` (rules/stats.smk) must judge the further runs tables, not write
    this study's claims under that name (it once did: the cross-scale columns stayed empty)."""
    import yaml

    from audit.stats.cli import main

    runs_table({"softmax": 150.0, "mos": 100.0, "gss": 140.0}).to_csv(tmp_path / "runs.csv", index=False)
    runs_table({"softmax": 150.0, "mos": 170.0, "gss": 140.0}).to_csv(tmp_path / "gpu.csv", index=False)
    BASE.to_csv(tmp_path / "baselines.csv", index=False)
    config = dict(CONFIG, stats={"bootstrap_resamples": 500, "min_seeds": 5},
                  evidence=[{"name": "gpu", "runs": str(tmp_path / "gpu.csv")}])
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["--runs", str(tmp_path / "runs.csv"), "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path),
                 "--baselines", str(tmp_path / "baselines.csv"), "--table", "evidence_claims"]) == 0
    table = pd.read_csv(tmp_path / "evidence_claims.csv")
    assert set(table["evidence_source"]) == {"gpu"}
    assert table.set_index("claim_id").loc["mos-lowers", "verdict"] == "contradicted"   # gpu.csv's, not runs.csv's
    # a study that trains nothing (configs/pythia.yaml) has no runs table to give: none is needed
    (tmp_path / "evidence_claims.csv").unlink()
    assert main(["--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path), "--table", "evidence_claims"]) == 0
    assert pd.read_csv(tmp_path / "evidence_claims.csv").equals(table)


def test_a_runs_table_of_another_vocabulary_is_guarded_by_the_baselines_beside_it(tmp_path):
    """The default study's word runs (K = 2,000) named as evidence of a study on another vocabulary
    (here K = 8,000): without the baselines beside them no unigram matches and every claim is not
    informative; with reports/<study>/tables/baselines.csv beside runs.csv they are judged."""
    from audit.stats.sources import evidence_baselines, sibling_baselines

    study = tmp_path / "reports" / "default"
    (study / "tables").mkdir(parents=True)
    runs_table({"softmax": 150.0, "mos": 100.0, "gss": 140.0}).to_csv(study / "runs.csv", index=False)
    other = pd.DataFrame([dict(corpus="ptb", vocab_size=8000, n_test=120_001, unigram_ppl=700.0)])
    config = dict(CONFIG, evidence=[{"name": "default", "runs": str(study / "runs.csv")}])
    alone = evidence_claims_table(config, FAST, other)
    assert set(alone["verdict"]) == {guard.VERDICT}
    assert "no baseline for this vocabulary" in alone.set_index("claim_id").loc["mos-lowers", "reason"]
    assert sibling_baselines(study / "runs.csv") == study / "tables" / "baselines.csv"
    BASE.to_csv(study / "tables" / "baselines.csv", index=False)
    joined = evidence_claims_table(config, FAST, other)
    got = dict(zip(joined["claim_id"], joined["verdict"]))
    assert got["mos-lowers"] == "supported" and got["gss-lowers"] == "supported"
    assert evidence_baselines(study / "runs.csv", None) is None   # no guard asked for: none added
    # a study with no corpus of its own (`python -m audit baselines` with none: the header alone)
    empty = pd.DataFrame(columns=list(other.columns))
    assert evidence_baselines(study / "runs.csv", empty).equals(BASE)
    assert set(evidence_claims_table(config, FAST, empty)["verdict"]) != {guard.VERDICT}
    assert len(evidence_baselines(study / "runs.csv", other)) == len(other) + len(BASE)


def test_the_sentences_beside_a_suites_runs_table_give_its_multibootstrap(tmp_path):
    """A pretrained suite's collect writes sentences.npz beside runs.csv: a claim with
    `test: multibootstrap` on that table is judged over seeds x test sentences (MultiBERTs), and
    without the file it says the sums are missing instead of passing as Welch's test."""
    import numpy as np

    from audit.stats import multiboot
    from audit.stats.sources import sibling_sentences

    runs = runs_table({"softmax": 150.0, "mos": 100.0})
    runs.to_csv(tmp_path / "runs.csv", index=False)
    claim = {"id": "mos-lowers-mb", "source": "s", "statement": "mos lowers", "expect": "lower", "test": "multibootstrap",
             "comparison": {"head_a": "mos", "head_b": "softmax", "metric": "test_ppl"}}
    config = dict(CONFIG, comparisons=[dict(CONFIG["comparisons"][0], against=["mos"])], correlations=[],
                  claims=[claim], evidence=[{"name": "suite", "runs": str(tmp_path / "runs.csv")}])
    without = evidence_claims_table(config, FAST, BASE).iloc[0]
    assert without["verdict"] == "inconclusive" and "no per-sentence test NLL" in without["reason"]
    rng = np.random.default_rng(0)   # 30 sentences of 20 tokens whose sums give each run's test_ppl
    keys = [(r.corpus, r.head, r.seed) for r in runs.itertuples()]
    nll = {k: 20 * np.log(p) + rng.normal(0, 2, 30) for k, p in zip(keys, runs["test_ppl"])}
    tokens = {k: np.full(30, 20, np.int64) for k in keys}
    multiboot.save(multiboot.Sentences(nll, tokens), sibling_sentences(tmp_path / "runs.csv"))
    judged = evidence_claims_table(config, FAST, BASE).iloc[0]
    assert judged["verdict"] == "supported", judged["reason"]
    assert "multibootstrap" in judged["estimate_name"] and judged["p_name"].startswith("multibootstrap p")
    assert judged["ci_high"] < 0 and judged["estimate"] == pytest.approx(-50, abs=5)
