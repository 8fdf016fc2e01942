import json
from pathlib import Path

import pytest
import yaml

from audit.config import check_study, load_study, run_settings, settings_json, stats_sections
from audit.errors import AuditError

REPO = Path(__file__).resolve().parent.parent


def minimal(**extra):
    return {"study": "t", "seeds": [1, 2], "heads": [{"name": "softmax"}], **extra}


def test_defaults_are_filled_from_the_schema():
    config = check_study(minimal())
    assert config["model"]["emb_size"] == 400 and config["train"]["lr"] == 20.0
    assert config["data"]["corpora"] == ["ptb"] and config["evaluate"]["contexts"] == "all"
    assert config["heads"][0]["head"] == "softmax" and config["heads"][0]["options"] == {}


@pytest.mark.parametrize("config, key", [
    (minimal(heads=[{"name": "softmax"}, {"name": "sofmax"}]), "heads[1].head: unknown head 'sofmax'"),
    (minimal(train={"lr": "fast"}), "train.lr: 'fast' is not of type 'number'"),
    (minimal(model={"emb_sise": 3}), "model: Additional properties are not allowed ('emb_sise' was unexpected)"),
    (minimal(seeds=[]), "seeds: [] should be non-empty"),
    (minimal(heads=[{"name": "a", "head": "softmax_matched", "options": {"match": "mos"}}]),
     "heads[0].options.match: must name another head"),
    (minimal(heads=[{"name": "softmax", "train": {"epoks": 3}}]), "heads[0].train.epoks: unknown train setting"),
    (minimal(heads=[{"name": "mos", "options": {"expert": 3}}]), "heads[0].options.expert: unknown option of head 'mos'"),
])
def test_bad_configs_give_one_line_naming_the_key(config, key):
    with pytest.raises(AuditError) as err:
        check_study(config, "study.yaml")
    message = str(err.value)
    assert message.startswith("study.yaml: config key ") and key in message and "\n" not in message


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("study: t\nseeds: [1, 2\nheads: []\n")
    with pytest.raises(AuditError, match=r"bad\.yaml: line \d+ not valid YAML"):
        load_study(path)


def test_run_settings_merge_head_overrides_and_are_canonical():
    config = check_study(minimal(heads=[{"name": "softmax"},
                                        {"name": "big", "head": "softmax", "model": {"emb_size": 8},
                                         "train": {"lr": 1.0}}]))
    settings = run_settings(config, "ptb", "big", 2)
    assert settings["model"]["emb_size"] == 8 and settings["train"]["lr"] == 1.0
    assert settings["model"]["hidden_size"] == 1150 and settings["seed"] == 2
    assert settings_json(config, "ptb", "big", 2) == settings_json(config, "ptb", "big", 2)
    assert json.loads(settings_json(config, "ptb", "big", 2)) == settings


def test_shipped_configs_validate():
    for name in ("default", "smoke"):
        config = load_study(REPO / "configs" / f"{name}.yaml")
        assert config["study"] == name


def test_stats_sections_inline_the_claims_file(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    sections = stats_sections(load_study(REPO / "configs" / "smoke.yaml"))
    claims = yaml.safe_load((REPO / "configs" / "claims.yaml").read_text())["claims"]
    assert sections["claims"] == claims and "claims_file" not in sections


def test_grid_expands_into_one_arm_per_point_with_its_options():
    config = check_study(minimal(heads=[
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
        check_study(minimal(heads=[{"name": "gss", "grid": {"experts": [1, 2]}}]), "study.yaml")
