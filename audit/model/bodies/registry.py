"""Bodies: what turns token ids into the features a head reads, by name or import path.

``model.body`` names a built-in body (``awd_lstm``, the default; ``transformer``) or a class
from outside the project, "pkg.mod:Class" (docs/bodies.md). The body protocol
(``BodyProtocol``): a ``torch.nn.Module`` built as ``cls(cfg, embedding)`` from the
``ModelConfig`` and the model's V x d input embedding (tied to the head's decoder) with

- ``d_out``: the size of the features, the head's d_in;
- ``init_hidden(batch_size)``: the streaming state before the first token;
- ``forward(words, hidden)``: ids (T, B) to ``(dropped, raw, hidden)``: the features (T, B,
  d_out) after and before the body's output dropout (the head reads ``dropped``; AR and TAR
  penalise them) and the state to pass with the next chunk of the same streams.

Optional (``BodyDefaults``): ``init_embedding(weight)``, ``output_box`` (a box that holds every
feature vector the body can output at evaluation, for ``audit.evaluate.argmax``: a half-width a
for [-a, a]^d_out, or a pair (lo, hi) of per-coordinate bounds; None when the body states none),
``output_rank`` (the dimension of the affine span of the features, up to a constant shift: d_out
when they fill it, less under a final normalisation; the rank the hidden-gap control of a
softmax head expects, ``audit.evaluate.hidden_gap.control``; None when the body states none)
and ``name``. Parameters
are counted with the model's (``audit.model.params``), the shared embedding once. Planning
traits (``audit.model.bodies.traits.BodyTraits``: ``param_count``, ``macs_per_token``,
``train_floats``, ``eval_floats``, ``host_train_floats``, ``state_copies``, ``eval_window``,
classmethods of the run's sizes) tell the planners what a token costs; a body that lacks them
is planned by the stated conservative rule (docs/bodies.md, "Planning traits").
"""

from __future__ import annotations

import functools
from typing import Protocol, runtime_checkable

import torch
import torch.nn as nn

from audit.errors import AuditError
from audit.model.bodies.awd_lstm import AWDLSTMBody
from audit.model.bodies.transformer import TransformerBody
from audit.model.importpath import check_body_class, is_import_path, load_class
from audit.model.bodies.traits import BODY_TRAITS, BodyTraits

BODIES: dict[str, type[nn.Module]] = {cls.name: cls for cls in (AWDLSTMBody, TransformerBody)}
# the torch registry and the torch-free one (what config validation and the planners read) agree
assert BODIES.keys() == BODY_TRAITS.keys() and all(issubclass(BODIES[n], BODY_TRAITS[n]) for n in BODIES), \
    "audit.model.bodies.traits.BUILT_IN and the body classes disagree"


@runtime_checkable
class BodyProtocol(Protocol):
    d_out: int

    def init_hidden(self, batch_size: int): ...

    def forward(self, words: torch.Tensor, hidden): ...


class BodyDefaults(BodyTraits):
    """The optional members of the body protocol for a class that lacks them (the planning
    traits: ``BodyTraits``'s stated conservative rule)."""

    output_box = None
    output_rank = None

    def init_embedding(self, weight: torch.Tensor) -> None:
        nn.init.uniform_(weight, -0.1, 0.1)


@functools.cache
def _outside(path: str) -> type:
    key = f"model.body {path!r}"
    cls = load_class(path, key)
    check_body_class(cls, key)
    attrs = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__,
             "name": cls.__dict__.get("name", path)}
    return type(cls.__name__, (cls, BodyDefaults), attrs)


def body_class(name: str) -> type:
    """The class of a registry name or an import path "pkg.mod:Class"."""
    if is_import_path(name):
        return _outside(name)
    if name not in BODIES:
        raise AuditError(f"unknown body {name!r}; known bodies: {', '.join(sorted(BODIES))} "
                         f"(or an import path 'package.module:Class')")
    return BODIES[name]


def build_body(name: str, cfg, embedding: nn.Embedding) -> nn.Module:
    """Build the body ``name`` on ``cfg`` and the model's ``embedding``; it must give ``d_out``."""
    body = body_class(name)(cfg, embedding)
    if not isinstance(getattr(body, "d_out", None), int):
        raise AuditError(f"model.body {name!r}: the built body has no integer d_out (its feature size)")
    return body
