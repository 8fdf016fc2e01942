"""The planner prices a suite from its config alone, and the committed claims files are what the
generator writes from their studies (a claim edited by hand, or a size added to a config without
regenerating its claims, fails here)."""

import yaml

from audit.config import load_study
from audit.config.study import read_claims_file
from audit.plan.argmaxcost import argmax_cheap_seconds, argmax_lp_seconds
from audit.pretrained import claims, plan, suite
from tests.helpers import REPO


def test_committed_claims_are_the_generators():
    for config, path in (("pythia.yaml", "pretrained/claims-pythia.yaml"),
                         ("pretrained-example.yaml", "pretrained/claims-example.yaml")):
        study = load_study(REPO / "configs" / config)
        assert study["claims_file"] == f"configs/{path}"
        committed = yaml.safe_load((REPO / "configs" / path).read_text())["claims"]
        assert committed == claims.suite_claims(study) and read_claims_file(REPO / "configs" / path)
    ids = [c["id"] for c in committed]
    assert "small-heads-saturate.tiny-sat" in ids and "softmax-rarely-unargmaxable.tiny-16" in ids


def test_saturation_expects_a_rise_below_d_1000_only():
    study = load_study(REPO / "configs" / "pythia.yaml")
    expect = {c["id"]: c["expect"] for c in claims.suite_claims(study) if c["id"].startswith("small-heads-saturate.")}
    assert expect["small-heads-saturate.pythia-160m"] == "above" and expect["small-heads-saturate.pythia-410m"] == "below"


def test_a_job_costs_its_flops_and_the_argmax_at_the_final_checkpoint_only():
    study = load_study(REPO / "configs" / "pythia.yaml")
    section, options = study["pretrained"], study["evaluate"]
    tokens = plan.text_tokens(section, None)
    assert tokens == 3000 * 120 / plan.BYTES_PER_TOKEN      # no file yet: max_lines x ~120 bytes (< PTB test's size)
    model = suite.model_entry(section, "pythia-410m")
    early = plan.job_cost(section, options, suite.Job("pythia-410m", 3, "step33000"), tokens, gpu=False)
    final = plan.job_cost(section, options, suite.Job("pythia-410m", 3, "step143000"), tokens, gpu=False)
    lp = 2 * (argmax_cheap_seconds(50304, 1024) + 50 * argmax_lp_seconds(50304, 1024))
    assert abs(final["seconds"] - early["seconds"] - lp) < 1e-6
    assert early["seconds"] == plan.JOB_SECONDS + plan.flops(section, model, tokens) / (plan.CPU_FLOPS * 2)
    small = plan.job_cost(section, options, suite.Job("pythia-14m", 3, "step33000"), tokens, gpu=False)
    assert small["seconds"] < early["seconds"] and small["mem_mb"] < early["mem_mb"]
