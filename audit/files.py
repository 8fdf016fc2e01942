"""Atomic file writes and checksums, shared by every stage.

A file is written to a temporary name in its destination folder and renamed into place, so a
crash or a kill never leaves a half-written output that a later stage would trust.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, then rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


def atomic_write_text(text: str, path: str | os.PathLike) -> Path:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)

    return atomic_write(path, write)



def write_table(df, path: str | os.PathLike) -> Path:
    """Write the DataFrame ``df`` as CSV atomically (10 significant digits, no index): every
    stage's tables, so the evaluate and stats stages write them alike."""
    return atomic_write_text(df.to_csv(index=False, float_format="%.10g"), path)

def atomic_save(obj, path: str | os.PathLike) -> Path:
    """``torch.save`` atomically."""
    import torch

    return atomic_write(path, lambda tmp: torch.save(obj, tmp))


def digest_of(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """Hex digest of a file's bytes by ``hashlib``'s ``algorithm``, read in 1 MiB blocks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_of(path: str | os.PathLike) -> str:
    return digest_of(path, "sha256")
