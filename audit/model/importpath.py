"""Heads and bodies named by import path ("pkg.mod:Class"): loading and checking the class.

Torch-free itself (config validation runs while Snakemake parses the workflow); only the module
named by the path is imported, and it may import torch. Every failure is one AuditError line
naming the config key and the reason, raised at config-check time, before any job runs.
"""

from __future__ import annotations

import importlib
import inspect

from audit.errors import AuditError

# The optional members of the head protocol (audit.model.heads.base.HeadProtocol) that must be
# callable when a class defines them.
HEAD_METHODS = ("check_options", "transformed_logits", "from_logits", "extra_param_groups", "output_layer",
                "target_log_probs",
                "layer_logits")   # evaluation traits


def lazy_exports(package: str, table: dict[str, str], names: dict):
    """PEP 562 ``(__getattr__, __dir__)`` for ``package``: each public name of ``table`` (name ->
    submodule) is imported on first access, so that the package's torch-free submodules (the
    traits) import without torch. ``names``: the package's own ``globals()``."""
    def __getattr__(name: str):
        if name in table:
            return getattr(importlib.import_module(f"{package}.{table[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(names) | set(table))

    return __getattr__, __dir__


def registered_traits(kind: str, name: str, table: dict[str, type], outside) -> type:
    """The class answering the traits of the ``kind`` (head or body) ``name``: ``table[name]``
    for a built-in, ``outside(name)`` for an import path (which imports torch, as validating the
    path already has).

    Raises:
        AuditError: an unknown built-in name (with the known ones).
    """
    if is_import_path(name):
        return outside(name)
    if name not in table:
        plural = {"body": "bodies"}.get(kind, f"{kind}s")
        raise AuditError(f"unknown {kind} {name!r}; known {plural}: {', '.join(sorted(table))}")
    return table[name]


def is_import_path(name: str) -> bool:
    """True for "pkg.mod:Class" (a registry name never holds a colon)."""
    return isinstance(name, str) and ":" in name


def load_class(path: str, key: str) -> type:
    """The class named by ``path`` ("pkg.mod:Class", the attribute may be dotted).

    Raises:
        AuditError: a malformed path, a module that fails to import, a missing attribute or
            one that is not a class; the message names ``key``.
    """
    module_name, _, attr = path.partition(":")
    if not module_name or not attr or ":" in attr:
        raise AuditError(f"{key}: import path {path!r} must look like 'package.module:Class'")
    try:
        obj = importlib.import_module(module_name)
    except Exception as err:  # noqa: BLE001 - any failure of an outside module is a config error
        raise AuditError(f"{key}: cannot import module {module_name!r} of {path!r} "
                         f"({type(err).__name__}: {err})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AuditError(f"{key}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not inspect.isclass(obj):
        raise AuditError(f"{key}: {path!r} is not a class (got {type(obj).__name__})")
    return obj


def check_module_class(cls: type, key: str, what: str, required: tuple[str, ...], arguments: int = 1) -> None:
    """Refuse a class that is no ``torch.nn.Module`` with the ``required`` methods implemented,
    or whose constructor cannot take ``arguments`` positional arguments."""
    path = f"{cls.__module__}:{cls.__qualname__}"
    if not all(callable(getattr(cls, m, None)) for m in ("parameters", "state_dict", "train")):
        raise AuditError(f"{key}: {what} {path} does not meet the {what} protocol: not a torch.nn.Module")
    for method in required:
        found = getattr(cls, method, None)
        # nn.Module's own forward is a placeholder that raises NotImplementedError
        if not callable(found) or getattr(found, "__name__", "") == "_forward_unimplemented":
            raise AuditError(f"{key}: {what} {path} does not meet the {what} protocol: no {method}() method")
    try:
        inspect.signature(cls).bind(*[object()] * arguments)
    except (TypeError, ValueError):
        count = {1: "one argument", 2: "two arguments (cfg, embedding)"}[arguments]
        raise AuditError(f"{key}: {what} {path} does not meet the {what} protocol: its constructor must "
                         f"take {count}") from None


def check_head_class(cls: type, key: str) -> None:
    """Refuse a class that does not meet the head protocol (one line naming ``key``)."""
    check_module_class(cls, key, "head", ("forward",))
    path = f"{cls.__module__}:{cls.__qualname__}"
    for method in HEAD_METHODS:
        if hasattr(cls, method) and not callable(getattr(cls, method)):
            raise AuditError(f"{key}: head {path} does not meet the head protocol: {method} is not callable")
    defaults = getattr(cls, "defaults", None)
    if defaults is not None and not isinstance(defaults, dict):
        raise AuditError(f"{key}: head {path} does not meet the head protocol: defaults must be a dict "
                         f"of options, got {type(defaults).__name__}")


def check_head_options(cls: type, options: dict, key: str) -> dict:
    """The options with the head's defaults filled in, checked against its schema.

    Args:
        cls: a class that passed ``check_head_class``.
        options: the entry's options.
        key: the config key of the entry's options, e.g. "configs/x.yaml: config key heads[2].options".

    Raises:
        AuditError: an option not in ``cls.defaults`` or a value ``cls.check_options`` refuses.
    """
    defaults = getattr(cls, "defaults", None)
    if defaults is not None:
        unknown = sorted(set(options) - set(defaults))
        if unknown:
            raise AuditError(f"{key}.{unknown[0]}: unknown option of head {cls.__qualname__}; "
                             f"known options: {', '.join(sorted(defaults)) or 'none'}")
    merged = {**(defaults or {}), **options}
    check = getattr(cls, "check_options", None)
    if check is not None:
        try:
            check(merged)
        except (ValueError, TypeError, AuditError) as err:
            raise AuditError(f"{key}: rejected by head {cls.__qualname__}: {err}") from None
    return merged


def check_body_class(cls: type, key: str) -> None:
    """Refuse a class that does not meet the body protocol (audit.model.bodies), one line
    naming ``key``: a ``torch.nn.Module`` built as ``cls(cfg, embedding)`` with ``init_hidden``
    and ``forward``."""
    check_module_class(cls, key, "body", ("init_hidden", "forward"), arguments=2)
