"""Locked (variational) dropout: one mask per sequence, shared over time (Gal & Ghahramani 2016;
the AWD-LSTM's inputs, layers and output, and the mixture heads' latent, gate and context
tensors)."""

from __future__ import annotations

import torch


def locked_dropout(x: torch.Tensor, rate: float, training: bool) -> torch.Tensor:
    """Dropout with one mask per sequence, shared over time (Gal & Ghahramani; AWD-LSTM).

    Args:
        x: activations of shape (T, B, ...).
        rate: drop probability in [0, 1).
        training: masks are drawn only in training; evaluation returns ``x`` unchanged.

    Returns:
        Tensor of the shape of ``x``; kept units are scaled by 1 / (1 - rate).
    """
    if not training or rate == 0.0:
        return x
    mask = x.new_empty((1,) + tuple(x.shape[1:])).bernoulli_(1.0 - rate).div_(1.0 - rate)
    return x * mask
