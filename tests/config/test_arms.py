"""A study's arms: grids expanded into arms, their keys checked."""

import pytest

from audit.config import check_study, run_settings
from audit.errors import AuditError
from helpers import minimal_study


def test_grid_expands_into_one_arm_per_point_with_its_options():
    config = check_study(minimal_study(heads=[
        {"name": "softmax"},
        {"name": "gss", "options": {"c": 0.0}, "grid": {"c": [-1.5, 2.0], "k": [1.25, 3]}, "train": {"lr": 10.0}}]))
    names = [e["name"] for e in config["heads"]]
    assert names == ["softmax", "gss_c-1.5_k1.25", "gss_c-1.5_k3", "gss_c2_k1.25", "gss_c2_k3"]
    arm = config["heads"][2]
    assert arm["head"] == "gss" and arm["options"] == {"c": -1.5, "k": 3} and arm["train"] == {"lr": 10.0}
    assert arm["grid_point"] == {"c": -1.5, "k": 3} and arm["arm_group"] == "gss" and "grid" not in arm
    assert check_study(config)["heads"] == config["heads"]          # idempotent on a resolved config
    settings = run_settings(config, "ptb", "gss_c2_k1.25", 1)
    assert settings["options"] == {"c": 2.0, "k": 1.25} and settings["grid_point"] == {"c": 2.0, "k": 1.25}
    assert "grid_point" not in run_settings(config, "ptb", "softmax", 1)   # other arms' settings unchanged


def test_grid_key_must_be_an_option_of_the_head():
    with pytest.raises(AuditError, match=r"study.yaml: config key heads\[0\].grid.experts: not an option of head 'gss'"):
        check_study(minimal_study(heads=[{"name": "gss", "grid": {"experts": [1, 2]}}]), "study.yaml")
