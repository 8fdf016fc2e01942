"""Loading and validating the runs table, the study config and word pairs; atomic writes."""

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit.errors import AuditError
from audit.stats.io import Settings, arm, load_config, load_pairs, load_runs, write_table

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_runs_table_with_failed_rows_and_nans():
    runs = load_runs(FIX / "stats_runs_small.csv")
    assert len(runs) == 5 and runs["seed"].tolist()[0] == "1"
    soft = arm(runs, "ptb", "softmax", "test_ppl")
    assert soft.values.tolist() == [57.1, 57.0] and (soft.n_failed, soft.n_missing) == (1, 0)
    sig = arm(runs, "ptb", "sigsoftmax", "test_ppl")
    assert sig.values.tolist() == [56.9] and (sig.n_failed, sig.n_missing) == (0, 1)
    assert not arm(runs, "ptb", "mos", "test_ppl").present


def test_optional_corpus_and_status(tmp_path):
    p = tmp_path / "r.csv"
    pd.DataFrame({"head": ["softmax", "mos"], "seed": [1, 1], "test_ppl": [57.0, 55.0]}).to_csv(p, index=False)
    runs = load_runs(p)
    assert set(runs["corpus"]) == {"all"} and set(runs["status"]) == {"ok"}



def test_a_boolean_column_reads_as_one_and_zero(tmp_path):
    # issue 24: hidden_gap_ok is a bool in the runs table; pandas writes it as True/False
    p = tmp_path / "r.csv"
    pd.DataFrame({"head": ["softmax"] * 3, "seed": [1, 2, 3], "hidden_gap_ok": [True, False, None],
                  "unargmaxable": [0, 2, None]}).to_csv(p, index=False)
    runs = load_runs(p)
    assert runs["hidden_gap_ok"].tolist()[:2] == [1.0, 0.0] and np.isnan(runs["hidden_gap_ok"].iloc[2])
    assert runs["unargmaxable"].tolist()[:2] == [0.0, 2.0]


@pytest.mark.parametrize("frame, message", [
    ({"seed": [1], "test_ppl": [1.0]}, "missing required column 'head'"),
    ({"head": ["a"], "seed": [1], "status": ["done"]}, "column 'status' has value 'done'"),
    # issue 20: a blank status is no success
    ({"head": ["a", "b"], "seed": [1, 1], "status": ["ok", None]}, "column 'status' has an empty cell \\(row 3\\)"),
    ({"head": ["a"], "seed": [1], "test_ppl": ["57,1"]}, "column 'test_ppl' has non-numeric value '57,1' \\(row 2\\)"),
    ({"head": ["a", "a"], "seed": [1, 1]}, "duplicate run"),
])
def test_runs_errors_name_file_and_column(tmp_path, frame, message):
    p = tmp_path / "runs.csv"
    pd.DataFrame(frame).to_csv(p, index=False)
    with pytest.raises(AuditError, match=message) as err:
        load_runs(p)
    assert str(err.value).startswith(str(p)) and "\n" not in str(err.value)


def test_missing_runs_file():
    with pytest.raises(AuditError, match="runs table not found"):
        load_runs("/nonexistent/runs.csv")


def test_config_merges_claims_file_and_rejects_duplicates(tmp_path):
    cfg = load_config(FIX / "stats_study.yaml")
    ids = [c["id"] for c in cfg["claims"]]
    assert "plif-lowers-ppl" in ids and len(ids) == len(set(ids))
    claim = "{id: x, source: %s, expect: lower, comparison: {head_a: mos, head_b: softmax, metric: test_ppl}}"
    (tmp_path / "claims.yaml").write_text(f"claims:\n  - {claim % 's'}\n")
    (tmp_path / "study.yaml").write_text(f"claims_file: claims.yaml\nclaims:\n  - {claim % 't'}\n")
    with pytest.raises(AuditError, match=r"claims\.yaml: config key claims\[0\]\.id: duplicate claim id 'x'$"):
        load_config(tmp_path / "study.yaml")
    (tmp_path / "study.yaml").write_text("claims_file: nope.yaml\n")
    with pytest.raises(AuditError, match="claims_file 'nope.yaml' not found"):
        load_config(tmp_path / "study.yaml")
    (tmp_path / "study.yaml").write_text("comparisons: [\n")
    with pytest.raises(AuditError, match="malformed YAML"):
        load_config(tmp_path / "study.yaml")


