"""Learning-rate schedule of the Transformer convention: linear warmup, then cosine decay to 0.

AWD-LSTM keeps its own rule (constant lr scaled by the sequence length, then NT-ASGD) in the
trainer; this is used with ``train.optimizer: adamw``.
"""

from __future__ import annotations

import math


def warmup_cosine(step: int, warmup: int, total: int) -> float:
    """The factor on the base learning rate at optimiser step ``step`` (0-based).

    (step + 1) / warmup during the first ``warmup`` steps (never 0, so the first step moves),
    then 0.5 (1 + cos(pi p)) with p = (step - warmup) / (total - warmup) the fraction of the
    decay done, clipped to [0, 1]: 1 right after warmup, 0.5 half-way, 0 at ``total``.

    Args:
        step: optimiser steps taken before this one.
        warmup: warmup steps (0: none).
        total: planned steps of the whole run (all epochs); must exceed ``warmup`` for a decay.
    """
    if step < warmup:
        return (step + 1) / warmup
    span = max(total - warmup, 1)
    done = min(max((step - warmup) / span, 0.0), 1.0)
    return 0.5 * (1.0 + math.cos(math.pi * done))
