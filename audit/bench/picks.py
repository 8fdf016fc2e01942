"""Which registered heads and bodies a benchmark or a GPU check runs, chosen by their traits.

The benches and ``python -m audit gpu-check`` time and check the built-in heads against a few
reference heads: the plain softmax (the baseline every ratio is to), a softmax map that lifts
the rank, PLIF's trained knot table and a mixture of softmaxes. Each is picked here from the
head registry (``audit.model.heads.HEADS``, in its order) by the traits the head declares, so
no module of ``audit.bench`` or ``audit.gpucheck`` keeps its own list of names, and a registry
that ever held two heads answering one description fails loudly instead of picking either.
Bodies likewise: the schema's default body and the registry (``audit.model.bodies.BODIES``).
"""

from __future__ import annotations

import functools

from audit.errors import AuditError


def _registry() -> dict:
    from audit.model.heads import HEADS

    return HEADS


def _options(cls) -> dict:
    return dict(cls.defaults or {})


def _only(what: str, test) -> str:
    """The one registered head for which ``test(cls)`` holds.

    Raises:
        AuditError: none or several do (names them).
    """
    names = [name for name, cls in _registry().items() if test(cls)]
    if len(names) != 1:
        raise AuditError(f"head registry: {len(names)} heads are {what} ({', '.join(names) or 'none'}); expected one")
    return names[0]


@functools.cache
def baseline() -> str:
    """The plain softmax, log_softmax(W h + b) with no options: every ratio's denominator."""
    return _only("a plain softmax without options", lambda c: c.plain_softmax and not _options(c))


@functools.cache
def rank_lifting() -> str:
    """The order-preserving map of the logits without options that is not the plain softmax
    (SigSoftmax): its log-P exceeds the softmax's rank bound d + 2."""
    return _only("an order-preserving map without options other than the plain softmax",
                 lambda c: c.order_preserving and not c.plain_softmax and not _options(c))


@functools.cache
def trained_knots() -> str:
    """The head with a trained table of knots (PLIF; its frozen control trains none)."""
    return _only("a head with trained knots", lambda c: "knots" in _options(c) and getattr(c, "trainable", False))


@functools.cache
def latent_mixture() -> str:
    """The mixture of K > 1 softmaxes with a learned prior over them (MoS)."""
    return _only("a mixture of softmaxes with a learned prior",
                 lambda c: c.components(_options(c)) > 1 and getattr(c, "uses_prior", False))


def standalone_heads() -> list[str]:
    """Every registered head that a one-arm study can train, in registry order: a head that
    ``matches_capacity`` (sized to another arm's parameter count) has no arm to match there."""
    return [name for name, cls in _registry().items() if not cls.matches_capacity]


def default_body() -> str:
    """The body a study gets when it names none (the schema's default)."""
    from audit.schema import schema_defaults

    return schema_defaults("model", unfilled=True)["body"]


def bodies() -> list[str]:
    """Every registered body, in registry order."""
    from audit.model.bodies import BODIES

    return list(BODIES)


# LK's published GSS shape (c, k) = (-1.5, 2.5) (audit/data/published.csv, LK-SM Table 1), off
# the defaults (0, 2), where the shape's both factors act: every head with the options c and k
# is run at it
PUBLISHED_SHAPE = {"c": -1.5, "k": 2.5}


def shape_options(name: str) -> dict:
    """``PUBLISHED_SHAPE`` for a head (a registry name or an import path) whose options include
    c and k, else {}."""
    from audit.model.heads import head_class

    options = _options(head_class(name))
    return dict(PUBLISHED_SHAPE) if set(PUBLISHED_SHAPE) <= set(options) else {}
