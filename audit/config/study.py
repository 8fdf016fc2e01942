"""A study config validated against ``configs/schema.yaml``, and its statistics sections.

The schema holds every default and every structural check. ``check_study`` reports the first
problem as one line naming the file and the key, then fills the defaults (the jsonschema recipe
Snakemake's ``validate`` uses too). The statistics sections live under the schema's ``$defs``:
``check_section`` checks one of them (the stats tables call it on the config they are given),
``check_stats_config`` a whole stats config file, ``read_claims_file`` a claims file; what a
schema cannot say (unique names) is checked beside, and of the arms in ``audit.config.arms``.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import jsonschema
import yaml

from audit import yamlfile
from audit.config.arms import check_arms, expand_grids, needs_model_check
from audit.config.settings import is_bpe
from audit.errors import AuditError
from audit.schema import read_schema

# sections of a study that `python -m audit stats` reads (rules/stats.smk writes them out)
STATS_SECTIONS = ("comparisons", "correlations", "claims", "claims_file", "stats", "published", "evidence")
# what a schema cannot say: these keys name their entries uniquely within a section
_UNIQUE = {"comparisons": ("family", "comparisons family"), "correlations": ("name", "correlation"),
           "claims": ("id", "claim id"), "evidence": ("name", "evidence source")}


def _key(path) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path).replace(".[", "[") or "<top level>"


def _with_defaults(cls):
    """``cls`` that, wherever ``properties`` applies, first sets the missing keys that have a
    ``default`` (a deep copy, so no two configs share a default list or mapping). The
    jsonschema FAQ recipe, as Snakemake's ``validate(set_default=True)`` uses it."""
    check_properties = cls.VALIDATORS["properties"]

    def properties(validator, props, instance, schema):
        if validator.is_type(instance, "object"):
            for key, sub in props.items():
                if isinstance(sub, dict) and "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from check_properties(validator, props, instance, schema)

    return jsonschema.validators.extend(cls, {"properties": properties})


_Filling = _with_defaults(jsonschema.Draft202012Validator)


def _explain(error) -> tuple:
    """(path, message) of the error to report: a failing oneOf/anyOf that words its failure
    with ``errorMessage`` speaks for the branch errors under it."""
    node = error
    while node is not None:
        if node.validator in ("oneOf", "anyOf") and isinstance(node.schema, dict) and "errorMessage" in node.schema:
            return node.absolute_path, node.schema["errorMessage"]
        node = node.parent
    return error.absolute_path, " ".join(error.message.split())   # one line, whatever the value


def _validated(node: dict, data, source: str):
    """A copy of ``data`` checked against ``node`` (with the schema's ``$defs`` in reach) and
    with every default filled in.

    Raises:
        AuditError: ``<source>: config key <path>: <message>``, one line, for the most
            relevant problem (jsonschema's ``best_match``).
    """
    schema = {**node, "$defs": read_schema().get("$defs", {})}
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if error is not None:
        path, message = _explain(error)
        raise AuditError(f"{source}: config key {_key(path)}: {message}")
    data = copy.deepcopy(data)
    for _ in _Filling(schema).iter_errors(data):  # valid already: this pass only fills defaults
        pass
    return data


def _check_unique(section: str, entries: list, source: str, taken=()) -> None:
    """No two entries of a statistics section (nor one and ``taken``) share their name."""
    key, label = _UNIQUE[section]
    seen = list(taken)
    for i, entry in enumerate(entries):
        if entry[key] in seen:
            raise AuditError(f"{source}: config key {section}[{i}].{key}: duplicate {label} {entry[key]!r}")
        seen.append(entry[key])


def check_section(name: str, value, source: str = "config"):
    """One statistics section (``comparisons``, ``correlations``, ``claims``, ``claims_file``,
    ``stats``) checked against the study schema, with its defaults filled in; ``None`` stands
    for an absent section (an empty ``stats:`` in YAML).

    Raises:
        AuditError: one line naming ``source`` and the key, e.g. ``comparisons[0].metrics``.
    """
    node = {"type": "object", "properties": {name: read_schema()["properties"][name]}}
    section = _validated(node, {} if value is None else {name: value}, source)[name]
    if name in _UNIQUE:
        _check_unique(name, section, source)
    return section


def check_stats_config(config: dict, source: str = "config") -> dict:
    """A stats config (``stats_sections`` written out, a user's, or a whole study) checked
    against the study schema's statistics sections, with their defaults filled in. The study's
    other keys may be present and are left to ``check_study``; any other key is an error.

    Raises:
        AuditError: one line naming ``source`` and the key.
    """
    if not isinstance(config, dict):
        raise AuditError(f"{source}: a stats config must be a mapping, got {type(config).__name__}")
    props = read_schema()["properties"]
    node = {"type": "object", "additionalProperties": False,
            "properties": {k: (v if k in STATS_SECTIONS else True) for k, v in props.items()}}
    config = _validated(node, {k: v for k, v in config.items() if not (k in STATS_SECTIONS and v is None)},
                        source)
    for name in _UNIQUE:
        _check_unique(name, config[name], source)
    return config


