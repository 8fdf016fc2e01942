"""A study config checked against the schema: one-line errors, defaults, statistics sections, claims files."""

import dataclasses
from pathlib import Path

import pytest
import yaml

from audit.config import check_stats_config, check_study, load_study, stats_sections
from audit.errors import AuditError
from audit.schema import schema_defaults
from helpers import minimal_study

REPO = Path(__file__).resolve().parents[2]


def test_defaults_are_filled_from_the_schema():
    config = check_study(minimal_study())
    assert config["model"]["emb_size"] == 400 and config["train"]["lr"] == 20.0
    assert config["data"]["corpora"] == ["ptb"] and config["evaluate"]["contexts"] == "all"
    assert config["evaluate"]["argmax"]["search_steps"] == 100 and config["evaluate"]["argmax"]["search_tokens"] == 1000
    assert config["heads"][0]["head"] == "softmax" and config["heads"][0]["options"] == {}


@pytest.mark.parametrize("config, key", [
    (minimal_study(heads=[{"name": "softmax"}, {"name": "sofmax"}]), "heads[1].head: unknown head 'sofmax'"),
    (minimal_study(train={"lr": "fast"}), "train.lr: 'fast' is not of type 'number'"),
    (minimal_study(model={"emb_sise": 3}), "model: Additional properties are not allowed ('emb_sise' was unexpected)"),
    (minimal_study(seeds=[]), "seeds: [] should be non-empty"),
    (minimal_study(heads=[{"name": "a", "head": "softmax_matched", "options": {"match": "mos"}}]),
     "heads[0].options.match: must name another head"),
    (minimal_study(heads=[{"name": "softmax", "train": {"epoks": 3}}]), "heads[0].train.epoks: unknown train setting"),
    # an arm's override obeys the section's rule (epochs 0 trained nothing yet said status ok)
    (minimal_study(heads=[{"name": "softmax", "train": {"epochs": 0}}]),
     "heads[0].train.epochs: 0 is less than the minimum of 1"),
    (minimal_study(heads=[{"name": "softmax", "model": {"dropout": 1.5}}]),
     "heads[0].model.dropout: 1.5 is greater than or equal to the maximum of 1"),
    (minimal_study(heads=[{"name": "softmax", "train": {"lr": "fast"}}]), "heads[0].train.lr: 'fast' is not of type 'number'"),
    (minimal_study(heads=[{"name": "mos", "options": {"expert": 3}}]), "heads[0].options.expert: unknown option of head 'mos'"),
    # the statistics sections: the schema's $defs, the same the stats verb checks a stats config against
    (minimal_study(comparisons=[{"family": "f", "baseline": "softmax", "metrics": ["test_ppl"]}]),
     "comparisons[0]: give 'baseline' and 'against', or 'pairs'"),
    (minimal_study(comparisons=[{"family": "f", "pairs": [["a", "b"]], "metric": ["test_ppl"]}]),
     "comparisons[0]: Additional properties are not allowed ('metric' was unexpected)"),
    (minimal_study(comparisons=[{"family": "f", "pairs": [["a", "b"]], "metrics": ["m"], "family_by": ["head"]}]),
     "comparisons[0].family_by[0]: 'head' is not one of ['corpus', 'metric']"),
    (minimal_study(correlations=[{"name": "c", "x": "press_rank", "y": "test_ppl"}] * 2),
     "correlations[1].name: duplicate correlation 'c'"),
    (minimal_study(claims=[{"id": "c", "source": "s", "expect": "up",
                      "comparison": {"head_a": "mos", "head_b": "softmax", "metric": "test_ppl"}}]),
     "claims[0].expect: 'up' is not one of ['lower', 'higher', 'equivalent', 'not_lower', 'not_higher']"),
    (minimal_study(evaluate={"argmax": {"search_steps": -1}}),
     "evaluate.argmax.search_steps: -1 is less than the minimum of 0"),
    (minimal_study(evaluate={"argmax": {"search_tokens": "most"}}), "evaluate.argmax.search_tokens: 'most' is not valid"),
    (minimal_study(stats={"alpha": 0.7}), "stats.alpha: 0.7 is greater than or equal to the maximum of 0.5"),
    (minimal_study(stats={"min_seed": 3}), "stats: Additional properties are not allowed ('min_seed' was unexpected)"),
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


def test_a_key_written_twice_is_refused_naming_both_lines(tmp_path):
    """PyYAML keeps the last of two equal keys: the first train block would be dropped unseen."""
    path = tmp_path / "twice.yaml"
    path.write_text("study: t\nseeds: [1]\ntrain:\n  lr: 1.0\nheads: [{name: softmax}]\ntrain:\n  epochs: 2\n")
    with pytest.raises(AuditError) as err:
        load_study(path)
    assert str(err.value) == f"{path}: line 6 not valid YAML (key 'train' written twice (first on line 3))"
    path.write_text("study: t\nseeds: [1]\nheads: [{name: softmax}]\ntrain:\n  lr: 1.0\n  lr: 2.0\n")
    with pytest.raises(AuditError, match=r"line 6 not valid YAML \(key 'lr' written twice \(first on line 5\)\)"):
        load_study(path)


def test_shipped_configs_validate(monkeypatch):
    monkeypatch.chdir(REPO)   # claims_file is relative to the repository root
    studies = sorted(p for p in (REPO / "configs").glob("*.yaml") if p.name not in ("schema.yaml", "claims.yaml"))
    assert len(studies) > 10
    for path in studies:
        config = load_study(path)
        assert config["study"] == path.stem
        sections = stats_sections(config)        # claims_file read and checked against the schema
        # what rules/stats.smk writes passes the stats verb's check, every default already filled
        assert check_stats_config(sections, "stats_config.yaml") == {**sections, "claims_file": None}


def test_stats_sections_inline_the_claims_file(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    sections = stats_sections(load_study(REPO / "configs" / "smoke.yaml"))
    claims = yaml.safe_load((REPO / "configs" / "claims.yaml").read_text())["claims"]
    assert sections["claims"] == claims and "claims_file" not in sections


def test_stats_sections_get_the_schema_defaults():
    config = check_study(minimal_study(
        comparisons=[{"family": "f", "pairs": [["mos", "softmax"]], "metrics": ["test_ppl"]}],
        correlations=[{"name": "c", "x": "press_rank", "y": "test_ppl"}],
        claims=[{"id": "k", "source": "s", "expect": "nonzero", "correlation": {"name": "c"}}]))
    assert config["stats"] == {"min_seeds": 5, "alpha": 0.05, "bootstrap_resamples": 10000,
                               "bootstrap_seed": 12345, "power_target": 0.8,
                               "converged_gain": 0.01, "max_failed_share": 0.2} == schema_defaults("stats")
    assert config["comparisons"][0]["family_by"] == [] and config["correlations"][0]["windows"] == []
    assert config["claims"][0]["statement"] == ""
    assert config["claims"][0]["correlation"] == {"name": "c", "level": "runs", "method": "pearson"}
    config["comparisons"][0]["family_by"].append("corpus")     # defaults are copies, never shared
    assert check_study(minimal_study(comparisons=[{"family": "g", "pairs": [["a", "b"]], "metrics": ["m"]}])
                       )["comparisons"][0]["family_by"] == []


def test_stats_config_check_takes_a_study_and_rejects_unknown_keys():
    study = yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text())
    checked = check_stats_config(study, "smoke.yaml")
    assert checked["heads"] == study["heads"] and checked["stats"]["alpha"] == 0.05   # other keys left alone
    assert check_stats_config({"stats": None, "comparisons": None}, "s.yaml")["stats"] == schema_defaults("stats")
    with pytest.raises(AuditError, match=r"^s\.yaml: config key <top level>: Additional properties are not allowed "
                                         r"\('comparison' was unexpected\)$"):
        check_stats_config({"comparison": []}, "s.yaml")


def _claim(cid, expect="lower"):
    return {"id": cid, "source": "s", "expect": expect,
            "comparison": {"head_a": "mos", "head_b": "softmax", "metric": "test_ppl"}}


@pytest.mark.parametrize("document, message", [
    ({"claims": [_claim("a"), _claim("b", "better")]},
     r"claims\[1\]\.expect: 'better' is not one of \['lower'"),
    ({"claims": [_claim("own")]}, r"claims\[0\]\.id: duplicate claim id 'own'"),     # repeats the study's claim
    ({"claims": [_claim("a"), _claim("a")]}, r"claims\[1\]\.id: duplicate claim id 'a'"),
    ({"claim": []}, r"<top level>: Additional properties are not allowed \('claim' was unexpected\)"),
    ({}, r"<top level>: 'claims' is a required property"),
])
def test_claims_file_is_checked_against_the_schema(tmp_path, document, message):
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(document))
    config = check_study(minimal_study(claims=[_claim("own")], claims_file=str(path)))
    with pytest.raises(AuditError, match=f"^{path}: config key {message}") as err:
        stats_sections(config)
    assert "\n" not in str(err.value)


def test_claims_file_claims_get_defaults(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"claims": [_claim("a")]}))
    sections = stats_sections(check_study(minimal_study(claims_file=str(path))))
    assert sections["claims"] == [{**_claim("a"), "statement": ""}]


