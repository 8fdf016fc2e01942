"""Tokenise a language-modelling corpus and cache it as id tensors.

Each line becomes its whitespace-separated words plus one ``<eos>`` (blank lines included), as
the AWD-LSTM, MoS and PyTorch ``word_language_model`` readers do. The vocabulary comes from the
training split alone, ordered by descending training frequency with ties broken by the word
itself, so that id order is frequency order (Mixtape's frequent-token gates rely on it) and is
the same on every machine.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from audit.errors import AuditError
from audit.files import atomic_save

EOS = "<eos>"
SPLITS = ("train", "valid", "test")


def tokenise(path: str | os.PathLike) -> list[str]:
    """All tokens of a file, one ``<eos>`` per line."""
    tokens: list[str] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            tokens.extend(line.split())
            tokens.append(EOS)
    return tokens


def build_vocab(tokens: list[str]) -> list[str]:
    """Words ordered by descending count, ties by the word (deterministic)."""
    counts = Counter(tokens)
    return sorted(counts, key=lambda word: (-counts[word], word))


@dataclass
class Corpus:
    """A tokenised corpus: the vocabulary and one 1-D int64 id tensor per split."""

    vocab: list[str]
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor

    @property
    def word_to_id(self) -> dict[str, int]:
        return {word: i for i, word in enumerate(self.vocab)}

    def split(self, name: str) -> torch.Tensor:
        if name not in SPLITS:
            raise AuditError(f"unknown split {name!r}; known: {', '.join(SPLITS)}")
        return getattr(self, name)


def prepare(folder: str | os.PathLike) -> Corpus:
    """Tokenise ``folder/{train,valid,test}.txt``; valid/test words unseen in train are an error."""
    folder = Path(folder)
    texts = {}
    for split in SPLITS:
        path = folder / f"{split}.txt"
        if not path.is_file():
            raise AuditError(f"missing corpus file {path}")
        texts[split] = tokenise(path)
    vocab = build_vocab(texts["train"])
    index = {word: i for i, word in enumerate(vocab)}
    ids = {}
    for split, tokens in texts.items():
        unknown = next((t for t in tokens if t not in index), None)
        if unknown is not None:
            raise AuditError(f"{folder / (split + '.txt')}: token {unknown!r} is not in the training vocabulary")
        ids[split] = torch.tensor([index[t] for t in tokens], dtype=torch.int64)
    return Corpus(vocab=vocab, **ids)


def save(corpus: Corpus, path: str | os.PathLike) -> None:
    """Write the id tensors and vocabulary atomically."""
    atomic_save({"vocab": corpus.vocab, **{s: corpus.split(s) for s in SPLITS}}, path)


def load(path: str | os.PathLike) -> Corpus:
    if not Path(path).is_file():
        raise AuditError(f"missing corpus cache {path}; run the data rules first")
    blob = torch.load(path, weights_only=True)
    return Corpus(vocab=list(blob["vocab"]), **{s: blob[s] for s in SPLITS})


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit prepare", description=__doc__)
    parser.add_argument("--folder", required=True, help="folder with train.txt, valid.txt, test.txt")
    parser.add_argument("--out", required=True, help="cache file to write (torch format)")
    args = parser.parse_args(argv)
    corpus = prepare(args.folder)
    save(corpus, args.out)
    sizes = ", ".join(f"{s} {len(corpus.split(s)):,}" for s in SPLITS)
    print(f"{args.folder}: {len(corpus.vocab):,} types; tokens: {sizes}")
    return 0
