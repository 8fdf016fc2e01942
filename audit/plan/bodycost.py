"""What one token costs the run's body, asked of the body: parameters, multiply-adds and
activation floats, torch-free for the built-in bodies.

``audit/plan/resources.py`` (SLURM runtime and host memory) and ``audit/plan/memory.py`` (GPU memory) size
a run from these; each function takes ``sizes`` (``model_sizes``: the run's ``model`` section
over the schema's defaults, plus the head's ``experts``) and asks the class of ``model.body``
(``audit.model.bodies.traits.body_traits``) for the trait of that name. The formulas are the bodies'
own (``audit/model/bodies/traits.py``, inherited by the body classes beside it); a body from outside
the project that declares none of them is costed by the stated conservative rule ``OUTSIDE_RULE``
(``BodyTraits``), which ``note`` returns for the planners to print.
"""

from __future__ import annotations

import functools
import json

from audit.model.bodies.traits import COST_TRAITS, OUTSIDE_RULE, BodyTraits, attention_macs, body_traits, math_attention
from audit.model.heads.traits import DEFAULT_HEAD, head_traits

__all__ = ["TRAIN_PASSES", "body_macs", "eval_floats", "math_attention", "model_sizes", "note", "train_floats"]

TRAIN_PASSES = 3  # forward + backward (gradients of the inputs and of the weights): 3 x the forward's work


@functools.cache
def _defaults() -> dict:
    from audit.schema import schema_defaults

    return schema_defaults("model", unfilled=True)


def model_sizes(settings: dict) -> dict:
    """A run's ``model`` section over the schema's defaults (the body keys are not written into
    configs), plus ``experts``: the head's ``components`` (K of MoS and uniform MoS, else 1)."""
    experts = head_traits(settings["head"]).components(settings.get("options", {}))
    return {**_defaults(), **settings["model"], "experts": experts}


def body(sizes: dict) -> type:
    """The class answering the body's traits (``model.body``, default the AWD-LSTM)."""
    return body_traits(sizes.get("body", _defaults()["body"]))


def note(sizes: dict) -> str | None:
    """One line for a plan's reader when the body's costs are a rule, not its own formulas: the
    cost traits it takes from ``BodyTraits``."""
    from audit.model.bodies.traits import defaulted

    ruled = defaulted(body(sizes), COST_TRAITS, BodyTraits)
    if not ruled:
        return None
    if len(ruled) == len(COST_TRAITS):
        return f"note: model.body {sizes['body']!r} is not built in: {OUTSIDE_RULE}"
    return f"note: model.body {sizes['body']!r} declares no {', '.join(ruled)}: {OUTSIDE_RULE}"


def body_macs(sizes: dict, vocab: int) -> float:
    """Forward multiply-adds per token of the body (the head's decoder not included): the body's
    own formula, else (``OUTSIDE_RULE``) every parameter once plus attention over context_size."""
    macs = body(sizes).macs_per_token(sizes, vocab)
    return macs if macs is not None else outside_body_params(sizes, vocab) + attention_macs(sizes)


def meta_count(head: str, options: dict, sizes: dict, vocab: int) -> int:
    """``count_params`` of the model of ``head`` (with ``options``) at ``sizes`` (``model_sizes``),
    counted on PyTorch's meta device: exact for any head or body (imports torch and an outside
    part's module, which validating the study has already imported)."""
    # JSON cache keys: options and body_options are dicts
    return _meta_count(head, json.dumps(options, sort_keys=True),
                       json.dumps({k: v for k, v in sizes.items() if k != "experts"}, sort_keys=True), vocab)


@functools.cache
def _meta_count(head: str, options: str, sizes: str, vocab: int) -> int:
    from audit.model.language_model import MODEL_KEYS, ModelConfig
    from audit.model.params import count_params

    model = {k: v for k, v in json.loads(sizes).items() if k in MODEL_KEYS}
    return count_params(ModelConfig.of(vocab_size=vocab, head=head, head_options=json.loads(options), **model))


def outside_body_params(sizes: dict, vocab: int) -> int:
    """The count of the body at ``sizes["body"]`` (an import path): a model of the default head
    (the softmax: a decoder bias beyond the tied embedding) on it counted on the meta device
    (``meta_count``), less the embedding and the decoder bias."""
    total = meta_count(DEFAULT_HEAD, {}, sizes, vocab)
    return total - vocab * sizes["emb_size"] - (vocab if sizes.get("decoder_bias", True) else 0)



def train_floats(sizes: dict, window: int, math: bool) -> float:
    """Activation floats one training token holds in the body for the backward pass.

    Args:
        sizes: ``model_sizes`` of the run.
        window: tokens per training chunk (the Transformer's attention window T).
        math: whether attention keeps its scores (``math_attention``).
    """
    return body(sizes).train_floats(sizes, window, math)


def eval_floats(sizes: dict, window: int, math: bool) -> float:
    """Floats per window token of the body's forward pass without gradients."""
    return body(sizes).eval_floats(sizes, window, math)
