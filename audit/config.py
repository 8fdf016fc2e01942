"""Study configurations: validation against ``configs/schema.yaml`` and per-run settings.

The schema holds every default and every structural check. ``check_study`` reports the first
problem as one line naming the file and the key, then fills the defaults (the jsonschema recipe
Snakemake's ``validate`` uses too). The statistics sections live under the schema's ``$defs``:
``check_section`` checks one of them (the stats tables call it on the config they are given),
``check_stats_config`` a whole stats config file, ``read_claims_file`` a claims file; what a
schema cannot say (unique names) is checked beside. ``schema_defaults`` hands a section's
defaults to code that needs them at import (``ModelConfig``, the stats ``Settings``), without
torch. ``run_settings`` cuts out of a
study exactly what one (corpus, head, seed) run depends on; ``train_settings`` of it is the train
rule's ``params`` and its ``evaluate`` section the evaluate rule's, so that each rule reruns only
when its own settings change.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
from pathlib import Path

import jsonschema
import yaml

from audit import yamlfile
from audit.errors import AuditError
from audit.schema import read_schema, schema_defaults

# train settings that hold for the whole study (one GPU pool): an arm may not override them, and
# they stay out of a run's settings, so changing them never makes finished runs look out of date
STUDY_WIDE_TRAIN_KEYS = ("runs_per_gpu", "oom_retries", "gpu_memory_gb", "gpu_memory_margin")
# run-settings keys only the evaluate job reads: out of the train job's params (``train_settings``)
EVALUATE_KEYS = ("evaluate",)
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
    _check_semantics(config, schema, source)
    if isinstance(config["seeds"], dict):  # a sequential schedule (audit/stats/sequential/schedule.py)
        check_schedule(config, source)
    for name in _UNIQUE:
        _check_unique(name, config[name], source)
    if needs_model_check(config):
        from audit.model.check import check_models   # imports torch: only for the studies that need it

        check_models(config, source)
    return config


def needs_model_check(config: dict) -> bool:
    """Whether ``check_study`` builds the arms on torch's meta device (``audit.model.check``): a
    study with language-model runs and an arm whose head or body is an import path, or a
    ``softmax_matched`` arm (its size is solved by building models). Torch-free: a study of
    built-in parts without matching is checked without importing torch."""
    from audit.model.importpath import is_import_path

    if not config["data"]["corpora"]:
        return False
    bodies = [_arm_body(config, entry) for entry in config["heads"]]
    return any(matches_capacity(entry["head"]) or is_import_path(entry["head"]) or is_import_path(body)
               for entry, body in zip(config["heads"], bodies))


def _arm_body(config: dict, entry: dict) -> str:
    """The body of one arm: its own ``model.body``, the study's, else the schema's default."""
    return {**config["model"], **entry.get("model", {})}.get("body", schema_defaults("model", unfilled=True)["body"])


def matches_capacity(head: str) -> bool:
    """Whether the built-in head ``head`` sizes itself to another arm's parameter count (its
    ``matches_capacity`` trait, read without torch; an import path: False)."""
    from audit.model.heads.traits import HEAD_TRAITS

    return bool(getattr(HEAD_TRAITS.get(head), "matches_capacity", False))


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
    from audit.model.heads.traits import HEAD_OPTIONS

    out = []
    for i, entry in enumerate(entries):
        grid = entry.get("grid")
        if not grid:
            out.append(entry)
            continue
        head = entry_head(entry)
        known = HEAD_OPTIONS.get(head)  # an outside head's options are checked on each arm
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


def entry_head(entry: dict) -> str:
    """The head of a head entry: its ``import`` path, else its ``head``, else its name."""
    return entry.get("import") or entry.get("head") or entry["name"]


def _check_outside_head(entry: dict, i: int, source: str) -> None:
    """Load an entry's head from its import path and check the class and the options against
    the head protocol (audit.model.importpath), so a bad one fails before any job runs."""
    from audit.model.importpath import check_head_class, check_head_options, load_class

    key = f"{source}: config key heads[{i}].{'import' if 'import' in entry else 'head'}"
    cls = load_class(entry["head"], key)
    check_head_class(cls, key)
    check_head_options(cls, entry["options"], f"{source}: config key heads[{i}].options")


def _check_body_and_training(config: dict, entry: dict, i: int, source: str) -> None:
    """One arm's body (a built-in name, or an import path whose class meets the body protocol)
    and the training settings it needs: AdamW without averaging, a Transformer's chunks no longer
    than its context."""
    from audit.model.importpath import check_body_class, is_import_path, load_class
    from audit.model.bodies.traits import BODY_NAMES, body_traits

    model = {**config["model"], **entry.get("model", {})}
    train = {**config["train"], **entry.get("train", {})}
    where = lambda section, key: (f"{source}: config key heads[{i}].{section}.{key}"  # noqa: E731
                                  if key in entry.get(section, {}) else f"{source}: config key {section}.{key}")
    body = _arm_body(config, entry)
    if is_import_path(body):
        check_body_class(load_class(body, where("model", "body")), where("model", "body"))
    elif body not in BODY_NAMES:
        raise AuditError(f"{where('model', 'body')}: unknown body {body!r}; known bodies: {', '.join(BODY_NAMES)} "
                         f"(or an import path 'package.module:Class')")
    if model.get("body_options") and not is_import_path(body):
        raise AuditError(f"{where('model', 'body_options')}: body {body!r} is built in and takes its settings from "
                         f"the model section's keys; body_options are an outside body's own (docs/bodies.md)")
    if train.get("optimizer", "sgd") == "adamw" and train["asgd"] != "none":
        raise AuditError(f"{where('train', 'asgd')}: must be none with optimizer adamw (averaging is NT-ASGD's, "
                         f"for SGD), got {train['asgd']!r}")
    context = None if is_import_path(body) else body_traits(body).longest_chunk(model)
    longest = train["bptt"] + (train["max_seq_len_delta"] if train["variable_bptt"] else 0)
    if context is not None and longest > context:
        raise AuditError(f"{where('train', 'bptt')}: chunks of up to {longest} tokens exceed the {body}'s "
                         f"model.context_size={context} (set train.variable_bptt false, a shorter bptt or "
                         f"a longer context)")


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


def _check_semantics(config: dict, schema: dict, source: str) -> None:
    """What a schema cannot say: known head names, unique labels, valid overrides."""
    from audit.model.importpath import is_import_path
    from audit.model.heads.traits import HEAD_OPTIONS

    names = [entry["name"] for entry in config["heads"]]
    for i, entry in enumerate(config["heads"]):
        if "import" in entry and entry.get("head", entry["import"]) != entry["import"]:
            raise AuditError(f"{source}: config key heads[{i}].import: give a head by registry name (head) "
                             f"or by import path (import), not both")
        entry["head"] = entry_head(entry)
        if names.count(entry["name"]) > 1:
            raise AuditError(f"{source}: config key heads[{i}].name: duplicate head name {entry['name']!r}")
        if is_import_path(entry["head"]):
            _check_outside_head(entry, i, source)
        elif "import" in entry:
            raise AuditError(f"{source}: config key heads[{i}].import: import path {entry['import']!r} "
                             f"must look like 'package.module:Class'")
        elif entry["head"] not in HEAD_OPTIONS:
            raise AuditError(f"{source}: config key heads[{i}].head: unknown head {entry['head']!r}; "
                             f"known heads: {', '.join(sorted(HEAD_OPTIONS))} (or an import path "
                             f"'package.module:Class')")
        else:
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
                # an override obeys the section's own rule for that key (no defaults filled here:
                # an arm's overrides must not reset the study's values), e.g. no `epochs: 0`
                error = jsonschema.exceptions.best_match(
                    jsonschema.Draft202012Validator(allowed[key]).iter_errors(entry[section][key]))
                if error is not None:
                    raise AuditError(f"{source}: config key heads[{i}].{section}.{key}: "
                                     f"{' '.join(error.message.split())}")
                if key in STUDY_WIDE_TRAIN_KEYS and section == "train":
                    raise AuditError(f"{source}: config key heads[{i}].train.{key}: a study-wide setting; "
                                     f"set it in the top-level train section")
        _check_body_and_training(config, entry, i, source)
        target = entry["options"].get("match")
        if matches_capacity(entry["head"]):
            if target not in names or target == entry["name"]:
                raise AuditError(f"{source}: config key heads[{i}].options.match: must name another head, "
                                 f"got {target!r}")
            _check_matched_options(entry["options"], f"{source}: config key heads[{i}].options")


def _check_matched_options(options: dict, key: str) -> None:
    """softmax_matched's options against the schema's ``$defs/softmax_matched_options`` (no
    defaults written: they are x-default, applied by the solver)."""
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(
        read_schema()["$defs"]["softmax_matched_options"]).iter_errors(options))
    if error is not None:
        where = "".join(f".{p}" for p in error.absolute_path)
        raise AuditError(f"{key}{where}: {' '.join(error.message.split())}")


def load_study(path: str | Path) -> dict:
    """Read, validate and fill a study config file."""
    path = Path(path)
    if not path.is_file():
        raise AuditError(f"config file not found: {path}")
    return check_study(yamlfile.load(path), str(path))


def head_entry(config: dict, name: str) -> dict:
    for entry in config["heads"]:
        if entry["name"] == name:
            return entry
    raise AuditError(f"no head named {name!r} in study {config['study']!r}")


def is_bpe(config: dict) -> bool:
    """Whether the study's runs train on a byte-level BPE vocabulary (``data.tokenizer: bpe``;
    the key is x-default ``word``, never written into a config, so older studies stay as they were)."""
    return config["data"].get("tokenizer", "word") == "bpe"


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


def run_settings(config: dict, corpus: str, name: str, seed: int) -> dict:
    """Everything one run's train and evaluate jobs depend on, as a JSON-serialisable dict (the
    jobs' resources are sized from it). The train job's params are ``train_settings`` of it, the
    evaluate job's ``settings["evaluate"]``. A run on a user corpus (``data.files``) also has
    ``user_corpus``: its files' SHA-256 and token counts (``audit.data.user.settings_entry``)."""
    from audit.data.user import is_user_corpus, settings_entry as user_settings_entry

    entry = head_entry(config, name)
    match = entry["options"].get("match") if matches_capacity(entry["head"]) else None
    settings = {
        "study": config["study"],
        "corpus": corpus,
        "name": name,
        "seed": int(seed),
        "head": entry["head"],
        "options": entry["options"],
        "model": {**config["model"], **entry.get("model", {})},
        "train": {k: v for k, v in {**config["train"], **entry.get("train", {})}.items()
                  if k not in STUDY_WIDE_TRAIN_KEYS},
        "max_tokens": config["data"]["max_tokens"],
        "evaluate": config["evaluate"],
    }
    if config["data"]["vocab_size"] is not None:  # only then, so full-vocabulary runs keep their settings
        settings["vocab_size"] = config["data"]["vocab_size"]
    if is_bpe(config):  # only then, so word-vocabulary runs keep their settings
        settings["tokenizer"] = "bpe"
    if is_user_corpus(config, corpus):  # only then, so the built-in corpora's runs keep their settings
        settings["user_corpus"] = user_settings_entry(config["data"]["files"][corpus])
    if "grid_point" in entry:  # only grid arms carry these, so other runs' settings stay as they were
        settings["grid_point"], settings["arm_group"] = entry["grid_point"], entry["arm_group"]
    if match:  # the capacity-matched softmax is solved against the named arm's model
        target = head_entry(config, match)
        settings["match"] = {"head": target["head"], "options": target["options"],
                             "model": {**config["model"], **target.get("model", {})}}
    return settings


def train_settings(settings: dict) -> dict:
    """``run_settings`` less what only evaluation reads (``EVALUATE_KEYS``): the train rule's params
    and the settings ``python -m audit train`` records, so that changing an ``evaluate:`` option
    reruns the evaluate jobs and never retrains a run."""
    return {k: v for k, v in settings.items() if k not in EVALUATE_KEYS}


def settings_text(settings: dict) -> str:
    """Run settings as canonical JSON: the same settings always give the same string."""
    return json.dumps(settings, sort_keys=True)


def settings_json(config: dict, corpus: str, name: str, seed: int) -> str:
    """The train rule's ``--settings``: ``train_settings`` of ``run_settings`` as canonical JSON."""
    return settings_text(train_settings(run_settings(config, corpus, name, int(seed))))


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
