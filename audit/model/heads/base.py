"""The head protocol: what every output head, built-in or from outside, is and may expose.

A head maps the body's output h, shape (T, B, d_in), to log-probabilities over the vocabulary,
shape (T, B, V), normalised over the last axis. Built-in heads subclass ``Head`` (a tied decoder
``l = W h + b`` and option checks); a head from outside the project may subclass it too or be
any ``torch.nn.Module`` meeting ``HeadProtocol``: the registry (``audit.model.heads``) checks it
with ``audit.model.importpath.check_head_class`` and fills the optional members it lacks from
``HeadDefaults``, so the trainer, the evaluator and the measurements see one interface. Sources
and deviations from the reference code of the built-in heads: shared/reference/protocol.md,
section 1. The guide for outside heads is docs/heads.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch
import torch.nn as nn
import torch.nn.functional as F

from audit.errors import AuditError
from audit.model.heads.traits import HeadTraits


@dataclass
class HeadSpec:
    """What a head is built from: the model it sits on and its options."""

    d_in: int                      # size of the body's output the head reads (d')
    embedding: nn.Embedding        # tied input/output embedding, V x d
    options: dict = field(default_factory=dict)  # head-specific options from the config
    decoder_bias: bool = True      # the bias adds one to the softmax log-P rank
    model: object = None           # the whole ModelConfig (None outside a language model)

    @property
    def vocab_size(self) -> int:
        return self.embedding.weight.shape[0]


@runtime_checkable
class HeadProtocol(Protocol):
    """The interface of a head. Required: built as ``cls(spec: HeadSpec)``, a ``torch.nn.Module``
    whose ``forward(h)`` maps (T, B, d_in) to log-probabilities (T, B, V) with the positions
    independent of each other (the Jacobian and the streaming evaluation rely on it).

    Optional (``HeadDefaults`` supplies them when a class lacks them):

    - ``defaults``: dict of the options the head accepts with their defaults (its options'
      schema: an option not in it is refused at config-check time); None accepts any option.
    - ``check_options(options)`` (classmethod): raise ValueError with the reason when an
      option's value is bad; called at config-check time with the defaults filled in.
    - ``transformed_logits(h)``: f(l), the logits after the head's element-wise map,
      (T, B, V), or None; its spectrum is measured as ``f_logits_*``.
    - ``from_logits(l)``: log-P from the decoder logits l = W h + b, or None (mixtures).
    - ``extra_param_groups()``: optimiser groups with their own settings; every other
      trainable parameter goes to the main group.
    - ``output_layer()``: (W (V, d), b (V,) or None), the output layer read by the measurements
      of a linear layer (argmaxability), or None when there is none.
    - ``target_log_probs(h, targets)``: log-P at the target words alone, (T, B), or None; the
      trainer's loss takes it when a head has a cheaper path to it than the full log-P
      (``mean_nll`` reads either).
    - ``projects_input``: True when the head reads a d_in different from the embedding size.
    - ``order_preserving``: True when log-P is one increasing function of the logits
      l = W h + b of ``output_layer()``, the same for every token (softmax, sigsoftmax, GSS,
      PLIF): then argmax log-P = argmax l, and the exact argmax test may read W and b alone.
      Default False: a per-token map (a scale exp(s_v) of its own per word) can make a token
      the argmax that W x + b never ranks first, so such heads get the witness search.
    - ``plain_softmax``: True when log-P is log_softmax(W h + b) of ``output_layer()``, no map
      in between (softmax, softmax_matched): its double-centred log-P then has the rank of the
      body's features (``output_rank`` of the body), the hidden-gap control
      (``audit.evaluate.hidden_gap.control``). Default False.

    Evaluation traits (``audit.evaluate``; defaults in ``HeadDefaults`` too):

    - ``argmax_box``: the box the input x of ``output_layer()`` lives in, whatever the body, for
      the exact argmax test of an ``order_preserving`` head: a half-width a ([-a, a]^d) or a pair
      (lo, hi) (``audit.evaluate.argmax.Box.of``). Default None: the layer reads the body's
      output h, so the test runs over the body's ``output_box``. MoC sets 1.0: its W reads xbar,
      a convex combination of tanh contexts, and ``order_preserving`` there means argmax log-P =
      argmax (W xbar + b).
    - ``layer_logits(h)``: h (..., d_in) to ``(l, log_p_of)``: l (..., K, V) the logits
      W x_k + b of ``output_layer()`` that the head's log-P is a function of (K = 1 but for a
      mixture of K softmaxes), and ``log_p_of(l)`` the log-P (..., V) from them, differentiable
      in l (anything else it reads, such as a mixture's prior, fixed when it was made); or None
      when log-P does not factor through one output layer's logits (Mixtape's per-word gates).
      The gradient share (``audit.evaluate.gradient_share``) differentiates through it: only
      col([W, 1]) reaches the parameters through l. Default: ``from_logits`` applied to
      W h + b of ``output_layer()`` (``logits_through_from_logits``), None when either is None.

    Planning traits (``audit.model.heads.traits.HeadTraits``, class-level, read by
    ``audit.plan.resources`` and ``audit.plan.memory`` without building the head): ``timing_family``,
    ``output_cost``, ``train_vocab_floats`` and the classmethods ``components``, ``cost``,
    ``vocab_floats``, ``eval_vocab_floats``, ``search_decoders`` and ``param_count``; the
    defaults err long (docs/heads.md, "Planning traits").
    """

    def forward(self, h: torch.Tensor) -> torch.Tensor: ...


# The optional members of ``HeadProtocol`` that are not methods (the methods are
# ``audit.model.importpath.HEAD_METHODS``, torch-free, checked callable there): a class from
# outside that lacks any of either gets ``HeadDefaults`` behind it (``audit.model.heads``).
OPTIONAL_MEMBERS = ("defaults", "projects_input", "order_preserving", "plain_softmax", "matches_capacity",
                    # evaluation traits
                    "argmax_box",
                    # planning traits
                    "timing_family", "output_cost", "train_vocab_floats", "components", "cost",
                    "vocab_floats", "eval_vocab_floats", "search_decoders", "param_count")


def logits_through_from_logits(head, h: torch.Tensor):
    """``layer_logits`` of a head whose log-P is ``from_logits(l)`` of its output layer's logits
    l = W h + b (the softmax family; any head that declares ``from_logits`` and ``output_layer``).

    Returns:
        (l (..., 1, V), log_p_of) with log_p_of(l) = from_logits(l[..., 0, :]) (..., V); None
        when the head has no ``output_layer()`` or its ``from_logits`` is None.
    """
    layer = head.output_layer()
    if layer is None:
        return None
    weight, bias = layer
    logits = F.linear(h, weight, bias)
    # one row tells whether from_logits is defined, without paying for it over the whole chunk
    if head.from_logits(logits.detach().reshape(-1, logits.shape[-1])[:1]) is None:
        return None
    return logits.unsqueeze(-2), lambda l: head.from_logits(l[..., 0, :])


class HeadDefaults(HeadTraits):
    """The optional members of ``HeadProtocol`` for a head that does not define them."""

    name = "head"
    defaults: dict | None = None
    projects_input = True  # an outside head sizes its own input
    # order_preserving and plain_softmax: HeadTraits's False, unless the class declares them
    # evaluation traits
    argmax_box = None   # the output layer reads the body's output: the body's output_box

    @classmethod
    def check_options(cls, options: dict) -> None:
        """Nothing to check beyond the option names."""

    def transformed_logits(self, h: torch.Tensor) -> torch.Tensor | None:
        return None

    def from_logits(self, logits: torch.Tensor) -> torch.Tensor | None:
        return None

    def extra_param_groups(self) -> list[dict]:
        return []

    def output_layer(self) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        return None

    def target_log_probs(self, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | None:
        return None

    def layer_logits(self, h: torch.Tensor):
        # an outside head that declares from_logits and output_layer is measured as the
        # softmax family is; one that declares neither is "not measured"
        return logits_through_from_logits(self, h)


class Head(HeadTraits, nn.Module):
    """Base class: a tied decoder ``l = W h + b`` plus a head-specific map to log-probs."""

    name = "base"
    projects_input = False  # True for heads that map d_in to the embedding size themselves
    # evaluation traits
    argmax_box = None         # HeadProtocol: the box of the output layer's input; None: the body's

    def __init__(self, spec: HeadSpec):
        super().__init__()
        self.embedding = spec.embedding  # shared module: its weight is counted once
        vocab, emb = spec.embedding.weight.shape
        if spec.d_in != emb and not self.projects_input:
            raise AuditError(f"head {self.name!r} needs d_in == embedding size, got {spec.d_in} != {emb}")
        unknown = sorted(set(spec.options) - set(self.defaults))
        if unknown:
            known = ", ".join(sorted(self.defaults)) or "none"
            raise AuditError(f"head {self.name!r}: unknown option {unknown[0]!r}; known options: {known}")
        self.options = {**self.defaults, **spec.options}
        self.vocab_size, self.emb_size, self.d_in = vocab, emb, spec.d_in
        self.bias = nn.Parameter(torch.zeros(vocab)) if spec.decoder_bias else None

    @classmethod
    def check_options(cls, options: dict) -> None:
        """Raise ValueError for a bad option value (config-check time); built-in heads check
        theirs when built (``option``)."""

    def option(self, key: str, kind=float, low=None, high=None):
        """An option converted to ``kind`` and range-checked (inclusive bounds)."""
        value = self.options[key]
        try:
            value = kind(value)
        except (TypeError, ValueError):
            raise AuditError(f"head {self.name!r}: option {key} must be {kind.__name__}, got {value!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise AuditError(f"head {self.name!r}: option {key}={value} outside [{low}, {high}]")
        return value

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Tied decoder logits, shape (..., V)."""
        return F.linear(h, self.embedding.weight, self.bias)

    def output_layer(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The tied decoder (W (V, d), b (V,) or None)."""
        return self.embedding.weight, self.bias

    def transformed_logits(self, h: torch.Tensor) -> torch.Tensor | None:
        """f(l), the logits after the head's element-wise map, or None if it has none."""
        return None

    def from_logits(self, logits: torch.Tensor) -> torch.Tensor | None:
        """log-P from the tied decoder logits l = W h + b, for heads whose log-P is a function of
        l alone (the softmax family: an element-wise map, then log_softmax); None otherwise
        (mixtures). ``audit.evaluate.gradient_share`` differentiates through it."""
        return None

    def target_log_probs(self, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | None:
        """log-P at the targets, (T, B), when the head has a cheaper path to it than ``forward``
        (the mixtures); None: the trainer takes ``forward``'s full log-P."""
        return None

    def layer_logits(self, h: torch.Tensor):
        """(l (..., K, V), log_p_of) for the gradient share (``HeadProtocol``): the softmax family
        through ``from_logits`` (K = 1); None where it is None (the mixtures define their own)."""
        return logits_through_from_logits(self, h)

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def extra_param_groups(self) -> list[dict]:
        """Optimiser groups with their own settings (e.g. PLIF's learning rate).

        The trainer puts every other trainable parameter in the main group.
        """
        return []


def mean_nll(out: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean NLL per token from log-P at the targets (T, B), a head's ``target_log_probs``, or
    from the full log-P (T, B, V), read by ``F.nll_loss`` as before there was a shortcut (so the
    heads without one train on the same numbers)."""
    if out.shape == targets.shape:
        return -out.mean()
    return F.nll_loss(out.reshape(-1, out.size(-1)), targets.reshape(-1))
