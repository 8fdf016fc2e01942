"""The study schema (``configs/schema.yaml``): read once, and its defaults.

The one home of every default a study can set. Torch-free and free of the rest of the project,
so that the config check above it and the model and statistics settings below it (``ModelConfig``,
the stats ``Settings``) take their defaults from the same file at import.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

from audit.errors import AuditError

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "configs" / "schema.yaml"


@functools.lru_cache(maxsize=1)
def read_schema() -> dict:
    """The parsed schema, read once; callers never mutate it (defaults are copied out)."""
    if not SCHEMA_PATH.is_file():
        raise AuditError(f"missing config schema {SCHEMA_PATH}")
    return yaml.safe_load(SCHEMA_PATH.read_text())


def schema_defaults(section: str, unfilled: bool = False) -> dict:
    """``{key: default}`` of one object section of the schema (``$defs`` first, then the study's
    top-level properties), e.g. ``schema_defaults("model")``. Torch-free, so that ModelConfig and
    the statistics Settings take their defaults from the schema at import.

    ``unfilled`` adds the ``x-default`` values: defaults the code applies but validation does
    not write into a config (the body settings: runs recorded before they existed keep their
    settings, so Snakemake does not see them change)."""
    schema = read_schema()
    node = schema.get("$defs", {}).get(section) or schema["properties"][section]
    out = {k: copy.deepcopy(v["default"]) for k, v in node["properties"].items() if "default" in v}
    if unfilled:
        out |= {k: copy.deepcopy(v["x-default"]) for k, v in node["properties"].items() if "x-default" in v}
    return out
