"""The AWD-LSTM language model body with a pluggable output head.

Embedding (d) -> LSTM layers d -> H -> ... -> H -> d' -> head, the head's decoder tied to the
embedding. Regularisers of Merity et al. (2018): embedding dropout, locked (variational) dropout
on inputs, between layers and on the output, DropConnect on each layer's hidden-to-hidden
weights, and (for the fair-capacity comparison) Gaussian noise on the input embeddings. DropConnect is applied through ``torch.func.functional_call`` with the dropped matrix
passed in for the call, so the module's parameters are never reassigned: the old
``flatten_parameters`` trick of the reference code breaks on current PyTorch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

from audit.config import schema_defaults
from audit.model.heads import HeadSpec, build_head

_MODEL = schema_defaults("model")   # the `model` section of configs/schema.yaml: its one home


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
    head: str = "softmax"        # registry name in audit.model.heads.HEADS or "pkg.mod:Class" (a head entry's, not a model setting)
    head_options: dict = field(default_factory=dict)  # head-specific options

    @property
    def d_out(self) -> int:
        return self.last_size or self.emb_size

    def to_dict(self) -> dict:
        return asdict(self)


def locked_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout with one mask per sequence, shared over time. x: (T, B, n)."""
    if not training or p == 0:
        return x
    mask = x.new_empty(1, x.size(1), x.size(2)).bernoulli_(1 - p) / (1 - p)
    return x * mask


def embedding_dropout(embed: nn.Embedding, words: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Drop whole words (rows of the embedding matrix), rescaling the rest by 1 / (1 - p)."""
    weight = embed.weight
    if training and p > 0:
        mask = weight.new_empty(weight.size(0), 1).bernoulli_(1 - p) / (1 - p)
        weight = weight * mask
    return F.embedding(words, weight)


class WeightDropLSTM(nn.Module):
    """One LSTM layer with DropConnect on ``weight_hh_l0`` (fresh mask per forward call)."""

    def __init__(self, n_in: int, n_out: int, wdrop: float):
        super().__init__()
        self.lstm = nn.LSTM(n_in, n_out)
        self.wdrop = wdrop

    def forward(self, x, hidden):
        if not (self.training and self.wdrop > 0):
            return self.lstm(x, hidden)
        # cuDNN wants every weight of the LSTM as a view into one flat buffer; the dropped
        # matrix is a fresh tensor each call, so on a GPU cuDNN warns and packs the weights into
        # a new buffer every training step. Writing the mask into the flat buffer in place would
        # cut the autograd path to the undropped weight, so we pay the copy: 0.3 ms per call on
        # the CPU (functional_call), the GPU figure is owed (README "On GPUs"). Evaluation
        # (training=False) takes the flat path above.
        params = dict(self.lstm.named_parameters())
        params["weight_hh_l0"] = F.dropout(params["weight_hh_l0"], self.wdrop, training=True)
        return functional_call(self.lstm, params, (x, hidden))


class LanguageModel(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = nn.Embedding(cfg.vocab_size, cfg.emb_size)
        sizes = [cfg.emb_size] + [cfg.hidden_size] * (cfg.n_layers - 1) + [cfg.d_out]
        self.rnns = nn.ModuleList(WeightDropLSTM(a, b, cfg.wdrop) for a, b in zip(sizes[:-1], sizes[1:]))
        self.head = build_head(cfg.head, HeadSpec(d_in=cfg.d_out, embedding=self.encoder,
                                                  options=cfg.head_options, decoder_bias=cfg.decoder_bias,
                                                  model=cfg))
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)  # the reference decoder's init, tied

    def init_hidden(self, batch_size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        weight = self.encoder.weight
        return [(weight.new_zeros(1, batch_size, rnn.lstm.hidden_size),
                 weight.new_zeros(1, batch_size, rnn.lstm.hidden_size)) for rnn in self.rnns]

    def body(self, words: torch.Tensor, hidden):
        """Run the LSTM stack. words: (T, B) ids.

        Returns:
            (dropped, raw, hidden): the last layer's output after and before its locked
            dropout, both (T, B, d'), and the new hidden state.
        """
        x = embedding_dropout(self.encoder, words, self.cfg.dropoute, self.training)
        if self.training and self.cfg.emb_noise > 0:
            # The fair comparison's extra regulariser: N(0, 1) * sigma added to each looked-up
            # (already dropped) input embedding, a fresh draw per token position and step.
            x = x + torch.randn_like(x) * self.cfg.emb_noise
        x = locked_dropout(x, self.cfg.dropouti, self.training)
        new_hidden = []
        for i, rnn in enumerate(self.rnns):
            x, h = rnn(x, hidden[i])
            new_hidden.append(h)
            if i < len(self.rnns) - 1:
                x = locked_dropout(x, self.cfg.dropouth, self.training)
        return locked_dropout(x, self.cfg.dropout, self.training), x, new_hidden

    def forward(self, words: torch.Tensor, hidden):
        """Log-probabilities (T, B, V) of the next word, the new hidden state and the
        last layer's dropped and raw outputs (for AR and TAR)."""
        dropped, raw, hidden = self.body(words, hidden)
        return self.head(dropped), hidden, dropped, raw


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, each shared tensor once (the tied embedding is one matrix)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def detach_hidden(hidden):
    return [tuple(t.detach() for t in h) for h in hidden]


def perplexity(loss: float) -> float:
    """exp(mean cross-entropy in nats), inf instead of an overflow for absurd losses."""
    return math.exp(loss) if loss < 700 else math.inf
