"""Verdicts over training through the Snakemake DAG (issue 56): the session's finished smoke study
(tests/conftest.py's ``smoke_study``) renders its trajectories from the runs' logs, and refreshing
the trajectory table is one rule that retrains and re-evaluates nothing."""

import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from support.smoke import copy as copy_study
from test_pipeline import job_counts


@pytest.mark.slow
def test_the_smoke_page_marks_every_traced_verdict(smoke_study):
    reports = smoke_study / "reports" / "smoke"
    table = pd.read_csv(reports / "tables" / "trajectories.csv")
    marks = pd.read_csv(reports / "tables" / "trajectory_marks.csv")
    assert sorted(table["epoch"].unique()) == [1, 2]   # configs/smoke.yaml: 2 epochs
    claims = pd.read_csv(reports / "tables" / "claims.csv")
    traced = marks[(marks["kind"] == "claim") & (marks["mark"] != "not traced")]
    # every claim judged on test perplexity by Welch has a trajectory on validation perplexity; those
    # whose arms the smoke study does not run ("not run: ...") have none
    judged = ~claims["reason"].fillna("").str.startswith("not run")
    on_ppl = set(claims.loc[claims["evidence"].fillna("").str.contains("metric=test_ppl") & judged, "claim_id"])
    assert on_ppl and set(traced["claim_id"]) == on_ppl
    assert set(traced["mark"]) <= {"held", "changed", "still moving"}
    html = (reports / "audit.html").read_text()
    assert '<section id="trajectories">' in html and "this study over training" in html
    assert f"of {len(traced)} traced verdicts still moving" in html
    for text in traced["text"]:
        assert text.split(":")[0] in html


@pytest.mark.slow
def test_refreshing_the_trajectories_is_one_rule_and_retrains_nothing(smoke_study, mirror, tmp_path):
    study = copy_study(smoke_study, tmp_path / "smoke")
    target = "reports/smoke/tables/trajectories.csv"
    env = {**os.environ, "AUDIT_DATA_MIRROR": str(mirror)}

    def snakemake(*args):
        return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "configs/smoke.yaml",
                               *args], cwd=study, env=env, capture_output=True, text=True, timeout=900)

    plan = snakemake("-f", target, "-n")
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert job_counts(plan.stdout + plan.stderr) == {"report_table_trajectories": 1, "total": 1}
    runs = study / "results" / "smoke" / "runs"
    before = {p: p.stat().st_mtime_ns for p in runs.rglob("*") if p.is_file()}
    start = time.perf_counter()
    done = snakemake("-f", target)
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.perf_counter() - start < 120   # seconds, not a retraining
    assert {p: p.stat().st_mtime_ns for p in runs.rglob("*") if p.is_file()} == before
