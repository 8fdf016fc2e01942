"""Heads by import path (audit.model.importpath, audit.model.heads): every bad input is one line
naming the config key and the reason, raised when the config is checked; a good outside head is
built with the protocol's optional members filled in."""

import textwrap

import pytest
import torch
import torch.nn as nn

from audit.config import check_study
from audit.errors import AuditError
from audit.model.heads import HeadSpec, build_head, head_class
from tests.helpers import doc_example, write_package

BAD = textwrap.dedent('''
    import torch.nn as nn
    import torch.nn.functional as F

    class NotAModule:
        def __init__(self, spec):
            pass
        def forward(self, h):
            return h

    class NoForward(nn.Module):
        def __init__(self, spec):
            super().__init__()

    class TwoArguments(nn.Module):
        def __init__(self, spec, extra):
            super().__init__()
        def forward(self, h):
            return h

    class BadDefaults(nn.Module):
        defaults = ["t"]
        def __init__(self, spec):
            super().__init__()
        def forward(self, h):
            return h

    class NoInitHidden(nn.Module):
        def __init__(self, cfg, embedding):
            super().__init__()
        def forward(self, words, hidden):
            return words

    class OneArgumentBody(nn.Module):
        def __init__(self, cfg):
            super().__init__()
        def init_hidden(self, batch_size):
            return None
        def forward(self, words, hidden):
            return words

    not_a_class = 3
''')


@pytest.fixture
def outside(tmp_path, monkeypatch):
    """Package ``h23pkg`` on sys.path: ``temperature`` (the docs example) and ``bad``."""
    write_package(tmp_path, "h23pkg", {"temperature": doc_example("heads.md"), "bad": BAD,
                                       "broken": "raise RuntimeError('boom')\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "h23pkg"


def study(entry: dict) -> dict:
    return {"study": "t", "seeds": [1], "heads": [{"name": "softmax"}, {"name": "mine", **entry}]}


def error_of(entry: dict, index: int = 1) -> str:
    with pytest.raises(AuditError) as err:
        check_study(study(entry), "cfg.yaml")
    message = str(err.value)
    assert "\n" not in message  # one line
    assert message.startswith(f"cfg.yaml: config key heads[{index}].")
    return message


@pytest.mark.parametrize("path, reason", [
    ("h23pkg.temperature.TemperatureSoftmax", "must look like 'package.module:Class'"),
    ("h23pkg.nowhere:Head", "cannot import module 'h23pkg.nowhere'"),
    ("h23pkg.broken:Head", "RuntimeError: boom"),
    ("h23pkg.temperature:Missing", "has no attribute 'Missing'"),
    ("h23pkg.bad:not_a_class", "is not a class"),
])
def test_bad_import_path_is_one_line(outside, path, reason):
    message = error_of({"import": path})
    assert "config key heads[1].import" in message and reason in message


@pytest.mark.parametrize("cls, reason", [
    ("NotAModule", "not a torch.nn.Module"),
    ("NoForward", "no forward() method"),
    ("TwoArguments", "its constructor must take one argument"),
    ("BadDefaults", "defaults must be a dict"),
])
def test_class_not_meeting_the_protocol_is_one_line(outside, cls, reason):
    message = error_of({"import": f"h23pkg.bad:{cls}"})
    assert f"heads[1].import: head h23pkg.bad:{cls} does not meet the head protocol: {reason}" in message


def test_options_the_schema_rejects_are_one_line(outside):
    path = "h23pkg.temperature:TemperatureSoftmax"
    message = error_of({"import": path, "options": {"temprature": 2.0}})
    assert "heads[1].options.temprature: unknown option of head TemperatureSoftmax; known options: " \
           "init_temperature, lr" in message
    message = error_of({"import": path, "options": {"init_temperature": -1}})
    assert "heads[1].options: rejected by head TemperatureSoftmax: init_temperature must be > 0, got -1" in message
    message = error_of({"import": path, "head": "softmax"})
    assert "heads[1].import: give a head by registry name (head) or by import path (import), not both" in message


def test_grid_of_an_outside_head_checks_each_arm(outside):
    # the second arm (init_temperature -2) is heads[2] once the grid is expanded
    message = error_of({"import": "h23pkg.temperature:TemperatureSoftmax", "grid": {"init_temperature": [1, -2]}}, 2)
    assert "heads[2].options: rejected by head TemperatureSoftmax: init_temperature must be > 0, got -2" in message


def test_good_outside_head_checks_and_builds_with_defaults_filled(outside):
    path = "h23pkg.temperature:TemperatureSoftmax"
    config = check_study(study({"import": path, "options": {"init_temperature": 2.0}}), "cfg.yaml")
    assert config["heads"][1]["head"] == path
    emb = nn.Embedding(7, 3)
    head = build_head(path, HeadSpec(d_in=3, embedding=emb, options={"init_temperature": 2.0}))
    assert head_class(path) is type(head)  # one class per path
    assert head.name == path and head.from_logits(torch.zeros(7)) is None    # filled by HeadDefaults
    assert head.extra_param_groups() == [{"params": [head.log_temperature], "lr": 0.01, "name": "temperature"}]
    h = torch.randn(4, 2, 3)
    expected = torch.log_softmax((h @ emb.weight.t()) / 2.0, dim=-1)  # bias starts at zero
    torch.testing.assert_close(head(h), expected)
    assert torch.equal(head.output_layer()[0], emb.weight)


def test_unknown_registry_name_lists_heads_and_import_paths():
    with pytest.raises(AuditError, match="unknown head 'softmaxx'; known heads: gss, .*import path"):
        check_study(study({"head": "softmaxx"}), "cfg.yaml")


@pytest.mark.parametrize("body, reason", [
    ("h23pkg.bad:NoInitHidden", "body h23pkg.bad:NoInitHidden does not meet the body protocol: no init_hidden() method"),
    ("h23pkg.bad:OneArgumentBody", "its constructor must take two arguments (cfg, embedding)"),
    ("h23pkg.nowhere:Body", "cannot import module 'h23pkg.nowhere'"),
    ("gru", "unknown body 'gru'; known bodies: awd_lstm, transformer"),
])
def test_bad_body_is_one_line(outside, body, reason):
    for config, key in (({"model": {"body": body}}, "config key model.body"),
                        ({"heads": [{"name": "softmax", "model": {"body": body}}]}, "config key heads[0].model.body")):
        with pytest.raises(AuditError) as err:
            check_study({"study": "t", "seeds": [1], "heads": [{"name": "softmax"}], **config}, "cfg.yaml")
        message = str(err.value)
        assert "\n" not in message and message.startswith(f"cfg.yaml: {key}: ") and reason in message


def test_transformer_needs_its_training(outside):
    base = {"study": "t", "seeds": [1], "heads": [{"name": "softmax"}]}
    with pytest.raises(AuditError, match="config key train.asgd: must be none with optimizer adamw"):
        check_study({**base, "train": {"optimizer": "adamw"}}, "cfg.yaml")
    with pytest.raises(AuditError, match="config key train.bptt: chunks of up to 110 tokens exceed the "
                                         "transformer's model.context_size=64"):
        check_study({**base, "model": {"body": "transformer", "context_size": 64}}, "cfg.yaml")
