"""A head from outside the repository (docs/heads.md's example in a temporary package on
PYTHONPATH) audited through the whole Snakemake DAG: trained, evaluated, counted, matched by
softmax_matched, compared with softmax and reported, like a built-in head."""

import json
import math
import os
import subprocess
import sys

import pandas as pd
import pytest
import torch
import yaml

from tests.helpers import doc_example, write_package
from tests.test_pipeline import copy_workflow

IMPORT = "outside_heads.temperature:TemperatureSoftmax"


def study(workdir) -> dict:
    config = yaml.safe_load((workdir / "configs" / "smoke.yaml").read_text())
    config.update(study="outside", seeds=[1, 2])
    config["heads"] = [{"name": "softmax"},
                       {"name": "tempered", "import": IMPORT, "options": {"init_temperature": 2.0}},
                       {"name": "softmax_matched", "options": {"match": "tempered"}}]
    config["data"]["max_tokens"] = {"train": 20000, "valid": 2000, "test": 2000}
    config["train"]["epochs"] = 1
    config["evaluate"]["contexts"] = 200
    # the first family only (smoke.yaml's gradient-share family names sigsoftmax, absent here)
    config["comparisons"] = [{**config["comparisons"][0], "against": ["tempered"]}]
    config["stats"].update(min_seeds=2, bootstrap_resamples=200)
    return config


@pytest.mark.slow
def test_outside_head_is_audited_through_the_dag(tmp_path, mirror):
    (tmp_path / "work").mkdir()
    workdir = copy_workflow(tmp_path / "work")
    (workdir / "configs" / "outside.yaml").write_text(yaml.safe_dump(study(workdir)))
    packages = write_package(tmp_path / "site", "outside_heads", {"temperature": doc_example("heads.md")})
    path = os.pathsep.join(p for p in (str(packages), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "AUDIT_DATA_MIRROR": str(mirror), "PYTHONPATH": path}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "configs/outside.yaml"],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]

    runs = pd.read_csv(workdir / "reports" / "outside" / "runs.csv")
    assert sorted(zip(runs["head"], runs["seed"])) == [(h, s) for h in ("softmax", "softmax_matched", "tempered")
                                                       for s in (1, 2)]
    assert (runs["status"] == "ok").all() and runs["test_ppl"].between(1, 10_000).all()
    d = 16  # smoke.yaml's emb_size
    # a temperature rescales every context alike: its transformed_logits (l / tau) have the rank
    # of the logits, d + 1, and log-P stays within the softmax's bound d + 2 (a model this barely
    # trained has a lower numerical rank than the bound: 5-6 here)
    assert (runs["f_logits_press_rank"] == d + 1).all() and (runs["press_rank"] <= d + 2).all()
    params = runs.groupby("head")["n_params"].first()
    assert params["tempered"] == params["softmax"] + 1 == params["softmax_matched"] + 1
    metrics = json.loads((workdir / "results" / "outside" / "runs" / "ptb" / "tempered" / "1" / "metrics.json")
                         .read_text())
    assert metrics["settings"]["head"] == IMPORT
    state = torch.load(workdir / "results" / "outside" / "runs" / "ptb" / "tempered" / "1" / "model.pt",
                       weights_only=False)["state"]
    assert state["head.log_temperature"].item() != pytest.approx(math.log(2.0))   # trained, in its own group
    comparisons = pd.read_csv(workdir / "reports" / "outside" / "tables" / "comparisons.csv")
    assert set(comparisons["head_a"]) == {"tempered"}
    row = comparisons[comparisons["metric"] == "test_ppl"].iloc[0]
    assert row["n_a"] == row["n_b"] == 2 and 0 <= row["welch_p"] <= 1
    assert "tempered" in (workdir / "reports" / "outside" / "audit.html").read_text()
