"""The registry of the output heads (torch): one line per built-in head class.

``HEADS`` maps each built-in name to its class; ``head_class`` also resolves an import path
"pkg.mod:Class" (a head from outside the project, docs/heads.md) and ``build_head`` builds
either. Every head the rest of the project sees has the members of ``HeadProtocol``:
``head_class`` fills the optional ones an outside class lacks from ``HeadDefaults``.
"""

from __future__ import annotations

import functools

from audit.errors import AuditError
from audit.model.heads.base import OPTIONAL_MEMBERS, Head, HeadDefaults, HeadSpec
from audit.model.heads.elementwise import GSS, PLIF, PLIFFrozen, SigSoftmax
from audit.model.heads.mixtures import Mixtape, MoC, MoS, MoSUniform
from audit.model.heads.softmax import Softmax, SoftmaxMatched
from audit.model.importpath import HEAD_METHODS, check_head_class, is_import_path, load_class
from audit.model.heads.traits import HEAD_TRAITS

__all__ = ["HEADS", "build_head", "head_class"]

HEADS: dict[str, type[Head]] = {
    cls.name: cls
    for cls in (Softmax, SigSoftmax, GSS, PLIF, PLIFFrozen, MoS, MoC, MoSUniform, Mixtape, SoftmaxMatched)
}
# the torch registry and the torch-free one (what config validation and the planners read) agree
assert HEADS.keys() == HEAD_TRAITS.keys() and all(issubclass(HEADS[n], HEAD_TRAITS[n]) for n in HEADS), \
    "audit.model.heads.traits.BUILT_IN and the head classes disagree"


@functools.cache
def _outside(path: str) -> type:
    """The class at ``path``, checked, with ``HeadDefaults`` behind it when it lacks any optional
    member (one class per path, so repeated builds share it)."""
    key = f"head {path!r}"
    cls = load_class(path, key)
    check_head_class(cls, key)
    attrs = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
    if "name" not in cls.__dict__:
        attrs["name"] = path  # error messages and logs name the head by its path
    if all(hasattr(cls, m) for m in HEAD_METHODS + OPTIONAL_MEMBERS) and "name" in cls.__dict__:
        return cls
    # cls first in the MRO: its own members win, HeadDefaults only fills the gaps
    return type(cls.__name__, (cls, HeadDefaults), attrs)


def head_class(name: str) -> type:
    """The class of a registry name or an import path "pkg.mod:Class".

    Raises:
        AuditError: an unknown name (with the list of known ones), or an import path that does
            not load a class meeting the head protocol.
    """
    if is_import_path(name):
        return _outside(name)
    if name not in HEADS:
        raise AuditError(f"unknown head {name!r}; known heads: {', '.join(sorted(HEADS))}")
    return HEADS[name]


def build_head(name: str, spec: HeadSpec) -> Head:
    """Build the head registered as ``name`` (or at the import path ``name``) on ``spec``."""
    return head_class(name)(spec)
