"""A study's arms: head entries, their grids expanded, and what a schema cannot say about them.

``expand_grids`` turns an entry with a ``grid`` into one arm per point; ``check_arms`` checks each
arm's head (a built-in name with known options, or an import path meeting the head protocol), its
``model``/``train`` overrides, its body and the training that body needs, and a capacity-matched
softmax's target. Torch is imported only where an outside head or body is loaded.
"""

from __future__ import annotations

import copy
import itertools

import jsonschema

from audit.config.training import STUDY_WIDE, TrainSettings
from audit.errors import AuditError
from audit.schema import read_schema, schema_defaults


# train settings that hold for the whole study (one GPU pool): an arm may not override them, and
# they stay out of a run's settings, so changing them never makes finished runs look out of date
STUDY_WIDE_TRAIN_KEYS = STUDY_WIDE


def _arm_body(config: dict, entry: dict) -> str:
    """The body of one arm: its own ``model.body``, the study's, else the schema's default."""
    return {**config["model"], **entry.get("model", {})}.get("body", schema_defaults("model", unfilled=True)["body"])


def matches_capacity(head: str) -> bool:
    """Whether the built-in head ``head`` sizes itself to another arm's parameter count (its
    ``matches_capacity`` trait, read without torch; an import path: False)."""
    from audit.model.heads.traits import HEAD_TRAITS

    return bool(getattr(HEAD_TRAITS.get(head), "matches_capacity", False))


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


def head_entry(config: dict, name: str) -> dict:
    """The arm named ``name`` of a checked study."""
    for entry in config["heads"]:
        if entry["name"] == name:
            return entry
    raise AuditError(f"no head named {name!r} in study {config['study']!r}")


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
    typed = TrainSettings.of(train)
    if typed.optimizer == "adamw" and typed.asgd != "none":
        raise AuditError(f"{where('train', 'asgd')}: must be none with optimizer adamw (averaging is NT-ASGD's, "
                         f"for SGD), got {typed.asgd!r}")
    refusal = typed.graphs_refusal()
    if refusal is not None:
        raise AuditError(f"{where('train', 'cuda_graphs')}: {refusal}")
    context = None if is_import_path(body) else body_traits(body).longest_chunk(model)
    longest = typed.longest_chunk
    if context is not None and longest > context:
        raise AuditError(f"{where('train', 'bptt')}: chunks of up to {longest} tokens exceed the {body}'s "
                         f"model.context_size={context} (set train.variable_bptt false, a shorter bptt or "
                         f"a longer context)")


def check_arms(config: dict, schema: dict, source: str) -> None:
    """What a schema cannot say of the arms (``config["heads"]``, grids expanded): known head
    names, unique names, valid overrides, bodies and their training, capacity-matching targets.

    Raises:
        AuditError: one line naming ``source`` and the key (``heads[2].options.match``).
    """
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
