"""Reading the YAML a user writes (study configs, claims files): PyYAML's safe loader, except
that a key written twice in one mapping is an error.

PyYAML, and Snakemake's ``--configfile`` reader, keep the last of two equal keys without a word,
so a second ``train:`` block would silently drop every setting of the first. A study must not
run on settings its author did not mean: the file, both lines and the key are named instead.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from audit.errors import AuditError

_MERGE = "tag:yaml.org,2002:merge"


class _UniqueKeys(yaml.SafeLoader):
    """SafeLoader refusing a mapping that writes one key twice (merged keys, ``<<:``, may be
    overridden, as YAML allows)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = key in first
                except TypeError:   # an unhashable key: PyYAML's own error follows
                    continue
                if seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} written twice (first on line {first[key]})", key_node.start_mark)
                first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def load(path: str | Path):
    """The YAML document of file ``path``, with ``AuditError`` (one line: the file, the line and
    what is wrong) for a syntax error or a key written twice. ``FileNotFoundError`` passes."""
    path = Path(path)
    try:
        return yaml.load(path.read_text(), Loader=_UniqueKeys)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise AuditError(f"{path}:{where} not valid YAML ({getattr(err, 'problem', err)})") from None
