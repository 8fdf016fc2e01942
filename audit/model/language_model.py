"""The language model: an embedding, a body (AWD-LSTM by default) and an output head.

ids (T, B) -> embedding (V x d) -> body (``audit.model.bodies``: AWD-LSTM, Transformer or a class
by import path) -> features (T, B, d') -> head (``audit.model.heads``) -> log-P (T, B, V), the
head's decoder tied to the embedding. Body-agnostic: the AWD-LSTM itself is
``audit.model.bodies.awd_lstm``.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass, field, fields

import torch
import torch.nn as nn

from audit.errors import AuditError
from audit.model.bodies import body_config as build_body_config
from audit.model.bodies import build_body
from audit.model.heads import HeadSpec, build_head
from audit.model.heads.traits import DEFAULT_HEAD
from audit.model.matmuls import LowPrecisionMatmuls
from audit.schema import schema_defaults

_MODEL = schema_defaults("model", unfilled=True)   # the `model` section of configs/schema.yaml: its one home
MODEL_KEYS = frozenset(_MODEL)                      # the flat section's keys, every body's included


@dataclass(frozen=True)
class ModelConfig:
    """The model of one run: what the embedding and the head read, and the body's own config.

    Built from the flat ``model`` section by ``ModelConfig.of`` (the section stays flat in
    configs and run settings, so no recorded run changes); ``to_dict`` gives it back flat, as
    checkpoints store it. A body's settings are its ``Config`` (``audit.model.bodies``): the
    AWD-LSTM's sizes and dropouts, the Transformer's heads and window, an outside body's own
    (its fields that are not keys of the section come from ``model.body_options``).
    """

    vocab_size: int                              # V, set from the corpus
    body_config: object                          # the body's Config, filled from the model section
    emb_size: int = _MODEL["emb_size"]           # d: embedding size, also the decoder's (tied) width
    decoder_bias: bool = _MODEL["decoder_bias"]  # the bias adds one to the softmax log-P rank (d + 2)
    body: str = _MODEL["body"]                   # awd_lstm | transformer | "pkg.mod:Class"
    head: str = DEFAULT_HEAD     # registry name in audit.model.heads.HEADS or "pkg.mod:Class" (a head entry's, not a model setting)
    head_options: dict = field(default_factory=dict)  # head-specific options

    def __post_init__(self):
        # d is the embedding's and, where the body declares it, the body's: one value (``replace``)
        if getattr(self.body_config, "emb_size", self.emb_size) != self.emb_size:
            raise ValueError(f"emb_size {self.emb_size} and the body config's {self.body_config.emb_size} differ: "
                             f"change sizes with ModelConfig.replace")

    @classmethod
    def of(cls, vocab_size: int, head: str = DEFAULT_HEAD, head_options: dict | None = None, **model) -> ModelConfig:
        """The config of a flat ``model`` section (any subset of its keys, the rest the schema's
        defaults; a checkpoint's ``to_dict``). A key that is neither the schema's nor a field of
        the body's ``Config`` is refused by name."""
        body = model.get("body", _MODEL["body"])
        options = dict(model.pop("body_options", None) or {})
        body_config = build_body_config(body, {**_MODEL, **model, **options})
        own = {f.name for f in fields(body_config)}
        unknown = sorted(set(model) - MODEL_KEYS - own)
        if unknown:
            raise AuditError(f"model.{unknown[0]}: not a model setting (configs/schema.yaml) nor one of body {body!r}")
        # an option is a field of the body's own: the section's keys are set directly, once
        for key in sorted(options):
            if key in MODEL_KEYS or key not in own:
                why = f"set model.{key} itself" if key in MODEL_KEYS else \
                    f"body {body!r} has no such setting (its Config: {', '.join(sorted(own)) or 'no fields'})"
                raise AuditError(f"model.body_options.{key}: {why}")
        shared = {k: model[k] for k in ("emb_size", "decoder_bias", "body") if k in model}
        return cls(vocab_size=vocab_size, body_config=body_config, head=head,
                   head_options=dict(head_options or {}), **shared)

    def replace(self, **model) -> ModelConfig:
        """This config with some flat ``model`` keys changed (``emb_size=...``, ``hidden_size=...``)."""
        return ModelConfig.of(**{**self.to_dict(), **model})

    @property
    def d_out(self) -> int:
        """The body's output size as its config states it (``d_out``), else d."""
        return getattr(self.body_config, "d_out", None) or self.emb_size

    def to_dict(self) -> dict:
        """The flat form: the model's keys, then the body config's fields."""
        return {"vocab_size": self.vocab_size, "emb_size": self.emb_size, "decoder_bias": self.decoder_bias,
                "body": self.body, "head": self.head, "head_options": dict(self.head_options),
                **asdict(self.body_config)}


class LanguageModel(nn.Module):
    """Embedding, body and head; ``forward`` returns (log-P, hidden, dropped, raw)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        # construction order fixes the draws of the seeded initialisation: embedding, body, head
        self.encoder = nn.Embedding(cfg.vocab_size, cfg.emb_size)
        self.body = build_body(cfg.body, cfg.body_config, self.encoder)
        self.head = build_head(cfg.head, HeadSpec(d_in=self.body.d_out, embedding=self.encoder,
                                                  options=cfg.head_options, decoder_bias=cfg.decoder_bias,
                                                  model=cfg))
        self.body.init_embedding(self.encoder.weight)
        self._register_load_state_dict_pre_hook(_rename_old_keys)

    def init_hidden(self, batch_size: int):
        return self.body.init_hidden(batch_size)

    def forward(self, words: torch.Tensor, hidden, targets: torch.Tensor | None = None,
                head_dtype: torch.dtype | None = None):
        """Log-probabilities (T, B, V) of the next word, the new hidden state and the body's
        dropped and raw outputs (for AR and TAR). Given the next words ``targets`` (T, B), the
        first item is the head's ``target_log_probs`` (T, B) instead, where the head has one (the
        training loss reads log-P there alone); otherwise still the full (T, B, V). ``head_dtype``:
        the head's matmuls in that dtype, every other op in float32 (``train.precision: bf16_head``;
        ``audit.model.matmuls``)."""
        dropped, raw, hidden = self.body(words, hidden)
        # a CPU emulates the low-precision matmul exactly in float32 kernels (audit.model.matmuls)
        low = LowPrecisionMatmuls(head_dtype, emulate=dropped.device.type == "cpu") if head_dtype else None
        with low or contextlib.nullcontext():
            picked = None if targets is None else self.head.target_log_probs(dropped, targets)
            return (self.head(dropped) if picked is None else picked), hidden, dropped, raw


def _rename_old_keys(state, prefix, *args) -> None:
    """Checkpoints written before bodies existed hold the LSTM layers as ``rnns.*``."""
    for key in [k for k in state if k.startswith(prefix + "rnns.")]:
        state[prefix + "body." + key[len(prefix):]] = state.pop(key)


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, each shared tensor once (the tied embedding is one matrix)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def detach_hidden(hidden):
    """The hidden state cut from the graph: tensors detached inside lists and tuples."""
    if isinstance(hidden, torch.Tensor):
        return hidden.detach()
    if isinstance(hidden, (list, tuple)):
        return type(hidden)(detach_hidden(h) for h in hidden)
    return hidden


def perplexity(loss: float) -> float:
    """exp(mean cross-entropy in nats), inf instead of an overflow for absurd losses."""
    return math.exp(loss) if loss < 700 else math.inf
