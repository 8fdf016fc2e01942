"""Planning traits of the bodies: what one token costs a body (parameters, multiply-adds,
activation floats), torch-free, read by ``audit.plan.resources`` and ``audit.plan.memory``.

Each trait takes ``sizes``: the run's flat ``model`` section over the schema's defaults (every
body's keys), plus ``experts`` (the head's components). ``body_traits(name)``
answers for a registry name from the traits class here, and for an import path from the class
itself (``audit.model.bodies.body_class``). Each built-in body class (``audit.model.bodies``)
inherits the traits class of its name here; a body from outside the
project gets ``BodyTraits``'s stated conservative rule for every trait it does not declare
(docs/bodies.md, "Planning traits").

- ``awd_lstm``: the LSTM stack d -> H -> ... -> H -> d' (4 gates per unit, two bias vectors).
- ``transformer``: L pre-LN blocks of width d, MLP width ff (``hidden_size``), h heads, learned
  positions (context_size x d) or rotary ones. Forward multiply-adds per token: 4 d^2 + 2 d ff
  per block for the weights, plus 2 T d per block for the attention (q k^T and the weighted sum
  of v over a window of T = context_size tokens, counted in full as the math path computes it).
  Training is 3x the forward (``audit.plan.bodycost.TRAIN_PASSES``), so 6 x the weights' count and
  12 L T d for the attention: the usual 6 N + 12 L T d FLOPs per token.
"""

from __future__ import annotations

from audit.model.importpath import registered_traits
from audit.schema import schema_defaults

LSTM_FLOATS = 14  # per hidden unit per layer: 4 gates + their grads, c, h, tanh(c), masks (fitted)
# host memory of the CPU's training step per hidden unit per layer: 6 tensors of 4 gates
LSTM_HOST_FLOATS = 6 * 4
STATE_COPIES = 5  # AWD-LSTM: weights, gradients, ASGD average, best weights, weight-dropped copies
# other bodies: weights and gradients, each optimiser state (AdamW's two moments), the average
# (the best weights go to the host: audit/train/trainer.py)
OPTIMIZER_COPIES = {"sgd": 0, "adamw": 2}
# Activation floats a pre-LN block keeps per token for the backward pass, in float32 (Korthikanti
# et al. 2022, "Reducing activation recomputation", section 4.1, counted in 4-byte floats): the
# two LayerNorms' inputs and outputs (the next linear's input), q, k, v, the attention's output
# and its reshaped copy (the projection's input), GELU's input and output: 9 d + 2 ff; dropout
# masks (one byte per element) add 1/4 d on each residual branch when model.dropout > 0; rotary
# positions keep the rotated q and k (2 d). Within 10% of the simulated device's peaks
# (tests/plan/test_memory.py).
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
# the traits whose default is the rule above (the default parameter count is exact, the default
# state copies and window are a Transformer's)
COST_TRAITS = ("macs_per_token", "train_floats", "eval_floats", "host_train_floats")


def attention_macs(sizes: dict) -> float:
    """Forward multiply-adds per token of the attention itself: 2 T d per block, T = context_size."""
    return 2 * sizes["n_layers"] * sizes["context_size"] * sizes["emb_size"]


def generic_state_copies(train: dict) -> int:
    """Weights and gradients, the optimiser's states, and the average when ASGD is on."""
    return 2 + OPTIMIZER_COPIES[train.get("optimizer", "sgd")] + (train["asgd"] != "none")


