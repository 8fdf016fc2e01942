"""Study configurations: validation against ``configs/schema.yaml`` and per-run settings.

The schema holds every default. ``check_study`` reports the first problem as one line naming
the key, then lets Snakemake's ``validate`` fill the defaults. ``run_settings`` cuts out of a
study exactly what one (corpus, head, seed) run depends on, so that a Snakemake rule can use it
as ``params`` and rerun only when those settings change.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
from pathlib import Path

import jsonschema
import yaml

from audit.errors import AuditError

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "configs" / "schema.yaml"


def _schema() -> dict:
    if not SCHEMA_PATH.is_file():
        raise AuditError(f"missing config schema {SCHEMA_PATH}")
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _key(path) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path).replace(".[", "[") or "<top level>"


def check_study(config: dict, source: str = "config") -> dict:
    """Validate a study config and return a copy with all schema defaults filled in.

    Raises:
        AuditError: one line naming the source file and the offending key.
    """
    if not isinstance(config, dict):
        raise AuditError(f"{source}: a study config must be a mapping, got {type(config).__name__}")
    schema = _schema()
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if error is not None:
        raise AuditError(f"{source}: config key {_key(error.absolute_path)}: {error.message}")
    from snakemake.utils import validate  # Snakemake's validate fills defaults the same way in the Snakefile

    config = copy.deepcopy(config)
    validate(config, str(SCHEMA_PATH), set_default=True)
    config["heads"] = expand_grids(config["heads"], source)
    _check_semantics(config, schema, source)
    return config


def grid_value_label(value) -> str:
    """A swept (numeric) value as it appears in an arm name: 2.0 -> "2", -1.5 -> "-1.5"."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return format(value, "g") if isinstance(value, float) else str(value)


def expand_grids(entries: list[dict], source: str = "config") -> list[dict]:
    """Replace every head entry with a ``grid`` by one arm per point of the grid's product.

    The arm of point {c: -1.5, k: 2.5} of entry ``gss`` is named ``gss_c-1.5_k2.5``, has those
    values merged into its options and records ``grid_point`` and ``arm_group`` (the entry's
    name), which the runs table turns into ``grid_<key>`` and ``arm_group`` columns. Points are
    ordered as the product of the lists in the order written. Entries without a grid (and arms
    of an already expanded grid) are kept as they are, so expansion is idempotent.

    Raises:
        AuditError: a grid key that is not an option of the head.
    """
    from audit.model.options import HEAD_OPTIONS

    out = []
    for i, entry in enumerate(entries):
        grid = entry.get("grid")
        if not grid:
            out.append(entry)
            continue
        head = entry.get("head", entry["name"])
        known = HEAD_OPTIONS.get(head)
        for key in grid:
            if known is not None and key not in known:
                raise AuditError(f"{source}: config key heads[{i}].grid.{key}: not an option of head {head!r}; "
                                 f"known options: {', '.join(sorted(known)) or 'none'}")
        keys = list(grid)
        for values in itertools.product(*(grid[k] for k in keys)):
            point = dict(zip(keys, values))
            arm = copy.deepcopy({k: v for k, v in entry.items() if k != "grid"})
            arm["head"] = head
            arm["name"] = entry["name"] + "".join(f"_{k}{grid_value_label(v)}" for k, v in point.items())
            arm["options"] = {**entry.get("options", {}), **point}
            arm["grid_point"], arm["arm_group"] = point, entry["name"]
            out.append(arm)
    return out


