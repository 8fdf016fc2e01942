"""The head's matmuls in a low precision (``train.precision: bf16_head``, issue 57).

One rule on every device: each matmul of the region runs in the low dtype and every other op in
float32 (``LowPrecisionMatmuls``). ``torch.autocast`` is not that rule: its op lists differ by
device.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

# the matmuls a head can call (audit/model/heads, audit/model/kernels): nn.Linear calls F.linear
MATMULS = frozenset({F.linear, torch.matmul, torch.mm, torch.bmm, torch.addmm,
                     torch.Tensor.matmul, torch.Tensor.__matmul__, torch.Tensor.__rmatmul__})


class LowPrecisionMatmuls(TorchFunctionMode):
    """Within the region, every matmul runs in ``dtype`` (its float operands rounded to it, the
    products summed in float32 as tensor cores do, the result rounded to it) and returns
    float32; every other op stays float32. Backward follows: the gradient reaching a matmul's
    output is rounded to ``dtype``, as are the gradients it passes back.

    Not ``torch.autocast``, whose op lists differ by device (on the CPU it runs log_softmax in
    bfloat16 and hands a bfloat16 tensor to the PLIF kernel, which refuses it; on CUDA
    log_softmax runs in float32): this one rule holds on both.

    ``emulate``: the same arithmetic in float32 kernels: operands rounded to ``dtype`` and back
    (a product of two bfloat16 numbers is exact in float32), a float32 matmul, the result rounded
    to ``dtype`` and back. It equals the native low-precision kernel up to the order of the sum
    (tests/model/test_matmuls.py), and it is what a CPU without bfloat16 instructions should
    run: oneDNN's bfloat16 matmul took 4-6x the float32 step there (docs/gpus.md).
    """

    def __init__(self, dtype: torch.dtype, emulate: bool = False):
        super().__init__()
        self.dtype, self.emulate = dtype, emulate

    def _round(self, a):
        if not (isinstance(a, torch.Tensor) and a.is_floating_point()):
            return a
        return a.to(self.dtype).float() if self.emulate else a.to(self.dtype)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in MATMULS:
            return func(*args, **kwargs)
        out = func(*map(self._round, args), **{k: self._round(v) for k, v in kwargs.items()})
        return out.to(self.dtype).float()
