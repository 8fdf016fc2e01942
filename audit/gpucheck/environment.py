"""What this node is: GPU, driver, torch, CUDA and cuDNN, and the float32 flags per precision."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess


def driver_version() -> str:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "unknown (no nvidia-smi)"
    done = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                          text=True, timeout=60)
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else "unknown"


def precision_flags() -> dict:
    """torch's CUDA matmul / cuDNN RNN / cuDNN conv fp32 modes and the autocast dtype that each
    ``train.precision`` sets (``audit.train.precision.apply_precision``), read back from torch."""
    import torch

    from audit.train.precision import FP32_PRECISION, apply_precision, autocast_dtype

    before = (torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.rnn.fp32_precision,
              torch.backends.cudnn.conv.fp32_precision)
    flags = {}
    try:
        for precision in FP32_PRECISION:
            apply_precision(precision)
            dtype = autocast_dtype(precision, torch.device("cuda"))
            flags[precision] = {"matmul": torch.backends.cuda.matmul.fp32_precision,
                                "cudnn_rnn": torch.backends.cudnn.rnn.fp32_precision,
                                "cudnn_conv": torch.backends.cudnn.conv.fp32_precision,
                                "autocast": str(dtype).replace("torch.", "") if dtype else "none"}
    finally:
        (torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.rnn.fp32_precision,
         torch.backends.cudnn.conv.fp32_precision) = before
    return flags


def run(result, budget: float, simulated: bool) -> None:
    import numpy
    import torch

    from audit.gpucheck.common import device_info

    info = device_info()
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    result.figure("gpu", info["name"])
    result.figure("gpu_memory_gib", round(info["total_gib"], 1))
    result.figure("simulated", info["simulated"])
    result.figure("driver", "simulated device" if simulated else driver_version())
    result.figure("torch", torch.__version__)
    result.figure("cuda", torch.version.cuda)
    result.figure("cudnn", cudnn)
    result.figure("python", platform.python_version())
    result.figure("numpy", numpy.__version__)
    result.figure("cpu_count", os.cpu_count())
    result.figure("cudnn_benchmark", torch.backends.cudnn.benchmark)
    result.figure("cudnn_deterministic", torch.backends.cudnn.deterministic)
    result.figure("precision_flags", precision_flags())
    result.check("a CUDA device is visible", info["name"] or "none", "one", info["cuda"])
