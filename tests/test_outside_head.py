"""A head from outside the repository (docs/heads.md's example in a temporary package on
PYTHONPATH) audited through the whole Snakemake DAG: trained, evaluated, counted, matched by
softmax_matched, compared with softmax and reported, like a built-in head.

The study is the session's ``outside_study`` (tests/conftest.py, support/outside.py; issue 48),
shared with tests/test_outside_measurements.py: the arms softmax, tempered and softmax_matched of
this test at the size this test ran alone (two seeds, one epoch, 20,000 training tokens, 200
contexts), beside that test's forward-only head and GRU body; this test asserts on its own three
arms and on its comparison row (tempered against softmax in the one family, now with those arms'
rows beside it). It still proves what it did: the whole study's Snakemake run exits 0, and each
of these arms is trained, evaluated, counted, matched and reported as before.
"""

import json
import math

import pandas as pd
import pytest
import torch

from support.outside import STUDY, TEMPERATURE as IMPORT

ARMS = ("softmax", "softmax_matched", "tempered")


@pytest.mark.slow
def test_outside_head_is_audited_through_the_dag(outside_study):
    workdir, proc = outside_study
    assert proc.returncode == 0, proc.stderr[-3000:]

    runs = pd.read_csv(workdir / "reports" / STUDY / "runs.csv")
    runs = runs[runs["head"].isin(ARMS)]
    assert sorted(zip(runs["head"], runs["seed"])) == [(h, s) for h in ARMS for s in (1, 2)]
    assert (runs["status"] == "ok").all() and runs["test_ppl"].between(1, 10_000).all()
    d = 16  # smoke.yaml's emb_size
    # a temperature rescales every context alike: its transformed_logits (l / tau) have the rank
    # of the logits, d + 1, and log-P stays within the softmax's bound d + 2 (a model this barely
    # trained has a lower numerical rank than the bound: 5-6 here)
    assert (runs["f_logits_press_rank"] == d + 1).all() and (runs["press_rank"] <= d + 2).all()
    params = runs.groupby("head")["n_params"].first()
    assert params["tempered"] == params["softmax"] + 1 == params["softmax_matched"] + 1
    metrics = json.loads((workdir / "results" / STUDY / "runs" / "ptb" / "tempered" / "1" / "metrics.json")
                         .read_text())
    assert metrics["settings"]["head"] == IMPORT
    state = torch.load(workdir / "results" / STUDY / "runs" / "ptb" / "tempered" / "1" / "model.pt",
                       weights_only=False)["state"]
    assert state["head.log_temperature"].item() != pytest.approx(math.log(2.0))   # trained, in its own group
    comparisons = pd.read_csv(workdir / "reports" / STUDY / "tables" / "comparisons.csv")
    # the one family of the study (against: this test's tempered, the other test's gated and gru)
    assert set(comparisons["head_a"]) == {"tempered", "gated", "gru"}
    row = comparisons[(comparisons["head_a"] == "tempered") & (comparisons["metric"] == "test_ppl")].iloc[0]
    assert row["head_b"] == "softmax" and row["n_a"] == row["n_b"] == 2 and 0 <= row["welch_p"] <= 1
    assert "tempered" in (workdir / "reports" / STUDY / "audit.html").read_text()
