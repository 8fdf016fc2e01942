"""The language model: an embedding, a body (AWD-LSTM by default) and an output head.

ids (T, B) -> embedding (V x d) -> body (``audit.model.bodies``: AWD-LSTM, Transformer or a class
by import path) -> features (T, B, d') -> head (``audit.model.heads``) -> log-P (T, B, V), the
head's decoder tied to the embedding. Body-agnostic: the AWD-LSTM itself is
``audit.model.bodies.awd_lstm``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn

from audit.schema import schema_defaults
from audit.model.bodies import build_body
from audit.model.heads import HeadSpec, build_head
from audit.model.heads.traits import DEFAULT_HEAD

_MODEL = schema_defaults("model", unfilled=True)   # the `model` section of configs/schema.yaml: its one home


@dataclass
class ModelConfig:
    """Sizes and regularisers of one model; every default is the schema's ``model`` default."""

    vocab_size: int                              # V, set from the corpus
    emb_size: int = _MODEL["emb_size"]           # d: embedding size, also the decoder's (tied) width
    hidden_size: int = _MODEL["hidden_size"]     # H: inner LSTM layers
    last_size: int | None = _MODEL["last_size"]  # d': last LSTM layer's output; None means d (softmax family)
    n_layers: int = _MODEL["n_layers"]           # LSTM layers
    dropoute: float = _MODEL["dropoute"]         # embedding dropout: whole rows of the embedding matrix
    dropouti: float = _MODEL["dropouti"]         # locked dropout on the embedded input
    dropouth: float = _MODEL["dropouth"]         # locked dropout between LSTM layers
    dropout: float = _MODEL["dropout"]           # locked dropout on the last layer's output
    wdrop: float = _MODEL["wdrop"]               # DropConnect on hidden-to-hidden weights
    emb_noise: float = _MODEL["emb_noise"]       # sigma of Gaussian noise on the dropped input embeddings (LK --noisy_emb)
    decoder_bias: bool = _MODEL["decoder_bias"]  # the bias adds one to the softmax log-P rank (d + 2)
    # the body and its Transformer sizes: the schema's x-default, not written into configs, so
    # that the settings of runs recorded before bodies existed stay as they were
    body: str = _MODEL["body"]                  # awd_lstm | transformer | "pkg.mod:Class"
    n_heads: int = _MODEL["n_heads"]            # attention heads (transformer)
    positions: str = _MODEL["positions"]        # learned | rotary (transformer)
    context_size: int = _MODEL["context_size"]  # longest window, in tokens (transformer)
    eval_stride: int | None = _MODEL["eval_stride"]  # new positions per evaluation window; None: context_size // 2
    head: str = DEFAULT_HEAD     # registry name in audit.model.heads.HEADS or "pkg.mod:Class" (a head entry's, not a model setting)
    head_options: dict = field(default_factory=dict)  # head-specific options

    @property
    def d_out(self) -> int:
        return self.last_size or self.emb_size

    def to_dict(self) -> dict:
        return asdict(self)


class LanguageModel(nn.Module):
    """Embedding, body and head; ``forward`` returns (log-P, hidden, dropped, raw)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        # construction order fixes the draws of the seeded initialisation: embedding, body, head
        self.encoder = nn.Embedding(cfg.vocab_size, cfg.emb_size)
        self.body = build_body(cfg.body, cfg, self.encoder)
        self.head = build_head(cfg.head, HeadSpec(d_in=self.body.d_out, embedding=self.encoder,
                                                  options=cfg.head_options, decoder_bias=cfg.decoder_bias,
                                                  model=cfg))
        self.body.init_embedding(self.encoder.weight)
        self._register_load_state_dict_pre_hook(_rename_old_keys)

    def init_hidden(self, batch_size: int):
        return self.body.init_hidden(batch_size)

    def forward(self, words: torch.Tensor, hidden, targets: torch.Tensor | None = None):
        """Log-probabilities (T, B, V) of the next word, the new hidden state and the body's
        dropped and raw outputs (for AR and TAR). Given the next words ``targets`` (T, B), the
        first item is the head's ``target_log_probs`` (T, B) instead, where the head has one (the
        training loss reads log-P there alone); otherwise still the full (T, B, V)."""
        dropped, raw, hidden = self.body(words, hidden)
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