def read_claims_file(path: str | Path, taken=()) -> list[dict]:
    """The claims of a claims file (``configs/claims.yaml``), checked against the schema's
    ``claims_document`` with defaults filled in; ``taken`` are claim ids already used (the
    study's own claims), which the file's must not repeat.

    Raises:
        AuditError: one line naming the file and the key (``claims[3].expect``).
    """
    path = Path(path)
    try:
        data = yamlfile.load(path)
    except FileNotFoundError:
        raise AuditError(f"claims file not found: {path}") from None
    claims = _validated({"$ref": "#/$defs/claims_document"}, data, str(path))["claims"]
    _check_unique("claims", claims, str(path), taken)
    return claims


def check_study(config: dict, source: str = "config", base: str | Path | None = None) -> dict:
    """Validate a study config and return a copy with all schema defaults filled in and the
    paths of its own corpora (``data.files``) resolved against ``base`` (the workflow
    directory; default the working directory).

    Raises:
        AuditError: one line naming the source file and the offending key.
    """
    from audit.data.user import check_user_corpora

    if not isinstance(config, dict):
        raise AuditError(f"{source}: a study config must be a mapping, got {type(config).__name__}")
    schema = read_schema()
    config = _validated(schema, config, source)
    check_user_corpora(config, source, base)
    _check_tokenizer(config, source)
    config["heads"] = expand_grids(config["heads"], source)
    check_arms(config, schema, source)
    if isinstance(config["seeds"], dict):  # a sequential schedule (audit/stats/sequential/schedule.py)
        check_schedule(config, source)
    for name in _UNIQUE:
        _check_unique(name, config[name], source)
    if needs_model_check(config):
        from audit.model.check import check_models   # imports torch: only for the studies that need it

        check_models(config, source)
    return config


# looks of the default design, chosen by simulation with its HSD(gamma 0) spending (docs/statistics.md
# "Benchmarks", `python -m audit bench sequential --compare`); stopping.Design's defaults too
DEFAULT_LOOKS = {"initial": 4, "step": 4, "max": 30}


def check_schedule(config: dict, source: str = "config") -> None:
    """What the schema cannot say about a sequential schedule.

    Raises:
        AuditError: one line naming the key: max below initial, or no comparisons to decide.

    Fills the default looks (``DEFAULT_LOOKS``) the mapping leaves out, in place.
    """
    spec = config["seeds"]
    for key, value in DEFAULT_LOOKS.items():   # `seeds: {}` is the default design
        spec.setdefault(key, value)
    if spec["max"] < spec["initial"]:
        raise AuditError(f"{source}: config key seeds.max: must be >= seeds.initial "
                         f"({spec['max']} < {spec['initial']})")
    if config["data"]["corpora"] and not config.get("comparisons"):
        raise AuditError(f"{source}: config key seeds: a sequential schedule needs a comparisons "
                         "section (its interim analyses decide those comparisons)")


def _check_tokenizer(config: dict, source: str) -> None:
    """``data.tokenizer: bpe`` needs ``data.vocab_size`` (K subword tokens, at least the 256 bytes and
    ``<eos>``: ``audit.data.bpe.MIN_VOCAB``, repeated here so the check stays torch- and tokenizers-free)."""
    if not is_bpe(config):
        return
    size = config["data"]["vocab_size"]
    if size is None:
        raise AuditError(f"{source}: config key data.vocab_size is required with data.tokenizer: bpe "
                         "(the number of subword tokens, e.g. 10000)")
    if size < 257:
        raise AuditError(f"{source}: config key data.vocab_size: {size} is below 257, the byte-level BPE's "
                         "256 bytes and <eos> (data.tokenizer: bpe)")


def load_study(path: str | Path) -> dict:
    """Read, validate and fill a study config file."""
    path = Path(path)
    if not path.is_file():
        raise AuditError(f"config file not found: {path}")
    return check_study(yamlfile.load(path), str(path))


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
        claims += read_claims_file(path, taken=[c["id"] for c in claims])
    return {"study": config["study"], "comparisons": config["comparisons"],
            "correlations": config["correlations"], "claims": claims, "stats": config["stats"],
            "published": config.get("published"), "evidence": config.get("evidence") or []}


def write_yaml(data: dict, path: str | Path) -> None:
    """Write ``data`` as YAML atomically."""
    from audit.files import atomic_write_text

    atomic_write_text(yaml.safe_dump(data, sort_keys=False), Path(path))