def test_stats_config_is_checked_against_the_study_schema(tmp_path):
    path = tmp_path / "stats.yaml"
    path.write_text("comparisons:\n  - {family: f, pairs: [[mos, softmax]]}\n")
    with pytest.raises(AuditError, match=rf"^{path}: config key comparisons\[0\]: 'metrics' is a required property$"):
        load_config(path)
    path.write_text("correlation:\n  - {name: c, x: press_rank, y: test_ppl}\n")
    with pytest.raises(AuditError, match=r"config key <top level>: Additional properties are not allowed "
                                         r"\('correlation' was unexpected\)$"):
        load_config(path)
    (tmp_path / "claims.yaml").write_text("claims:\n  - {id: x, source: s, expect: up, correlation: {name: c}}\n")
    path.write_text("claims_file: claims.yaml\n")
    with pytest.raises(AuditError, match=rf"^{tmp_path / 'claims.yaml'}: config key claims\[0\]\.expect: 'up' is not one of"):
        load_config(path)
    path.write_text("stats:\n")               # an empty section: every default
    cfg = load_config(path)
    assert cfg["stats"]["min_seeds"] == 5 and cfg["comparisons"] == [] and cfg["claims"] == []


def test_settings_defaults_and_validation():
    s = Settings.from_config(None)
    assert (s.min_seeds, s.alpha, s.bootstrap_resamples, s.bootstrap_seed, s.power_target) == (5, 0.05, 10000, 12345, 0.8)
    assert Settings() == s and isinstance(s.min_seeds, int) and isinstance(s.alpha, float)
    assert Settings.from_config({"bootstrap_resamples": 2000}).bootstrap_resamples == 2000
    with pytest.raises(AuditError, match=r"^study\.yaml: config key stats: Additional properties are not allowed "
                                         r"\('seeds' was unexpected\)$"):
        Settings.from_config({"seeds": 3}, "study.yaml")
    with pytest.raises(AuditError, match=r"^config: config key stats\.alpha: 1\.5 is greater than or equal to the "
                                         r"maximum of 0\.5$"):
        Settings.from_config({"alpha": 1.5})


def test_load_pairs(tmp_path):
    p = tmp_path / "pairs.csv"
    pd.DataFrame({"corpus": ["ptb"] * 2, "head": ["softmax"] * 2, "seed": ["1"] * 2, "benchmark": ["B"] * 2,
                  "word1": ["null", "a"], "word2": ["nan", "b"], "gold": [1.0, 2.0],
                  "cosine": [0.5, np.nan]}).to_csv(p, index=False)
    pairs = load_pairs(p)
    assert len(pairs) == 1 and pairs["word1"].iloc[0] == "null"   # words are never parsed as NaN
    p.write_text("")
    assert load_pairs(p).empty                                   # 0 bytes: no pairs, no error
    pd.DataFrame({"head": ["a"]}).to_csv(p, index=False)
    with pytest.raises(AuditError, match="missing required column 'seed'"):
        load_pairs(p)


def test_write_table_is_atomic(tmp_path):
    target = tmp_path / "out" / "t.csv"
    write_table(pd.DataFrame({"a": [1.0]}), target)
    assert target.read_text() == "a\n1\n"

    class Boom(pd.DataFrame):
        def to_csv(self, *args, **kw):
            raise RuntimeError("disk full")     # the table cannot be produced

    with pytest.raises(RuntimeError):
        write_table(Boom({"a": [2.0]}), target)
    assert target.read_text() == "a\n1\n"        # old table intact
    assert os.listdir(target.parent) == ["t.csv"]  # no temporary file left behind
