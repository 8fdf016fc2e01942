"""Obtain one data file from an offline mirror or its canonical URL, verified by its pinned checksum.

Sources and checksums are pinned in ``sources.yaml`` beside this module: a plain file's URL at a
fixed commit, or, for a corpus published only as an archive (WikiText-103), the archive's URL
and the file's ``member`` inside it. Each file carries a ``sha256``, or the ``sha1`` its only
published pin gives, or both (every one given must match). A mirror is a folder laid out as
``<mirror>/<dataset>/<file>`` (``shared/data`` is one), plain files whatever the source. The file
is written to a temporary name in the destination folder and renamed only after its checksums
matched, so a failure never leaves a partial or unverified file behind. A downloaded archive is
kept (``<dest folder>/.archives/``) so the corpus's other files are taken from it, not downloaded
again, also by jobs fetching them at the same time (they wait for the first one's download under a
lock); each member is still verified against its own pin.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import tempfile
import urllib.request
import zipfile
from contextlib import contextmanager, suppress
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from audit.errors import AuditError
from audit.files import digest_of

MIRROR_ENV = "AUDIT_DATA_MIRROR"  # environment variable naming an offline mirror folder
DIGESTS = ("sha256", "sha1")      # the checksums an entry of sources.yaml may pin, strongest first
ARCHIVES = ".archives"            # where downloaded archives are kept, inside the destination folder


@lru_cache(maxsize=1)
def sources() -> dict:
    """The pinned ``{dataset: {file: {url, [member], sha256 and/or sha1}}}`` table."""
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


def pins(entry: dict) -> dict[str, str]:
    """``{algorithm: hex digest}`` of every checksum an entry pins (at least one: a test checks)."""
    return {algorithm: entry[algorithm] for algorithm in DIGESTS if algorithm in entry}


def verify(path: Path, entry: dict, origin: str) -> None:
    """Raise unless every pinned checksum of ``entry`` matches ``path``'s content."""
    for algorithm, expected in pins(entry).items():
        actual = digest_of(path, algorithm)
        if actual != expected:
            raise AuditError(f"checksum mismatch for {origin}: expected {algorithm} {expected}, got {actual}")


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


@contextmanager
def _locked(path: Path):
    """Hold an exclusive ``flock`` on the file ``path`` (created if missing) for the block.

    A holder that fails removes the file, and so its folder may go too; a job that was waiting on
    it then holds a lock nobody else can see, so it checks that ``path`` is still the file it
    locked and otherwise starts over. A lock file, not the folder, because ``flock`` on NFS (where
    cluster jobs often run) needs a file opened for writing."""
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the folder went between the two lines above
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        yield
    finally:
        os.close(fd)


def _download(url: str, path: Path) -> None:
    """Download ``url`` to ``path`` through a temporary name in its folder (renamed when complete)."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        _copy_from(url, Path(tmp_name))
        os.replace(tmp_name, path)
    finally:
        Path(tmp_name).unlink(missing_ok=True)


def _member(entry: dict, origin: str, folder: Path, tmp: Path) -> None:
    """Write the verified ``entry["member"]`` of the archive at ``entry["url"]`` to ``tmp``.

    The archive is downloaded once into ``folder`` and kept for the corpus's other files. One job
    at a time per archive: Snakemake fetches a corpus's train, valid and test files in parallel, and
    without the lock each would find no archive and download all of it. A download that fails, or
    an archive that is damaged or gives a wrong member, leaves nothing (the archive, its lock file
    and an emptied folder are removed) and raises ``OSError`` or ``AuditError``.
    """
    archive = folder / entry["url"].rsplit("/", 1)[-1]
    lock = folder / f"{archive.name}.lock"
    with _locked(lock):
        try:
            if not archive.exists():
                _download(entry["url"], archive)
            _extract(archive, entry["member"], tmp)
            verify(tmp, entry, origin)
        except (OSError, AuditError):
            archive.unlink(missing_ok=True)  # a damaged or different archive is not kept
            lock.unlink(missing_ok=True)     # still held: a waiting job sees it gone and starts over
            with suppress(OSError):
                folder.rmdir()               # only if empty: another archive's lock may be in it
            raise


def _extract(archive: Path, member: str, tmp: Path) -> None:
    """Copy one member of a zip archive to ``tmp``; a damaged archive or a missing member is an
    ``OSError`` (this source cannot be read), as an unreachable URL is."""
    try:
        with zipfile.ZipFile(archive) as zf, zf.open(member) as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
    except (zipfile.BadZipFile, KeyError) as err:
        raise OSError(f"{archive}: {err}") from err


def fetch(dataset: str, name: str, dest: str | os.PathLike, mirror: str | os.PathLike | None = None) -> Path:
    """Place the verified file ``dataset/name`` at ``dest``.

    Tries the mirror (if any) first, then the canonical URL (the archive's, for a ``member``
    entry). A checksum mismatch is an error at once (a corrupted mirror must not be papered over
    by a download); a source that cannot be read is skipped, and when none is left the error
    lists the places tried.

    Returns:
        The destination path.
    """
    entry = source(dataset, name)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    root = resolve_mirror(mirror)
    member = entry.get("member")
    url = f"{entry['url']}!{member}" if member else entry["url"]  # how the archive's member is named
    origins = ([str(root / dataset / name)] if root else []) + [url]
    tried = []
    for origin in origins:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            if origin == url and member:
                _member(entry, origin, dest.parent / ARCHIVES, tmp)
            else:
                _copy_from(origin, tmp)
                verify(tmp, entry, origin)
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
    parser.add_argument("--dataset", required=True, help=f"one of {', '.join(sources())}")
    parser.add_argument("--file", required=True, help="file name inside the dataset, e.g. train.txt")
    parser.add_argument("--out", required=True, help="destination path")
    parser.add_argument("--mirror", default=None, help=f"offline mirror folder (default: ${MIRROR_ENV})")
    args = parser.parse_args(argv)
    path = fetch(args.dataset, args.file, args.out, args.mirror)
    print(f"{args.dataset}/{args.file}: {' and '.join(pins(source(args.dataset, args.file)))} ok -> {path}")
    return 0
