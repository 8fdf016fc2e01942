"""Tokenise a language-modelling corpus and cache it as id tensors.

Each line becomes its whitespace-separated words plus one ``<eos>`` (blank lines included), as
the AWD-LSTM, MoS and PyTorch ``word_language_model`` readers do. The vocabulary comes from the
training split alone, ordered by descending training frequency with ties broken by the word
itself, so that id order is frequency order (Mixtape's frequent-token gates rely on it) and is
the same on every machine.

A study may scale the vocabulary down (``data.vocab_size: K``): ``restrict_vocab`` keeps the K
most frequent training words and maps every other word to ``<unk>``, declared in the run's
settings and shown in the audit with each split's ``<unk>`` rate, never hidden. A valid or test
word never seen in training is then the same case as a word past the first K (issue 49): under
a cap it becomes ``<unk>`` too (``prepare_files(..., unseen_to_unk=True)``); without one it is
an error unless the training text has ``<unk>`` itself (PTB, WikiText), as a model cannot score
a word it has no id for.

A user's corpus (``data.files`` of a study, ``audit/data/user.py``) is read the same way
(``prepare_files``; ``audit/data/text.py`` reads plain or gzip files, strictly UTF-8).

A study may instead use a byte-level BPE of K subword tokens (``data.tokenizer: bpe``,
``audit/data/bpe.py``): its corpus also records which tokens end a word (``word_end``), so a
perplexity per word can be reported beside the one per token.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch

from audit.data.text import EOS, SPLITS, lines, tokenise
from audit.errors import AuditError
from audit.files import atomic_save

UNK = "<unk>"


def build_vocab(tokens: list[str]) -> list[str]:
    """Words ordered by descending count, ties by the word (deterministic)."""
    counts = Counter(tokens)
    return sorted(counts, key=lambda word: (-counts[word], word))


@dataclass
class Corpus:
    """A tokenised corpus: the vocabulary and one 1-D int64 id tensor per split. A subword corpus
    (``audit/data/bpe.py``) also has ``word_end``: per split, shape (n,) bool, whether each token
    ends a word of the word corpus; empty for a word corpus, where every token is a word."""

    vocab: list[str]
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor
    word_end: dict = field(default_factory=dict)

    @property
    def subword(self) -> bool:
        return bool(self.word_end)

    @property
    def word_to_id(self) -> dict[str, int]:
        return {word: i for i, word in enumerate(self.vocab)}

    def split(self, name: str) -> torch.Tensor:
        if name not in SPLITS:
            raise AuditError(f"unknown split {name!r}; known: {', '.join(SPLITS)}")
        return getattr(self, name)


def prepare(folder: str | os.PathLike, unseen_to_unk: bool = False) -> Corpus:
    """Tokenise ``folder/{train,valid,test}.txt`` (``prepare_files``)."""
    folder = Path(folder)
    return prepare_files({split: folder / f"{split}.txt" for split in SPLITS}, unseen_to_unk)


def prepare_files(paths: dict, unseen_to_unk: bool = False) -> Corpus:
    """Tokenise the files ``{split: path}`` (plain, or gzip when named ``.gz``) into a Corpus.

    The vocabulary is the training split's. A valid or test word outside it becomes ``<unk>``
    when the vocabulary has ``<unk>`` (PTB, WikiText-2 and many prepared corpora mark their rare
    words so), and is an error otherwise: a model cannot score a word it has no id for.
    ``unseen_to_unk`` (a capped vocabulary, ``data.vocab_size``, whose ``restrict_vocab`` maps
    rare words to ``<unk>`` anyway) maps them to ``<unk>`` even then: ``<unk>`` joins the
    vocabulary with no training count, so it comes last until ``restrict_vocab`` counts it.

    Raises:
        AuditError: one line naming the file: missing, not UTF-8 (byte offset), a split without
            a single word, or (no ``<unk>``, no ``unseen_to_unk``) the line and the first word
            unseen in training.
    """
    texts = {}
    for split in SPLITS:
        texts[split] = tokenise(paths[split])
        if len(texts[split]) == texts[split].count(EOS):
            raise AuditError(f"{paths[split]}: the {split} split has no words")
    vocab = build_vocab(texts["train"])
    index = {word: i for i, word in enumerate(vocab)}
    if unseen_to_unk and UNK not in index and any(t not in index for s in ("valid", "test") for t in texts[s]):
        vocab.append(UNK)   # no training count: last, as build_vocab would order it
        index[UNK] = len(vocab) - 1
    ids = {}
    for split, tokens in texts.items():
        if UNK not in index and any(t not in index for t in tokens):
            line, word = _first_unknown(paths[split], index)
            raise AuditError(f"{paths[split]}: line {line}: token {word!r} is not in the training vocabulary "
                             f"(which has no {UNK} to map it to)")
        unk = index.get(UNK)
        ids[split] = torch.tensor([index.get(t, unk) for t in tokens], dtype=torch.int64)
    return Corpus(vocab=vocab, **ids)


def _first_unknown(path, index: dict) -> tuple[int, str]:
    """(line number, word) of the first word of ``path`` missing from ``index``."""
    for number, text in lines(path):
        for word in text.split():
            if word not in index:
                return number, word
    raise AssertionError(f"{path}: no unknown word found")  # only called when one exists


def restrict_vocab(corpus: Corpus, size: int) -> Corpus:
    """The corpus with its vocabulary cut to ``size`` words, every other word mapped to ``<unk>``.

    The kept words are the ``size`` most frequent training words (ties broken by the word, the
    vocabulary's own order); if ``<unk>`` is not among them, the ``size - 1`` most frequent words
    and ``<unk>`` (so the vocabulary has exactly ``size`` entries either way). Ids are then
    re-ordered by the training counts *after* the mapping, ties by the word, so id order stays
    frequency order. Deterministic: the result depends on the corpus alone.

    Raises:
        AuditError: ``size`` below 2 or above the corpus's vocabulary.
    """
    full = len(corpus.vocab)
    if not 2 <= size <= full:
        raise AuditError(f"config key data.vocab_size: {size} must be between 2 and the corpus's {full:,} words")
    if size == full:
        return corpus
    kept = corpus.vocab[:size]
    if UNK not in kept:
        kept = corpus.vocab[: size - 1] + [UNK]
    keep = set(kept)
    target = [word if word in keep else UNK for word in corpus.vocab]  # old id -> word after the mapping
    counts = torch.bincount(corpus.train, minlength=full)
    new_counts: dict[str, int] = {}
    for word, count in zip(target, counts.tolist()):
        new_counts[word] = new_counts.get(word, 0) + count
    vocab = sorted(kept, key=lambda word: (-new_counts.get(word, 0), word))
    index = {word: i for i, word in enumerate(vocab)}
    lookup = torch.tensor([index[word] for word in target], dtype=torch.int64)
    return Corpus(vocab=vocab, **{s: lookup[corpus.split(s)] for s in SPLITS})


def unk_rate(corpus: Corpus, split: str) -> float:
    """Share of a split's tokens that are ``<unk>`` (0.0 when the vocabulary has no ``<unk>``)."""
    if UNK not in corpus.vocab:
        return 0.0
    ids = corpus.split(split)
    return float((ids == corpus.vocab.index(UNK)).sum()) / max(len(ids), 1)


def save(corpus: Corpus, path: str | os.PathLike) -> None:
    """Write the id tensors and vocabulary (and a subword corpus's ``word_end``) atomically."""
    blob = {"vocab": corpus.vocab, **{s: corpus.split(s) for s in SPLITS}}
    blob |= {f"word_end_{s}": ends for s, ends in corpus.word_end.items()}  # none for a word corpus
    atomic_save(blob, path)


def load(path: str | os.PathLike) -> Corpus:
    if not Path(path).is_file():
        raise AuditError(f"missing corpus cache {path}; run the data rules first")
    blob = torch.load(path, weights_only=True)
    word_end = {s: blob[f"word_end_{s}"] for s in SPLITS if f"word_end_{s}" in blob}
    return Corpus(vocab=list(blob["vocab"]), **{s: blob[s] for s in SPLITS}, word_end=word_end)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit prepare", description=__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--folder", help="folder with train.txt, valid.txt, test.txt")
    source.add_argument("--files", nargs=3, metavar=("TRAIN", "VALID", "TEST"),
                        help="a user corpus's three files (plain text, or gzip when named .gz)")
    source.add_argument("--from-cache", help="a corpus cache written by this verb (to restrict its vocabulary)")
    parser.add_argument("--vocab-size", type=int, default=None,
                        help="word: keep the K most frequent training words, the rest and any valid or test "
                             "word unseen in training -> <unk>; bpe: K subword tokens")
    parser.add_argument("--tokenizer", choices=["word", "bpe"], default="word",
                        help="bpe: train a byte-level BPE of --vocab-size tokens on the train split (audit/data/bpe.py)")
    parser.add_argument("--tokenizer-out", help="bpe: where to write the tokenizer's JSON (default: OUT with .json)")
    parser.add_argument("--out", required=True, help="cache file to write (torch format)")
    args = parser.parse_args(argv)
    if args.tokenizer == "bpe":
        return _main_bpe(args)
    capped = args.vocab_size is not None      # then unseen words are <unk> like rare ones
    if args.files:
        corpus = prepare_files(dict(zip(SPLITS, args.files)), unseen_to_unk=capped)
    else:
        corpus = prepare(args.folder, unseen_to_unk=capped) if args.folder else load(args.from_cache)
    if args.vocab_size is not None:
        corpus = restrict_vocab(corpus, args.vocab_size)
    save(corpus, args.out)
    sizes = ", ".join(f"{s} {len(corpus.split(s)):,} ({unk_rate(corpus, s):.2%} {UNK})" for s in SPLITS)
    print(f"{args.folder or args.from_cache or ' '.join(args.files)}: {len(corpus.vocab):,} types; tokens: {sizes}")
    return 0


def _main_bpe(args) -> int:
    """``prepare --tokenizer bpe``: train the BPE on the train file, encode, save both atomically."""
    from audit.data.bpe import prepare_bpe

    if args.vocab_size is None:
        raise AuditError("--tokenizer bpe needs --vocab-size (config key data.vocab_size)")
    if args.from_cache:
        raise AuditError("--tokenizer bpe reads the text (--folder or --files), not --from-cache")
    paths = dict(zip(SPLITS, args.files)) if args.files else {s: Path(args.folder) / f"{s}.txt" for s in SPLITS}
    out = Path(args.out)
    blob = prepare_bpe(paths, args.vocab_size, args.tokenizer_out or out.with_suffix(".json"))
    corpus = Corpus(vocab=blob["vocab"], **{s: blob[s] for s in SPLITS},
                    word_end={s: blob[f"word_end_{s}"] for s in SPLITS})
    save(corpus, out)
    sizes = ", ".join(f"{s} {len(corpus.split(s)):,} tokens / {int(corpus.word_end[s].sum()):,} words" for s in SPLITS)
    print(f"{args.folder or ' '.join(args.files)}: byte-level BPE of {len(corpus.vocab):,} tokens; {sizes}")
    return 0
