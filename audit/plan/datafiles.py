"""The data files a study reads, named as paths of an offline mirror (``<dataset>/<file>``).

    python -m audit data-files CONFIG [--mirror DIR]

prints one path per line on stdout, so that the list can feed a copy of the mirror to a machine
without network, e.g. ``python -m audit data-files configs/smoke.yaml | rsync -a --files-from=-
shared/data node:data``. With a mirror (``--mirror``, else the config's ``data.mirror``, else
``$AUDIT_DATA_MIRROR``) every listed file is also checked there against its pinned checksums, and
stderr gets their number and total size.

What a study reads (the inputs of ``rules/data.smk``'s fetch rules in its DAG):
- each corpus of ``data.corpora``: its train, valid and test files;
- the word-similarity benchmarks (``sources.yaml``'s ``wordsim``), when the study trains
  language models (a corpus and a head): the evaluate job of every run scores all of them, and no
  ``evaluate:`` setting turns that off. A study without runs (published, synthetic) reads none.

A corpus of the user's own files (``data.files``) is in no mirror: its files are not on stdout
but on stderr, one line per corpus with their paths and total size, so that a copy of the
study to another machine does not forget them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from audit.data.fetch import MIRROR_ENV, pins, resolve_mirror, source, sources
from audit.data.text import SPLITS  # the files of a corpus, <split>.txt
from audit.errors import AuditError
from audit.files import digest_of

WORDSIM = "wordsim"  # the dataset of the word-similarity benchmarks in sources.yaml


def wordsim_files() -> list[str]:
    """File names of the word-similarity benchmarks, in sources.yaml's order."""
    return list(sources()[WORDSIM])


def study_files(config: dict) -> list[str]:
    """``<dataset>/<file>`` of every data file a validated study config reads: the corpora's
    splits in ``data.corpora``'s order, then the word-similarity benchmarks when it has runs.

    Raises:
        AuditError: a corpus without pinned sources, naming it.
    """
    corpora = config["data"]["corpora"]
    own = config["data"].get("files") or {}
    files = []
    for corpus in corpora:
        if corpus in own:  # a user corpus: not in any mirror (user_files lists it)
            continue
        for split in SPLITS:
            source(corpus, f"{split}.txt")  # an unpinned corpus or file fails here, by name
            files.append(f"{corpus}/{split}.txt")
    if corpora and config["heads"]:  # rules/common.smk study_has_runs(): the evaluate jobs exist
        files += [f"{WORDSIM}/{name}" for name in wordsim_files()]
    return files


def user_file_lines(config: dict) -> list[str]:
    """One line per user corpus of a validated study: its name, its files (as the checked
    config resolved them, in split order) and their total size."""
    from audit.data.user import user_files

    lines = []
    for corpus, paths in user_files(config).items():
        files = [paths[split] for split in SPLITS]
        total = sum(Path(f).stat().st_size for f in files)
        lines.append(f"{corpus}: your corpus, in no mirror ({total} bytes): {' '.join(files)}")
    return lines


def mirror_bytes(files: list[str], mirror: Path) -> int:
    """Total size in bytes of ``files`` in ``mirror``, each verified against its pinned checksums
    (SHA-256; WikiText-103's SHA-1).

    Raises:
        AuditError: the first file that is missing or whose checksum differs, with the count of such files.
    """
    bad = []
    total = 0
    for name in files:
        path = mirror / name
        dataset, file = name.split("/", 1)
        if not path.is_file():
            bad.append(f"{path} is missing")
        elif wrong := [a for a, pin in pins(source(dataset, file)).items() if digest_of(path, a) != pin]:
            bad.append(f"{path} does not match its pinned {wrong[0]}")
        else:
            total += path.stat().st_size
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise AuditError(f"mirror {mirror}: {bad[0]}{more}")
    return total


def main(argv: list[str]) -> int:
    from audit.config import load_study

    parser = argparse.ArgumentParser(prog="python -m audit data-files", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="study config, e.g. configs/smoke.yaml")
    parser.add_argument("--mirror", default=None,
                        help=f"offline mirror to check and size (default: data.mirror, else ${MIRROR_ENV})")
    args = parser.parse_args(argv)
    config = load_study(args.config)
    files = study_files(config)
    for name in files:
        print(name)
    for line in user_file_lines(config):
        print(line, file=sys.stderr)
    mirror = resolve_mirror(args.mirror or config["data"]["mirror"])
    if mirror is not None:
        total = mirror_bytes(files, mirror)
        checked = dict.fromkeys(a for name in files for a in pins(source(*name.split("/", 1))))
        verdict = f"{' and '.join(checked)} ok" if checked else "nothing to check"
        print(f"{len(files)} files, {total} bytes ({total / 2 ** 20:.1f} MiB) in {mirror}, {verdict}",
              file=sys.stderr)
    return 0
