"""audit/yamlfile.py: PyYAML's safe loader, except that a key written twice in one mapping is a
one-line error naming the file and both lines."""

from pathlib import Path

import pytest

from audit import yamlfile
from audit.errors import AuditError

REPO = Path(__file__).resolve().parent.parent


def test_a_key_written_twice_at_any_depth_names_both_lines(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("a: 1\nb:\n  c: 2\n  d: [1, {e: 3, e: 4}]\n")
    with pytest.raises(AuditError) as err:
        yamlfile.load(path)
    assert str(err.value) == f"{path}: line 4 not valid YAML (key 'e' written twice (first on line 4))"
    path.write_text("a: 1\nb: 2\n1: x\na: 3\n")
    with pytest.raises(AuditError, match=r"line 4 not valid YAML \(key 'a' written twice \(first on line 1\)\)$"):
        yamlfile.load(path)


def test_what_yaml_allows_still_loads_as_pyyaml_loads_it(tmp_path):
    """A merged mapping's key may be overridden; equal keys in two mappings are two keys."""
    import yaml

    path = tmp_path / "ok.yaml"
    text = "a: &b {lr: 1.0, epochs: 2}\nb: {<<: *b, lr: 2.0}\nc: {lr: 3.0}\nd: [x, {lr: 4}]\n"
    path.write_text(text)
    assert yamlfile.load(path) == yaml.safe_load(text) == \
        {"a": {"lr": 1.0, "epochs": 2}, "b": {"lr": 2.0, "epochs": 2}, "c": {"lr": 3.0}, "d": ["x", {"lr": 4}]}


def test_a_syntax_error_is_one_line_with_its_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(AuditError, match=r"^.*bad\.yaml: line \d+ not valid YAML \(") as err:
        yamlfile.load(path)
    assert "\n" not in str(err.value)


def test_every_shipped_config_writes_each_key_once():
    """configs/transformer-paper.yaml wrote `stats:` twice until this reader refused it."""
    paths = sorted((REPO / "configs").glob("*.yaml"))
    assert len(paths) > 10
    for path in paths:
        yamlfile.load(path)