def test_model_defaults_live_only_in_the_schema():
    from audit.model.bodies import BODIES, SectionConfig
    from audit.model.language_model import ModelConfig

    defaults = schema_defaults("model", unfilled=True)   # with the body's x-default settings
    assert not {"body", "n_heads", "positions", "context_size", "eval_stride"} & set(schema_defaults("model"))
    # the model's own fields and every body's Config take the schema's defaults; together the
    # built-in bodies' configs and the model's fields cover every setting of the schema
    own = {f.name: f.default for f in dataclasses.fields(ModelConfig) if f.default is not dataclasses.MISSING}
    covered = set(own) - {"head"}
    for cls in BODIES.values():
        body = {f.name: f.default for f in dataclasses.fields(cls.Config)}
        assert body == {k: defaults[k] for k in body}, cls
        covered |= set(body)
    assert {k: own[k] for k in own if k != "head"} == {k: defaults[k] for k in own if k != "head"}
    assert covered == set(defaults) - {"body_options"}   # an outside body's own settings
    # an outside body without a Config of its own reads every body setting, as before configs
    section = {f.name: f.default for f in dataclasses.fields(SectionConfig)}
    assert section == {k: v for k, v in defaults.items() if k not in ("body", "decoder_bias", "body_options")}
    cfg = ModelConfig.of(vocab_size=50, emb_size=8)
    body = cfg.body_config
    assert (cfg.emb_size, body.emb_size, body.hidden_size, body.n_layers, body.dropouti, body.last_size) == \
        (8, 8, 1150, 3, 0.4, None)
    with pytest.raises(TypeError):
        ModelConfig.of()              # V comes from the corpus, never from a default
