"""The AWD-LSTM body: embedded ids through a stack of LSTM layers d -> H -> ... -> H -> d'.

Regularisers of Merity et al. (2018): embedding dropout, locked (variational) dropout on inputs,
between layers and on the output, DropConnect on each layer's hidden-to-hidden weights, and
(for the fair-capacity comparison) Gaussian noise on the input embeddings. Each layer runs
torch's functional LSTM op (``torch.lstm``, what ``nn.LSTM.forward`` calls) on an explicit weight
list, the dropped hidden-to-hidden matrix in it during training: no module attribute is swapped,
so ``nn.LSTM`` never re-flattens and no parameter's storage ever moves (issue 54; the reference
code's ``flatten_parameters`` trick breaks on current PyTorch).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from audit.model.bodies.traits import AWDLSTMTraits
from audit.model.kernels.dropout import locked_dropout
from audit.schema import schema_defaults

_MODEL = schema_defaults("model", unfilled=True)   # the `model` section of configs/schema.yaml: its one home


@dataclass(frozen=True)
class AWDLSTMConfig:
    """The AWD-LSTM's settings: its keys of the ``model`` section; every default is the schema's."""

    emb_size: int = _MODEL["emb_size"]           # d: the embedding, the first layer's input
    hidden_size: int = _MODEL["hidden_size"]     # H: inner LSTM layers
    last_size: int | None = _MODEL["last_size"]  # d': last LSTM layer's output; None means d (softmax family)
    n_layers: int = _MODEL["n_layers"]           # LSTM layers
    dropoute: float = _MODEL["dropoute"]         # embedding dropout: whole rows of the embedding matrix
    dropouti: float = _MODEL["dropouti"]         # locked dropout on the embedded input
    dropouth: float = _MODEL["dropouth"]         # locked dropout between LSTM layers
    dropout: float = _MODEL["dropout"]           # locked dropout on the last layer's output
    wdrop: float = _MODEL["wdrop"]               # DropConnect on hidden-to-hidden weights
    emb_noise: float = _MODEL["emb_noise"]       # sigma of noise on the dropped input embeddings (LK --noisy_emb)

    @property
    def d_out(self) -> int:
        return self.last_size or self.emb_size


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
        # Why not nn.LSTM's forward: given another weight_hh (functional_call, as until issue
        # 54), it re-flattens its weights, and on a GPU cuDNN's flatten copies them into a new
        # buffer and moves every parameter there (set_) at each training step and again at the
        # next validation forward (torch/nn/modules/rnn.py: _update_flat_weights). A CUDA graph
        # keeps the addresses it captured, so a moved parameter is one its replays no longer
        # update. The op below is the one nn.LSTM.forward calls, with the same arguments, so the
        # numbers are the same bitwise. In training cuDNN copies the weights (the dropped one
        # lies outside the flat buffer) into a workspace of its own, inside the step, as the old
        # flatten copied them: on an H200 that path took 6.97 ms against the flat path's 6.29
        # for a forward and backward of paper-ptb's first layer; this one is timed by the same
        # check, not yet on a GPU (gpu-check's correctness step, "weight drop"; docs/gpus.md).
        # Evaluation reads the flat buffer as it is. (On a GPU torch warns once that the weights
        # are not one contiguous chunk: expected here; flatten_parameters, which the warning
        # suggests, is exactly what must not run between steps.)
        lstm = self.lstm
        weights = [lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0]
        if self.training and self.wdrop > 0:
            weights[1] = self.drop_hh(weights[1])
        # (input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        out, h, c = torch.lstm(x, hidden, weights, True, 1, 0.0, self.training, False, False)
        return out, (h, c)

    def drop_hh(self, weight):
        """The dropped hidden-to-hidden matrix (a fresh mask each call). One method, so that
        gpu-check can give the CPU and the GPU the same mask and compare the two paths."""
        return F.dropout(weight, self.wdrop, training=True)


class AWDLSTMBody(AWDLSTMTraits, nn.Module):
    """AWD-LSTM (``model.body: awd_lstm``, the default). Hidden state: one (h, c) pair of shape
    (1, B, n) per layer, carried across BPTT chunks in training and evaluation."""

    Config = AWDLSTMConfig
    output_box = 1.0  # the last layer's output o * tanh(c) lies in [-1, 1]^d' (audit.evaluate.argmax)

    @property
    def output_rank(self) -> int:
        """The outputs o * tanh(c) span all d' dimensions (no constraint ties the coordinates)."""
        return self.d_out

    def __init__(self, cfg: AWDLSTMConfig, embedding: nn.Embedding):
        super().__init__()
        self.cfg = cfg
        # the model owns the embedding; a plain attribute, not a submodule, keeps it out of this
        # body's state dict (the model's ``encoder.weight`` is its one entry)
        self.__dict__["embedding"] = embedding
        sizes = [cfg.emb_size] + [cfg.hidden_size] * (cfg.n_layers - 1) + [cfg.d_out]
        self.rnns = nn.ModuleList(WeightDropLSTM(a, b, cfg.wdrop) for a, b in zip(sizes[:-1], sizes[1:]))
        self.d_out = cfg.d_out

    def init_embedding(self, weight: torch.Tensor) -> None:
        nn.init.uniform_(weight, -0.1, 0.1)  # the reference decoder's init, tied

    def init_hidden(self, batch_size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        weight = self.embedding.weight
        return [(weight.new_zeros(1, batch_size, rnn.lstm.hidden_size),
                 weight.new_zeros(1, batch_size, rnn.lstm.hidden_size)) for rnn in self.rnns]

    def forward(self, words: torch.Tensor, hidden):
        """Run the LSTM stack. words: (T, B) ids.

        Returns:
            (dropped, raw, hidden): the last layer's output after and before its locked
            dropout, both (T, B, d'), and the new hidden state.
        """
        cfg = self.cfg
        x = embedding_dropout(self.embedding, words, cfg.dropoute, self.training)
        if self.training and cfg.emb_noise > 0:
            # The fair comparison's extra regulariser: N(0, 1) * sigma added to each looked-up
            # (already dropped) input embedding, a fresh draw per token position and step.
            x = x + torch.randn_like(x) * cfg.emb_noise
        x = locked_dropout(x, cfg.dropouti, self.training)
        new_hidden = []
        for i, rnn in enumerate(self.rnns):
            x, h = rnn(x, hidden[i])
            new_hidden.append(h)
            if i < len(self.rnns) - 1:
                x = locked_dropout(x, cfg.dropouth, self.training)
        return locked_dropout(x, cfg.dropout, self.training), x, new_hidden
