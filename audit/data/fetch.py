"""Obtain one data file from an offline mirror or its canonical URL, verified by SHA-256.

Sources and checksums are pinned in ``sources.yaml`` beside this module. A mirror is a folder
laid out as ``<mirror>/<dataset>/<file>`` (``shared/data`` is one). The file is written to a
temporary name in the destination folder and renamed only after its checksum matched, so a
failure never leaves a partial or unverified file behind.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import urllib.request
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from audit.errors import AuditError
from audit.files import sha256_of

MIRROR_ENV = "AUDIT_DATA_MIRROR"  # environment variable naming an offline mirror folder


@lru_cache(maxsize=1)
def sources() -> dict:
    """The pinned ``{dataset: {file: {url, sha256}}}`` table."""
    text = resources.files("audit.data").joinpath("sources.yaml").read_text()
    return yaml.safe_load(text)


def source(dataset: str, name: str) -> dict:
    """The pinned entry for one file; unknown names fail with the known ones."""
    table = sources()
    if dataset not in table:
        raise AuditError(f"unknown dataset {dataset!r}; known: {', '.join(table)}")
    if name not in table[dataset]:
        raise AuditError(f"unknown file {name!r} in dataset {dataset!r}; known: {', '.join(table[dataset])}")
    return table[dataset][name]


def resolve_mirror(mirror: str | os.PathLike | None) -> Path | None:
    """The mirror to use: an explicit setting first, else ``$AUDIT_DATA_MIRROR``, else none."""
    chosen = mirror if mirror else os.environ.get(MIRROR_ENV)
    return Path(chosen) if chosen else None


def _copy_from(origin: str, tmp: Path) -> None:
    if "://" in origin:
        with urllib.request.urlopen(origin, timeout=60) as response, open(tmp, "wb") as out:
            while block := response.read(1 << 20):
                out.write(block)
    else:
        with open(origin, "rb") as src, open(tmp, "wb") as out:
            while block := src.read(1 << 20):
                out.write(block)


def fetch(dataset: str, name: str, dest: str | os.PathLike, mirror: str | os.PathLike | None = None) -> Path:
    """Place the verified file ``dataset/name`` at ``dest``.

    Tries the mirror (if any) first, then the canonical URL. A checksum mismatch is an error
    at once (a corrupted mirror must not be papered over by a download); a source that cannot
    be read is skipped, and when none is left the error lists the places tried.

    Returns:
        The destination path.
    """
    entry = source(dataset, name)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    root = resolve_mirror(mirror)
    origins = ([str(root / dataset / name)] if root else []) + [entry["url"]]
    tried = []
    for origin in origins:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            _copy_from(origin, tmp)
            actual = sha256_of(tmp)
            if actual != entry["sha256"]:
                raise AuditError(
                    f"checksum mismatch for {origin}: expected sha256 {entry['sha256']}, got {actual}")
            os.replace(tmp, dest)
            return dest
        except OSError as err:  # unreadable or unreachable source: try the next one
            tried.append(f"{origin} ({type(err).__name__})")
        finally:
            tmp.unlink(missing_ok=True)
    raise AuditError(f"cannot obtain {dataset}/{name}: tried {'; '.join(tried)}"
                     + ("" if root else f"; set {MIRROR_ENV} or data.mirror to an offline mirror"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit fetch", description=__doc__)
    parser.add_argument("--dataset", required=True, help="ptb, wikitext-2 or wordsim")
    parser.add_argument("--file", required=True, help="file name inside the dataset, e.g. train.txt")
    parser.add_argument("--out", required=True, help="destination path")
    parser.add_argument("--mirror", default=None, help=f"offline mirror folder (default: ${MIRROR_ENV})")
    args = parser.parse_args(argv)
    path = fetch(args.dataset, args.file, args.out, args.mirror)
    print(f"{args.dataset}/{args.file}: sha256 ok -> {path}")
    return 0
