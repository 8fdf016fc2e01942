"""Row blocks for cache-blocked element-wise head maps.

On the CPU an element-wise chain over the full (N x V) logits is bound by memory traffic, not
arithmetic: every intermediate tensor is a round trip through DRAM (28 MB for N = 700,
V = 10,000). Running the chain block by block, with blocks small enough to stay in the L2/L3
cache, leaves one read of the input and one write of the result per pass over the data. GPUs
gain nothing from it and pay a kernel launch per operation, so on them the block is the whole
tensor.
"""

from __future__ import annotations

import torch

BLOCK_ELEMENTS = 1 << 17  # ~0.5 MB of float32 per intermediate


def row_blocks(x2d: torch.Tensor, elements: int = BLOCK_ELEMENTS) -> list[slice]:
    """Slices of rows of a (rows, V) tensor, each about ``elements`` elements (at least a row).

    The split depends only on the shape, device and ``elements``, so results stay bitwise
    reproducible.
    """
    rows, width = x2d.shape
    if x2d.device.type != "cpu":
        return [slice(0, rows)]
    step = max(1, elements // max(width, 1))
    return [slice(i, min(i + step, rows)) for i in range(0, rows, step)]
