"""Device choice shared by training, evaluation and the synthetic fits.

``auto`` means CUDA when this process sees a GPU, else the CPU; ``cuda`` insists on a GPU and
fails in one line without one, so a study meant for GPUs never silently trains on a CPU.
"""

from __future__ import annotations

import torch

from audit.errors import AuditError


def resolve_device(name: str) -> torch.device:
    """The torch device for a ``train.device`` (or ``synthetic.device``) setting."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise AuditError("train.device is 'cuda' but no CUDA device is available")
    return torch.device(name)
