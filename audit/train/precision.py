"""The torch settings of a run's ``train.precision`` and ``train.deterministic``.

Both are set explicitly in every training process (``Trainer``), never left to torch's
defaults, which change between releases; ``gpu-check`` reads them back for its report. Nothing
here changes a CPU computation. Callers set them before CUDA is first used: cuBLAS reads its
workspace setting when it makes its handle.
"""

from __future__ import annotations

import os

import torch

from audit.errors import AuditError


# train.precision -> torch's fp32_precision for CUDA matmuls, cuDNN RNNs and convolutions. Set
# explicitly: torch 2.13 defaults cuDNN RNNs to "tf32", which the papers' LSTMs never saw.
# bf16_head (issue 57): the head alone under bfloat16 autocast, on the CPU and on CUDA alike
# (``head_autocast_dtype``); its body stays IEEE float32.
FP32_PRECISION = {"fp32": "ieee", "tf32": "tf32", "bf16": "ieee", "bf16_head": "ieee"}


def apply_precision(precision: str) -> None:
    """Set torch's CUDA float32 flags for a ``train.precision`` (fp32, tf32 or bf16).

    bf16 keeps the flags at IEEE for whatever runs outside its autocast region
    (``autocast_dtype``); nothing here changes a CPU computation.
    """
    if precision not in FP32_PRECISION:
        raise AuditError(f"train.precision must be one of {sorted(FP32_PRECISION)}, got {precision!r}")
    mode = FP32_PRECISION[precision]
    torch.backends.cuda.matmul.fp32_precision = mode
    torch.backends.cudnn.rnn.fp32_precision = mode
    torch.backends.cudnn.conv.fp32_precision = mode


# cuBLAS's deterministic workspace settings (CUDA >= 10.2); read when a cuBLAS handle is made
CUBLAS_DETERMINISTIC = (":4096:8", ":16:8")


def apply_determinism(deterministic: bool) -> None:
    """Ask torch for deterministic GPU kernels (``train.deterministic``), or say explicitly not to.

    True: ``torch.use_deterministic_algorithms(True)`` (an op without a deterministic CUDA kernel
    then raises instead of running), cuDNN's deterministic algorithms without autotuning, and
    ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` unless already one of ``CUBLAS_DETERMINISTIC``. cuBLAS
    reads that variable when it makes its handle, so call this before CUDA is first used
    (before ``resolve_device``). False: all three off (torch's defaults). Nothing here changes a
    CPU computation, which is deterministic on one CPU model anyway.
    """
    if deterministic and os.environ.get("CUBLAS_WORKSPACE_CONFIG") not in CUBLAS_DETERMINISTIC:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_DETERMINISTIC[0]
    torch.use_deterministic_algorithms(bool(deterministic))
    torch.backends.cudnn.deterministic = bool(deterministic)
    if deterministic:
        torch.backends.cudnn.benchmark = False  # autotuning may pick another algorithm per process


def autocast_dtype(precision: str, device) -> torch.dtype | None:
    """The autocast dtype of a training forward pass: bfloat16 for bf16 on CUDA, else None."""
    return torch.bfloat16 if precision == "bf16" and device.type == "cuda" else None


def head_autocast_dtype(precision: str) -> torch.dtype | None:
    """The matmul dtype of the head's training forward alone: bfloat16 for ``bf16_head`` on any
    device, else None (``audit.model.matmuls.LowPrecisionMatmuls``). The head (the decoder:
    MoS's 15 x 280 x 10,000 logits are 69% of its FLOPs at paper size) is where a fast precision
    pays; a CPU runs it too, which ``bf16`` (the whole forward under autocast, CUDA only:
    oneDNN's CPU LSTM has no bf16 autocast kernel) cannot."""
    return torch.bfloat16 if precision == "bf16_head" else None
