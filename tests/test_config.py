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
