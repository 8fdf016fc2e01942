"""Bodies: what turns token ids into the features a head reads, by name or import path.

``model.body`` names a built-in body (``awd_lstm``, the default; ``transformer``) or a class
from outside the project, "pkg.mod:Class" (docs/bodies.md). The body protocol
(``BodyProtocol``): a ``torch.nn.Module`` built as ``cls(cfg, embedding)`` from the
body's own config (its ``Config``: a dataclass of the ``model`` section's keys it reads, filled by
``body_config``) and the model's V x d input embedding (tied to the head's decoder) with

- ``d_out``: the size of the features, the head's d_in;
- ``init_hidden(batch_size)``: the streaming state before the first token;
- ``forward(words, hidden)``: ids (T, B) to ``(dropped, raw, hidden)``: the features (T, B,
  d_out) after and before the body's output dropout (the head reads ``dropped``; AR and TAR
  penalise them) and the state to pass with the next chunk of the same streams.

Optional (``BodyDefaults``): ``Config`` (default ``SectionConfig``: every key of the ``model``
section, as outside bodies read it before bodies had configs of their own),
``init_embedding(weight)``, ``output_box`` (a box that holds every feature vector the body can
output at evaluation, for ``audit.evaluate.argmax``: a half-width a for [-a, a]^d_out, or a
pair (lo, hi) of per-coordinate bounds; None when the body states none),
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

import dataclasses
import functools
from typing import Protocol, runtime_checkable

import torch
import torch.nn as nn

from audit.errors import AuditError
from audit.model.bodies.awd_lstm import AWDLSTMBody
from audit.model.bodies.transformer import TransformerBody
from audit.model.importpath import check_body_class, is_import_path, load_class
from audit.model.bodies.traits import BODY_TRAITS, BodyTraits
from audit.schema import schema_defaults

BODIES: dict[str, type[nn.Module]] = {cls.name: cls for cls in (AWDLSTMBody, TransformerBody)}
# the torch registry and the torch-free one (what config validation and the planners read) agree
assert BODIES.keys() == BODY_TRAITS.keys() and all(issubclass(BODIES[n], BODY_TRAITS[n]) for n in BODIES), \
    "audit.model.bodies.traits.BUILT_IN and the body classes disagree"


@runtime_checkable
class BodyProtocol(Protocol):
    d_out: int

    def init_hidden(self, batch_size: int): ...

    def forward(self, words: torch.Tensor, hidden): ...


# the model keys that are the model's, not a body's: which body, the head's bias, an outside
# body's own settings (emb_size is both: the embedding's width, and d to any body that declares it)
MODEL_ONLY = ("body", "decoder_bias", "body_options")


def _section_config() -> type:
    """A frozen dataclass of every key of the schema's ``model`` section but ``MODEL_ONLY``, with
    the schema's defaults, and ``d_out`` (last_size or emb_size)."""
    defaults = {k: v for k, v in schema_defaults("model", unfilled=True).items() if k not in MODEL_ONLY}
    return dataclasses.make_dataclass(
        "SectionConfig", [(k, object, dataclasses.field(default=v)) for k, v in defaults.items()],
        namespace={"d_out": property(lambda self: self.last_size or self.emb_size),
                   "__doc__": "Every body setting of the model section (an outside body without a Config)."},
        frozen=True)


SectionConfig = _section_config()


class BodyDefaults(BodyTraits):
    """The optional members of the body protocol for a class that lacks them (the planning
    traits: ``BodyTraits``'s stated conservative rule)."""

    Config = SectionConfig
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


def body_config(name: str, section: dict):
    """The body ``name``'s ``Config`` from a flat ``model`` section: each field it declares that
    the section holds, the rest at the dataclass's defaults; keys of other bodies are not read."""
    config = body_class(name).Config
    if not dataclasses.is_dataclass(config):
        raise AuditError(f"model.body {name!r}: its Config must be a dataclass of its settings, got {config!r}")
    return config(**{f.name: section[f.name] for f in dataclasses.fields(config) if f.name in section})


def build_body(name: str, cfg, embedding: nn.Embedding) -> nn.Module:
    """Build the body ``name`` on its config ``cfg`` (``body_config``) and the model's
    ``embedding``; it must give ``d_out``."""
    body = body_class(name)(cfg, embedding)
    if not isinstance(getattr(body, "d_out", None), int):
        raise AuditError(f"model.body {name!r}: the built body has no integer d_out (its feature size)")
    return body
