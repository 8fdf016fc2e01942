"""Validation of a run: the loss of a batchified split, the anisotropy of the head's inputs and the
output weight's singular values, each pass read from the device once (``Trainer.run_epoch`` logs
them every epoch; ``Trainer.verify`` recomputes the last epoch's loss)."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F


@torch.no_grad()
def validation_pass(model: torch.nn.Module, data: torch.Tensor, bptt: int,
                    output_weight: torch.Tensor | None = None) -> dict:
    """One pass over a batchified split (N, B): the loss, the anisotropy of the head's inputs and,
    given ``output_weight`` (V x d), its singular values, all read from the device at once.

    Anisotropy (Godey, de la Clergerie & Sagot 2024) is the mean cosine similarity over all pairs
    i != j of the head's inputs h_i (the last layer's output, shape (d',)) at every predicted
    position of the split. With u_i = h_i / ||h_i|| and s = sum_i u_i, sum over i != j of
    u_i . u_j = ||s||^2 - n, so the mean is (||s||^2 - n) / (n (n - 1)): exact, O(n d) instead of
    O(n^2 d), and only s (float64) stays on the device. The singular values are the square roots
    of the eigenvalues of the float64 Gram matrix W^T W (d x d), so only d x d numbers travel
    (not V x d) and the SVD is done by the host; values below about 1e-8 of the largest are not
    resolved by the squaring, far below anything a saturation figure shows.

    Returns:
        dict with ``valid_loss`` (mean NLL per predicted token), ``input_cosine`` (NaN with fewer
        than 2 positions) and, with ``output_weight``, ``output_singular_values``: list of d
        floats, descending.
    """
    model.eval()
    hidden = model.init_hidden(data.size(1))
    total = torch.zeros((), dtype=torch.float64, device=data.device)
    unit_sum = None
    count = 0
    for i in range(0, data.size(0) - 1, bptt):
        seq_len = min(bptt, data.size(0) - 1 - i)
        words, targets = data[i:i + seq_len], data[i + 1:i + 1 + seq_len]
        log_probs, hidden, dropped, _ = model(words, hidden)
        total += F.nll_loss(log_probs.reshape(-1, log_probs.size(-1)), targets.reshape(-1), reduction="sum").double()
        units = F.normalize(dropped.reshape(-1, dropped.size(-1)).double(), dim=-1).sum(0)
        unit_sum = units if unit_sum is None else unit_sum + units
        count += targets.numel()
    parts = [total.view(1), unit_sum.pow(2).sum().view(1)]
    if output_weight is not None:
        w = output_weight.detach().double()
        parts.append((w.T @ w).flatten())
    values = torch.cat(parts).tolist()   # the one host read of the pass
    out = {"valid_loss": values[0] / count,
           "input_cosine": (values[1] - count) / (count * (count - 1)) if count > 1 else math.nan}
    if output_weight is not None:
        d = output_weight.size(1)
        eig = np.linalg.eigvalsh(np.asarray(values[2:], dtype=np.float64).reshape(d, d))[::-1]
        out["output_singular_values"] = np.sqrt(np.clip(eig, 0.0, None)).tolist()
    return out


def evaluate_loss(model: torch.nn.Module, data: torch.Tensor, bptt: int) -> float:
    """Mean negative log-likelihood per predicted token of a batchified split (N, B).

    The sum stays on the device (float64, the same additions in the same order as a Python
    float) and is read once: one host sync per pass, not one per chunk.
    """
    return validation_pass(model, data, bptt)["valid_loss"]
