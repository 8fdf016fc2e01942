"""A study's own corpora: ``data.files`` checked, its paths resolved, its files summarised.

    data:
      corpora: [mytext]
      files:
        mytext: {train: path/train.txt, valid: path/valid.txt.gz, test: path/test.txt}

Torch-free (``audit.config`` calls it while Snakemake parses). A user corpus is tokenised as
WikiText is (``audit.data.corpus.prepare_files``). What a run depends on is the files' content,
not where they lie: ``settings_entry`` records each file's SHA-256 in the run settings (so a
changed file retrains its runs, a moved one does not), with the token and type counts that
follow from it, which the planner (``audit.plan.resources``, ``audit.model.params``) sizes the
runs by. A study without user corpora gets no such key, so its settings stay as they were.
"""

from __future__ import annotations

from pathlib import Path

from audit.data.fetch import sources
from audit.data.text import SPLITS, summarise
from audit.errors import AuditError

WORDSIM = "wordsim"  # the one dataset of sources.yaml that is not a corpus


def builtin_corpora() -> list[str]:
    """The corpora fetched from pinned sources (sources.yaml, less the word-similarity benchmarks)."""
    return [name for name in sources() if name != WORDSIM]


def user_files(config: dict) -> dict[str, dict[str, str]]:
    """``{corpus: {split: path}}`` of a checked study's own corpora that it trains on."""
    files = config["data"].get("files") or {}
    return {name: dict(files[name]) for name in config["data"]["corpora"] if name in files}


def is_user_corpus(config: dict, corpus: str) -> bool:
    return corpus in (config["data"].get("files") or {})


def check_user_corpora(config: dict, source: str, base: str | Path | None = None) -> None:
    """What the schema cannot say about ``data.corpora`` and ``data.files``; resolves, in place,
    every relative path in ``data.files`` against ``base`` (the workflow directory; default the
    working directory, which is the workflow directory for Snakemake and the CLI verbs).

    Raises:
        AuditError: one line naming the key: a user corpus named as a built-in one, a corpus that
            is neither built in nor given files, or a file that does not exist.
    """
    builtin = builtin_corpora()
    files = config["data"].get("files") or {}
    for name in files:
        if name in builtin:
            raise AuditError(f"{source}: config key data.files.{name}: {name!r} is a built-in corpus "
                             f"({', '.join(builtin)}); give your corpus another name")
    for i, corpus in enumerate(config["data"]["corpora"]):
        if corpus not in builtin and corpus not in files:
            raise AuditError(f"{source}: config key data.corpora[{i}]: unknown corpus {corpus!r}; built-in: "
                             f"{', '.join(builtin)}; or give its files under data.files.{corpus}")
    root = Path(base) if base is not None else Path.cwd()
    for name, splits in files.items():
        for split in SPLITS:
            path = Path(splits[split]).expanduser()
            path = path if path.is_absolute() else root / path
            if not path.is_file():
                raise AuditError(f"{source}: config key data.files.{name}.{split}: file not found: {path}")
            splits[split] = str(path.resolve())


def settings_entry(paths: dict[str, str]) -> dict:
    """The ``user_corpus`` run-settings entry of one corpus's files ``{split: path}``:
    ``{"files": {split: {"sha256", "tokens"}}, "vocab": V}``, V the training split's distinct
    tokens (``<eos>`` included), i.e. the full vocabulary ``prepare_files`` builds."""
    summaries = {split: summarise(paths[split]) for split in SPLITS}
    return {"files": {split: {"sha256": s.sha256, "tokens": s.tokens} for split, s in summaries.items()},
            "vocab": summaries["train"].types}
