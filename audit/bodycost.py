"""What one token costs each body: parameters, multiply-adds and activation floats, torch-free.

``audit/resources.py`` (SLURM runtime and host memory) and ``audit/memory.py`` (GPU memory) size
a run from these, chosen by ``model.body``; each function takes ``sizes`` (``model_sizes``: the
run's ``model`` section over the schema's defaults, plus the mixture's ``experts``).

- ``awd_lstm``: the LSTM stack d -> H -> ... -> H -> d' (4 gates per unit, two bias vectors).
- ``transformer`` (``audit/model/bodies/transformer.py``): L pre-LN blocks of width d, MLP width
  ff (``hidden_size``), h heads, learned positions (context_size x d) or rotary ones. Parameters
  are its closed form (``tests/model/test_transformer.py`` checks it against the module). Forward
  multiply-adds per token: 4 d^2 + 2 d ff per block for the weights, plus 2 T d per block for the
  attention (q k^T and the weighted sum of v over a window of T = context_size tokens, counted
  in full as the math path computes it). Training is 3x the forward (``TRAIN_PASSES``), so 6 x the
  weights' count and 12 L T d for the attention: the usual 6 N + 12 L T d FLOPs per token.
- an outside body ("pkg.mod:Class"): its parameters are its own count (the model built on
  PyTorch's meta device, ``audit.model.params``; this imports torch and the body's module, which
  validation has already imported); its work and activations follow a stated conservative rule
  (``OUTSIDE_RULE``), which ``note`` returns for the planners to print.
"""

from __future__ import annotations

import functools

BUILT_IN = ("awd_lstm", "transformer")
TRAIN_PASSES = 3  # forward + backward (gradients of the inputs and of the weights): 3 x the forward's work
LSTM_FLOATS = 14  # per hidden unit per layer: 4 gates + their grads, c, h, tanh(c), masks (fitted)
# Activation floats a pre-LN block keeps per token for the backward pass, in float32 (Korthikanti
# et al. 2022, "Reducing activation recomputation", section 4.1, counted in 4-byte floats): the
# two LayerNorms' inputs and outputs (the next linear's input), q, k, v, the attention's output
# and its reshaped copy (the projection's input), GELU's input and output: 9 d + 2 ff; dropout
# masks (one byte per element) add 1/4 d on each residual branch when model.dropout > 0; rotary
# positions keep the rotated q and k (2 d). Within 10% of the simulated device's peaks
# (tests/test_memory.py).
BLOCK_D_FLOATS = 9.0
BLOCK_MASK_FLOATS = 0.5
ROTARY_D_FLOATS = 2.0
# per attention score (B x heads x T^2 per block) on the math path: the softmax's output, and with
# attention dropout its mask (1 byte) and the dropped weights, and the scores' gradient in the
# backward; a fused kernel keeps one log-sum-exp per head and token instead
SCORE_FLOATS = {"no_dropout": 2.0, "dropout": 3.25}
EMBED_D_FLOATS = 6.0  # outside the blocks: embedding, position sum, final LayerNorm, output dropout
OUTSIDE_RULE = ("costed conservatively: its exact parameter count, N_body multiply-adds per token "
                "(every weight used once) plus a Transformer's attention over context_size tokens at "
                "n_layers x emb_size, and the larger of the two built-in bodies' activations at its sizes "
                "(attention scores kept)")


@functools.cache
def _defaults() -> dict:
    from audit.config import schema_defaults

    return schema_defaults("model", unfilled=True)


def model_sizes(settings: dict) -> dict:
    """A run's ``model`` section over the schema's defaults (the body keys are not written into
    configs), plus ``experts``: K of MoS and uniform MoS, else 1."""
    experts = settings.get("options", {}).get("experts", 1) if settings["head"] in ("mos", "mos_uniform") else 1
    return {**_defaults(), **settings["model"], "experts": experts}


def body_of(sizes: dict) -> str:
    """``awd_lstm``, ``transformer`` or ``outside`` (a body by import path)."""
    body = sizes.get("body", "awd_lstm")
    return body if body in BUILT_IN else "outside"


def note(sizes: dict) -> str | None:
    """One line for a plan's reader when the body's costs are a rule, not its own formulas."""
    if body_of(sizes) != "outside":
        return None
    return f"note: model.body {sizes['body']!r} is not built in: {OUTSIDE_RULE}"


def lstm_layers(sizes: dict) -> list[tuple[int, int]]:
    """(input, hidden) of each LSTM layer; the last one outputs d' (= d when last_size is None)."""
    last = sizes.get("last_size") or sizes["emb_size"]
    outs = [sizes["hidden_size"]] * (sizes["n_layers"] - 1) + [last]
    ins = [sizes["emb_size"]] + outs[:-1]
    return list(zip(ins, outs))