class BodyTraits:
    """The planning traits every body answers; the defaults are ``OUTSIDE_RULE``, stated for a
    body that declares none (``audit.plan.bodycost.note`` says so in the plan).

    - ``param_count(sizes, vocab)``: trainable parameters of the body alone (not the V x d
      embedding); default None: the planner counts the whole model on PyTorch's meta device.
    - ``macs_per_token(sizes, vocab)``: forward multiply-adds per token; default None: the
      planner takes its parameters (every weight once, counted on the meta device) plus a
      Transformer's attention over context_size tokens (``audit.plan.bodycost.body_macs``).
    - ``train_floats(sizes, window, math)``: activation floats one training token holds for the
      backward pass (``window``: tokens per chunk; ``math``: attention keeps its scores); default
      the larger of the two built-in bodies' at these sizes, scores kept.
    - ``eval_floats(sizes, window, math)``: floats per window token of a forward pass without
      gradients; default the larger of the built-in bodies', scores kept.
    - ``host_train_floats(sizes, window)``: floats per token of a CPU training step in host
      memory; default ``train_floats`` with the CPU's choice of attention kernel.
    - ``state_copies(train)``: parameter-sized tensors a training job keeps on the device;
      default weights, gradients, the optimiser's states and the ASGD average.
    - ``size_step(sizes)``: the grain of the embedding size d when the capacity-matched softmax
      solves it (``audit.model.params``); default 1.
    - ``hidden_grows(sizes)``: whether the parameter count grows strictly with ``hidden_size``,
      so that the matched softmax may close its gap with it; default False (an outside body
      promises nothing).
    - ``eval_window(sizes, bptt)``: tokens the body reads per evaluated piece; default
      context_size (a window of context, as a Transformer reads).
    - ``longest_chunk(sizes)``: the longest training chunk the body can read (its context);
      the config check refuses a ``train.bptt`` (plus ``max_seq_len_delta``) beyond it. Default
      None: no limit that the config check can know (an outside body checks its own input).
    """

    @classmethod
    def param_count(cls, sizes: dict, vocab: int) -> int | None:
        return None

    @classmethod
    def macs_per_token(cls, sizes: dict, vocab: int) -> float | None:
        return None   # no formula: the planner's rule (audit.plan.bodycost.body_macs)

    @classmethod
    def train_floats(cls, sizes: dict, window: int, math: bool) -> float:
        return max(AWDLSTMTraits.train_floats(sizes, window, math), TransformerTraits.train_floats(sizes, window, True))

    @classmethod
    def eval_floats(cls, sizes: dict, window: int, math: bool) -> float:
        return max(AWDLSTMTraits.eval_floats(sizes, window, math), TransformerTraits.eval_floats(sizes, window, True))

    @classmethod
    def host_train_floats(cls, sizes: dict, window: int) -> float:
        return cls.train_floats(sizes, window, math_attention(sizes, "cpu"))

    @classmethod
    def state_copies(cls, train: dict) -> int:
        return generic_state_copies(train)

    @classmethod
    def eval_window(cls, sizes: dict, bptt: int) -> int:
        return sizes["context_size"]

    @classmethod
    def size_step(cls, sizes: dict) -> int:
        return 1

    @classmethod
    def longest_chunk(cls, sizes: dict) -> int | None:
        return None

    @classmethod
    def hidden_grows(cls, sizes: dict) -> bool:
        return False


