"""Read a corpus text file line by line: plain or gzip (by a ``.gz`` name), strictly UTF-8.

Torch-free, so that the study check (``audit.config``) can summarise a user's corpus files
while Snakemake parses, with the same reader ``audit.data.corpus`` tokenises them with: one
definition of a line and a token for the cached corpus, the run settings and the planner.

A line ends at ``"\\n"`` (a ``"\\r\\n"`` ending leaves a ``"\\r"``, which is whitespace, so it
does not reach a token); its tokens are its whitespace-separated words (``str.split``). Every
failure is one ``AuditError`` line naming the file: missing, not gzip though named ``.gz``, or
not UTF-8 (with the byte offset of the first bad byte, counted in the decompressed text for a
``.gz`` file).
"""

from __future__ import annotations

import functools
import gzip
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from audit.errors import AuditError
from audit.files import sha256_of

EOS = "<eos>"  # one per line, blank lines included (audit.data.corpus)
SPLITS = ("train", "valid", "test")  # a corpus's three files, in this order everywhere


def _open(path: Path):
    """A binary handle on the file's text: decompressed when its name ends in ``.gz``."""
    if not path.is_file():
        raise AuditError(f"{path}: corpus file not found")
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """``(line number from 1, text)`` of every line of the file, decoded as UTF-8.

    Raises:
        AuditError: ``<path>: ...`` one line: file not found, not gzip, or not UTF-8 at byte N.
    """
    path = Path(path)
    offset = 0
    try:
        with _open(path) as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    where = " of the decompressed text" if path.name.endswith(".gz") else ""
                    raise AuditError(f"{path}: not UTF-8 text: byte 0x{raw[err.start]:02x} at byte offset "
                                     f"{offset + err.start}{where} (line {number})") from None
                offset += len(raw)
                yield number, text
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise AuditError(f"{path}: not a readable gzip file ({err or type(err).__name__})") from None


def tokenise(path: str | os.PathLike) -> list[str]:
    """All tokens of a file, one ``<eos>`` per line."""
    tokens: list[str] = []
    for _, text in lines(path):
        tokens.extend(text.split())
        tokens.append(EOS)
    return tokens


@dataclass(frozen=True)
class Summary:
    """What the run settings and the planner need of one corpus file: its SHA-256 (of the bytes
    as stored, compressed or not), its tokens (``<eos>`` included) and its distinct tokens."""

    sha256: str
    tokens: int
    types: int


def summarise(path: str | os.PathLike) -> Summary:
    """The file's ``Summary``, computed once per process for an unchanged file (same size and
    modification time): Snakemake asks for every run's settings."""
    path = Path(path).resolve()
    if not path.is_file():
        raise AuditError(f"{path}: corpus file not found")
    stat = path.stat()
    return _summarise(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _summarise(path: str, size: int, mtime_ns: int) -> Summary:
    types: set[str] = set()
    n = 0
    for _, text in lines(path):
        words = text.split()
        types.update(words)
        n += len(words) + 1
    if n:
        types.add(EOS)
    return Summary(sha256=sha256_of(path), tokens=n, types=len(types))