def body_params(sizes: dict, vocab: int) -> int:
    """Trainable parameters of the body alone (not the V x d embedding, not the decoder bias)."""
    body = body_of(sizes)
    if body == "awd_lstm":
        return sum(4 * h * (i + h) + 8 * h for i, h in lstm_layers(sizes))
    d, ff, layers = sizes["emb_size"], sizes["hidden_size"], sizes["n_layers"]
    if body == "transformer":
        # per block: two LayerNorms 4d, qkv 3d^2 + 3d, output d^2 + d, MLP 2 d ff + ff + d
        positions = sizes["context_size"] * d if sizes["positions"] == "learned" else 0
        return layers * (4 * d * d + 2 * d * ff + 9 * d + ff) + 2 * d + positions
    return _outside_params(tuple(sorted((k, v) for k, v in sizes.items() if k != "experts")), vocab)


@functools.cache
def _outside_params(items: tuple, vocab: int) -> int:
    """The outside body's own count: a softmax model on it, less the embedding and decoder bias."""
    import dataclasses

    from audit.model.awd_lstm import ModelConfig
    from audit.model.params import count_params

    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    sizes = {k: v for k, v in items if k in fields}
    total = count_params(ModelConfig(vocab_size=vocab, head="softmax", **sizes))
    return total - vocab * sizes["emb_size"] - (vocab if sizes.get("decoder_bias", True) else 0)


def attention_macs(sizes: dict) -> float:
    """Forward multiply-adds per token of the attention itself: 2 T d per block, T = context_size."""
    return 2 * sizes["n_layers"] * sizes["context_size"] * sizes["emb_size"]


def body_macs(sizes: dict, vocab: int) -> float:
    """Forward multiply-adds per token of the body (the head's decoder not included)."""
    body = body_of(sizes)
    if body == "awd_lstm":
        return sum(4 * h * (i + h) for i, h in lstm_layers(sizes))
    if body == "transformer":
        d, ff = sizes["emb_size"], sizes["hidden_size"]
        return sizes["n_layers"] * (4 * d * d + 2 * d * ff) + attention_macs(sizes)
    return body_params(sizes, vocab) + attention_macs(sizes)


def math_attention(sizes: dict, device: str) -> bool:
    """Whether ``scaled_dot_product_attention`` keeps the B x heads x T^2 scores: on the CPU when
    attention dropout is on (PyTorch's CPU flash kernel has no dropout; without it the fused kernel
    runs), on a GPU when the head size is not a multiple of 8 (the flash and memory-efficient
    kernels' alignment; otherwise one of them runs, with or without dropout)."""
    if device == "cpu":
        return sizes["dropout"] > 0
    return (sizes["emb_size"] // sizes["n_heads"]) % 8 != 0


def train_floats(sizes: dict, window: int, math: bool) -> float:
    """Activation floats one training token holds in the body for the backward pass.

    Args:
        sizes: ``model_sizes`` of the run.
        window: tokens per training chunk (the Transformer's attention window T).
        math: whether attention keeps its scores (``math_attention``).
    """
    body = body_of(sizes)
    if body == "awd_lstm":
        return LSTM_FLOATS * sum(h for _, h in lstm_layers(sizes))
    if body == "transformer":
        return _transformer_floats(sizes, window, math)
    return max(LSTM_FLOATS * sum(h for _, h in lstm_layers(sizes)), _transformer_floats(sizes, window, True))


def _transformer_floats(sizes: dict, window: int, math: bool) -> float:
    d, ff, heads = sizes["emb_size"], sizes["hidden_size"], sizes["n_heads"]
    dropout = sizes["dropout"] > 0
    block = (BLOCK_D_FLOATS + (BLOCK_MASK_FLOATS if dropout else 0.0)
             + (ROTARY_D_FLOATS if sizes["positions"] == "rotary" else 0.0)) * d + 2 * ff
    scores = SCORE_FLOATS["dropout" if dropout else "no_dropout"] * heads * window if math else heads
    return sizes["n_layers"] * (block + scores) + EMBED_D_FLOATS * d


def eval_floats(sizes: dict, window: int, math: bool) -> float:
    """Floats per window token of a forward pass without gradients: one block's tensors at a time
    (the residual, q k v, the attention output and its copy, or the MLP's two ff-wide tensors),
    and on the math path the scores and their softmax (2 x heads x window)."""
    body = body_of(sizes)
    awd = 4 * sum(h for _, h in lstm_layers(sizes))
    if body == "awd_lstm":
        return awd
    d, ff = sizes["emb_size"], sizes["hidden_size"]
    transformer = 6 * d + 2 * ff + (2 * sizes["n_heads"] * window if math or body == "outside" else 0)
    return transformer if body == "transformer" else max(awd, transformer)
