"""Planning traits of heads and bodies, read from their classes without torch.

``head_traits(name)`` and ``body_traits(name)`` answer for a registry name from the torch-free
traits class the built-in class inherits (``heads.py``, ``bodies.py``), and for an import path
"pkg.mod:Class" from the class itself (``audit.model.heads.head_class``,
``audit.model.bodies.body_class``: its own members, the defaults behind them). Built-in and
outside parts thus answer through the same members; only an outside part imports torch, which
validating it has already done.
"""

from __future__ import annotations

from audit.errors import AuditError
from audit.model.importpath import is_import_path
from audit.model.traits import bodies, heads

HEAD_TRAITS = {cls.name: cls for cls in heads.BUILT_IN}
BODY_TRAITS = {cls.name: cls for cls in bodies.BUILT_IN}


def head_traits(name: str) -> type:
    """The class that answers the planning traits of the head ``name`` (a registry name or an
    import path)."""
    if is_import_path(name):
        from audit.model.heads import head_class

        return head_class(name)
    if name not in HEAD_TRAITS:
        raise AuditError(f"unknown head {name!r}; known heads: {', '.join(sorted(HEAD_TRAITS))}")
    return HEAD_TRAITS[name]


def body_traits(name: str) -> type:
    """The class that answers the planning traits of the body ``name`` (a registry name or an
    import path)."""
    if is_import_path(name):
        from audit.model.bodies import body_class

        return body_class(name)
    if name not in BODY_TRAITS:
        raise AuditError(f"unknown body {name!r}; known bodies: {', '.join(sorted(BODY_TRAITS))}")
    return BODY_TRAITS[name]


def defaulted(cls: type, names: tuple[str, ...], defaults: type) -> list[str]:
    """The members of ``names`` that ``cls`` takes from ``defaults`` (declares nowhere else)."""
    return [n for n in names if next(c for c in cls.__mro__ if n in c.__dict__) is defaults]