def math_attention(sizes: dict, device: str) -> bool:
    """Whether ``scaled_dot_product_attention`` keeps the B x heads x T^2 scores: on the CPU when
    attention dropout is on (PyTorch's CPU flash kernel has no dropout; without it the fused kernel
    runs), on a GPU when the head size is not a multiple of 8 (the flash and memory-efficient
    kernels' alignment; otherwise one of them runs, with or without dropout)."""
    if device == "cpu":
        return sizes["dropout"] > 0
    return (sizes["emb_size"] // sizes["n_heads"]) % 8 != 0


def lstm_layers(sizes: dict) -> list[tuple[int, int]]:
    """(input, hidden) of each LSTM layer; the last one outputs d' (= d when last_size is None)."""
    last = sizes.get("last_size") or sizes["emb_size"]
    outs = [sizes["hidden_size"]] * (sizes["n_layers"] - 1) + [last]
    ins = [sizes["emb_size"]] + outs[:-1]
    return list(zip(ins, outs))


class AWDLSTMTraits(BodyTraits):
    name = "awd_lstm"

    @classmethod
    def param_count(cls, sizes, vocab):
        return sum(4 * h * (i + h) + 8 * h for i, h in lstm_layers(sizes))

    @classmethod
    def macs_per_token(cls, sizes, vocab):
        return sum(4 * h * (i + h) for i, h in lstm_layers(sizes))

    @classmethod
    def train_floats(cls, sizes, window, math):
        return LSTM_FLOATS * sum(h for _, h in lstm_layers(sizes))

    @classmethod
    def eval_floats(cls, sizes, window, math):
        return 4 * sum(h for _, h in lstm_layers(sizes))

    @classmethod
    def host_train_floats(cls, sizes, window):
        return LSTM_HOST_FLOATS * sum(h for _, h in lstm_layers(sizes))

    @classmethod
    def state_copies(cls, train):
        return STATE_COPIES

    @classmethod
    def eval_window(cls, sizes, bptt):
        return bptt  # the LSTM streams its state: a chunk is bptt tokens

    @classmethod
    def hidden_grows(cls, sizes):
        return sizes["n_layers"] >= 2  # one layer maps d -> d' with no H


class TransformerTraits(BodyTraits):
    name = "transformer"

    @classmethod
    def longest_chunk(cls, sizes):
        return sizes.get("context_size", schema_defaults("model", unfilled=True)["context_size"])

    @classmethod
    def param_count(cls, sizes, vocab):
        # per block: two LayerNorms 4d, qkv 3d^2 + 3d, output d^2 + d, MLP 2 d ff + ff + d
        d, ff, layers = sizes["emb_size"], sizes["hidden_size"], sizes["n_layers"]
        positions = sizes["context_size"] * d if sizes["positions"] == "learned" else 0
        return layers * (4 * d * d + 2 * d * ff + 9 * d + ff) + 2 * d + positions

    @classmethod
    def macs_per_token(cls, sizes, vocab):
        d, ff = sizes["emb_size"], sizes["hidden_size"]
        return sizes["n_layers"] * (4 * d * d + 2 * d * ff) + attention_macs(sizes)

    @classmethod
    def train_floats(cls, sizes, window, math):
        d, ff, heads = sizes["emb_size"], sizes["hidden_size"], sizes["n_heads"]
        dropout = sizes["dropout"] > 0
        block = (BLOCK_D_FLOATS + (BLOCK_MASK_FLOATS if dropout else 0.0)
                 + (ROTARY_D_FLOATS if sizes["positions"] == "rotary" else 0.0)) * d + 2 * ff
        scores = SCORE_FLOATS["dropout" if dropout else "no_dropout"] * heads * window if math else heads
        return sizes["n_layers"] * (block + scores) + EMBED_D_FLOATS * d

    @classmethod
    def host_train_floats(cls, sizes, window):
        return cls.train_floats(sizes, window, math_attention(sizes, "cpu"))  # the CPU's attention kernel

    @classmethod
    def eval_floats(cls, sizes, window, math):
        """One block's tensors at a time (the residual, q k v, the attention output and its copy,
        or the MLP's two ff-wide tensors), and on the math path the scores and their softmax."""
        d, ff = sizes["emb_size"], sizes["hidden_size"]
        return 6 * d + 2 * ff + (2 * sizes["n_heads"] * window if math else 0)

    @classmethod
    def size_step(cls, sizes):
        """d moves in steps of the head count, twice it for rotary positions (whose head size
        must be even)."""
        return sizes["n_heads"] * (2 if sizes["positions"] == "rotary" else 1)


BUILT_IN = (AWDLSTMTraits, TransformerTraits)

BODY_TRAITS = {cls.name: cls for cls in BUILT_IN}  # the built-in bodies; audit.model.bodies.BODIES agrees
BODY_NAMES = tuple(BODY_TRAITS)


def body_traits(name: str) -> type:
    """The class that answers the traits of the body ``name`` (a registry name or an import
    path; only the latter imports torch, which validating it has already done)."""
    return registered_traits("body", name, BODY_TRAITS, _outside)


def _outside(path: str) -> type:
    from audit.model.bodies import body_class

    return body_class(path)


def defaulted(cls: type, names: tuple[str, ...], defaults: type) -> list[str]:
    """The members of ``names`` that ``cls`` takes from ``defaults`` (declares nowhere else)."""
    return [n for n in names if next(c for c in cls.__mro__ if n in c.__dict__) is defaults]
