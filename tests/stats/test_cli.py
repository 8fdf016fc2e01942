"""``python -m audit stats``: one CSV per table, --table selection, empty tables, errors."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit.__main__ import main as audit_main
from audit.stats import claims, comparisons, correlations, wordsim
from audit.stats.cli import TABLES, main

FIX = Path(__file__).resolve().parents[1] / "fixtures"
HEADERS = {"comparisons": comparisons.TABLE_COLUMNS, "correlations": correlations.COLUMNS,
           "wordsim_wins": wordsim.WINS_COLUMNS, "wordsim_diffs": wordsim.DIFF_COLUMNS,
           "claims": claims.COLUMNS}


@pytest.fixture
def inputs(tmp_path):
    rng = np.random.default_rng(0)
    rows, pairs = [], []
    gold = rng.uniform(0, 10, 25)
    for head, ppl, rank in (("softmax", 57.1, 402), ("sigsoftmax", 57.0, 5000), ("plif", 56.8, 500)):
        for s in range(6):
            cos = gold / 10 + rng.normal(0, 0.3, 25)
            rows.append(dict(study="t", corpus="ptb", head=head, seed=s, status="ok", error="",
                             test_ppl=ppl + rng.normal(0, 0.1), press_rank=rank + rng.normal(0, 20),
                             **{"wordsim_EN-MC-30": rng.uniform()}))
            pairs += [dict(corpus="ptb", head=head, seed=s, benchmark="EN-MC-30", word1=f"a{i}",
                           word2=f"b{i}", gold=g, cosine=c) for i, (g, c) in enumerate(zip(gold, cos))]
    rows.append(dict(study="t", corpus="ptb", head="plif", seed=99, status="failed", error="nan loss"))
    pd.DataFrame(rows).to_csv(tmp_path / "runs.csv", index=False)
    pd.DataFrame(pairs).to_csv(tmp_path / "pairs.csv", index=False)
    return tmp_path


def test_all_tables(inputs):
    out = inputs / "tables"
    rc = main(["--runs", str(inputs / "runs.csv"), "--config", str(FIX / "stats_study.yaml"),
               "--out", str(out), "--wordsim-pairs", str(inputs / "pairs.csv")])
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{t}.csv" for t in TABLES)
    for name in TABLES:
        df = pd.read_csv(out / f"{name}.csv")
        assert list(df.columns) == HEADERS[name] and len(df) > 0, name
    comp = pd.read_csv(out / "comparisons.csv")
    assert (comp["n_failed_a"][comp.head_a == "plif"] == 1).all()
    assert set(comp["bootstrap_resamples"]) == {2000}
    cl = pd.read_csv(out / "claims.csv").set_index("claim_id")
    assert cl.loc["mos-lowers-ppl", "reason"].startswith("not run")


def test_one_table_and_empty_inputs(inputs, capsys):
    out = inputs / "one"
    rc = main(["--runs", str(inputs / "runs.csv"), "--config", str(FIX / "stats_study.yaml"),
               "--out", str(out), "--table", "wordsim_diffs", "--table", "comparisons"])
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == ["comparisons.csv", "wordsim_diffs.csv"]
    empty = pd.read_csv(out / "wordsim_diffs.csv")
    assert empty.empty and list(empty.columns) == wordsim.DIFF_COLUMNS
    assert "note: wordsim_diffs.csv has no rows: no --wordsim-pairs" in capsys.readouterr().err


def test_bad_input_is_one_line_error_and_writes_nothing(inputs, capsys):
    bad = inputs / "bad.yaml"
    bad.write_text("comparisons:\n  - {family: f, baseline: softmax, against: [plif], metrics: [nope]}\n")
    out = inputs / "none"
    rc = audit_main(["stats", "--runs", str(inputs / "runs.csv"), "--config", str(bad), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and err.startswith("error: ") and "'nope'" in err and "\n" not in err
    assert not out.exists()
