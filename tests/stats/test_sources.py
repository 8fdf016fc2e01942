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
    got = {(r.source, r.claim_id): r.verdict for r in table.itertuples()}
    assert got[("small", "mos-lowers")] == "supported" and got[("small", "gss-lowers")] == "supported"
    assert got[("other", "mos-lowers")] == "contradicted"
    assert got[("other", "gss-lowers")] == guard.VERDICT      # gss 250 >= unigram 196.5
    assert evidence_claims_table(CONFIG, FAST, BASE).empty


def test_missing_runs_table_is_one_line(tmp_path):
    config = dict(CONFIG, evidence=[{"name": "x", "runs": str(tmp_path / "nope.csv")}])
    with pytest.raises(AuditError, match="nope.csv: runs table not found"):
        evidence_claims_table(config, FAST, BASE)
