"""Per-step helpers of the training loop that keep the host from waiting on the device.

- ``FastAverage``: torch's ``AveragedModel`` reads its step counter (a tensor on the model's
  device) back to the host twice per update (``bool(n_averaged == 0)`` and the float weight
  ``1 / (n + 1)``): on a GPU that is two synchronisations per training step for the whole ASGD
  phase (800 of the paper's 1000 epochs). This subclass mirrors the counter on the host and
  computes the same float32 weight there; on the CPU it defers to torch's own update, so CPU
  runs keep their exact numbers. Its state_dict is torch's (the counter buffer is kept in step).
- ``keep_freed_memory``: glibc hands every block above its mmap threshold (at most 32 MiB) back
  to the kernel when freed, so the logits of a large head (MoS: experts x T x B x V floats)
  are page-faulted in afresh every step; that was 25-50% system time in the MoS studies. The
  allocator is told to keep freed memory in the heap instead. Changes no number.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

import torch
from torch.optim.swa_utils import AveragedModel

# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4


@functools.lru_cache(maxsize=1)
def keep_freed_memory() -> bool:
    """Keep freed blocks in the process heap (glibc only); True when the allocator accepted it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl or another libc: nothing to tune
        return False
    # no mmap'd blocks (they are returned on free) and no trimming of the heap top below 1 TiB
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2 ** 40 - 1))


class FastAverage(AveragedModel):
    """Equal-weight running mean of a model's parameters without host reads on the GPU."""

    def __init__(self, model: torch.nn.Module):
        # device=: the counter must live beside the weights. Without it n_averaged stays on the
        # CPU, the check below takes torch's own update on a GPU, and every step pays a blocking
        # host-to-device copy and an .item() (found on the simulated device, tests/support)
        super().__init__(model, device=next(model.parameters()).device)
        self._count: int | None = 0  # host mirror of n_averaged; None: read it once
        # the deep copy's LSTM weights are separate tensors: give cuDNN its one flat buffer back
        # (a no-op on the CPU), or every evaluation call warns and copies them
        for module in self.module.modules():
            if isinstance(module, torch.nn.RNNBase):
                module.flatten_parameters()

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        result = super().load_state_dict(state_dict, strict=strict, assign=assign)
        self._count = None
        return result

    @torch.no_grad()
    def update_parameters(self, model: torch.nn.Module) -> None:
        device = self.n_averaged.device
        if device.type == "cpu":  # no synchronisation to save; torch's own formula and numbers
            super().update_parameters(model)
            self._count = None
            return
        self.update_without_reads(model)

    @torch.no_grad()
    def update_without_reads(self, model: torch.nn.Module) -> None:
        """The GPU path (any device): torch's foreach update, with the counter read from the host."""
        if self._count is None:
            self._count = int(self.n_averaged)  # once after a load
        averaged = [p.detach() for p in self.parameters()]
        current = [p.detach().to(a.device) for p, a in zip(model.parameters(), averaged)]
        if self._count == 0:
            torch._foreach_copy_(averaged, current)
        else:
            # torch divides 1 by the int64 counter tensor (+1): a float32 quotient, then a float
            weight = float(torch.tensor(1.0, dtype=torch.float32) / (self._count + 1))
            torch._foreach_lerp_(averaged, current, weight)
        self.n_averaged += 1
        self._count += 1