def _check_semantics(config: dict, schema: dict, source: str) -> None:
    """What a schema cannot say: known head names, unique labels, valid overrides."""
    from audit.model.options import HEAD_OPTIONS

    names = [entry["name"] for entry in config["heads"]]
    for i, entry in enumerate(config["heads"]):
        entry.setdefault("head", entry["name"])
        if names.count(entry["name"]) > 1:
            raise AuditError(f"{source}: config key heads[{i}].name: duplicate head name {entry['name']!r}")
        if entry["head"] not in HEAD_OPTIONS:
            raise AuditError(f"{source}: config key heads[{i}].head: unknown head {entry['head']!r}; "
                             f"known heads: {', '.join(sorted(HEAD_OPTIONS))}")
        unknown = sorted(set(entry["options"]) - set(HEAD_OPTIONS[entry["head"]]))
        if unknown:
            known = ", ".join(sorted(HEAD_OPTIONS[entry["head"]])) or "none"
            raise AuditError(f"{source}: config key heads[{i}].options.{unknown[0]}: unknown option of head "
                             f"{entry['head']!r}; known options: {known}")
        for section in ("model", "train"):
            allowed = schema["properties"][section]["properties"]
            for key in entry.get(section, {}):
                if key not in allowed:
                    raise AuditError(f"{source}: config key heads[{i}].{section}.{key}: unknown {section} setting")
        target = entry["options"].get("match")
        if entry["head"] == "softmax_matched" and target not in names:
            raise AuditError(f"{source}: config key heads[{i}].options.match: must name another head, got {target!r}")


def load_study(path: str | Path) -> dict:
    """Read, validate and fill a study config file."""
    path = Path(path)
    if not path.is_file():
        raise AuditError(f"config file not found: {path}")
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise AuditError(f"{path}:{where} not valid YAML ({getattr(err, 'problem', err)})") from None
    return check_study(config, str(path))


def head_entry(config: dict, name: str) -> dict:
    for entry in config["heads"]:
        if entry["name"] == name:
            return entry
    raise AuditError(f"no head named {name!r} in study {config['study']!r}")


def run_settings(config: dict, corpus: str, name: str, seed: int) -> dict:
    """Everything one run depends on, as a JSON-serialisable dict (used as Snakemake params)."""
    entry = head_entry(config, name)
    match = entry["options"].get("match") if entry["head"] == "softmax_matched" else None
    settings = {
        "study": config["study"],
        "corpus": corpus,
        "name": name,
        "seed": int(seed),
        "head": entry["head"],
        "options": entry["options"],
        "model": {**config["model"], **entry.get("model", {})},
        "train": {**config["train"], **entry.get("train", {})},
        "max_tokens": config["data"]["max_tokens"],
        "evaluate": config["evaluate"],
    }
    if "grid_point" in entry:  # only grid arms carry these, so other runs' settings stay as they were
        settings["grid_point"], settings["arm_group"] = entry["grid_point"], entry["arm_group"]
    if match:  # the capacity-matched softmax is solved against the named arm's model
        target = head_entry(config, match)
        settings["match"] = {"head": target["head"], "options": target["options"],
                             "model": {**config["model"], **target.get("model", {})}}
    return settings


def settings_json(config: dict, corpus: str, name: str, seed: int) -> str:
    """``run_settings`` as canonical JSON: the same settings always give the same string."""
    return json.dumps(run_settings(config, corpus, name, int(seed)), sort_keys=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit validate", description=__doc__)
    parser.add_argument("config", help="study config YAML")
    args = parser.parse_args(argv)
    print(yaml.safe_dump(load_study(args.config), sort_keys=False), end="")
    return 0


def stats_sections(config: dict) -> dict:
    """The parts of a study the statistics read, with ``claims_file`` inlined, so that the
    stats rules rerun when (and only when) these change."""
    claims = list(config["claims"])
    if config.get("claims_file"):
        path = Path(config["claims_file"])
        if not path.is_file():
            raise AuditError(f"config key claims_file: file not found: {path}")
        claims += (yaml.safe_load(path.read_text()) or {}).get("claims", [])
    return {"study": config["study"], "comparisons": config["comparisons"],
            "correlations": config["correlations"], "claims": claims, "stats": config["stats"]}


def write_yaml(data: dict, path: str | Path) -> None:
    """Write ``data`` as YAML atomically."""
    from audit.files import atomic_write_text

    atomic_write_text(yaml.safe_dump(data, sort_keys=False), Path(path))
