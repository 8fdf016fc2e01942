"""A byte-level BPE vocabulary of K subword tokens (``data.tokenizer: bpe``, ``data.vocab_size: K``).

The tokenizer is Hugging Face ``tokenizers``' BPE over bytes, trained on the training split's
text alone, so the valid and test text never shapes the vocabulary. Each line is read as the
word corpus reads it (``audit/data/text.py``): its whitespace-separated words, then one
``<eos>``, a special token never split or merged. Pre-tokenisation is the whitespace split
followed by the byte-level map without its regex (``use_regex=False``), so a pre-token is
exactly one whitespace word: merges never cross a word boundary, and every subword token
belongs to one word of the word corpus.

Each split records, besides its token ids, which tokens end a word (``word_end``, shape (n,)
bool; ``<eos>`` counts as a word, as in the word corpus), so that a perplexity per word is
the same NLL sum over the number of words scored (``words_scored``) and can be compared with a
word-vocabulary run's.

Determinism: BPE training draws no random numbers, so there is no seed to set; what could vary
is the order of the trainer's hash maps (a new random state per process) and thus the choice
between pairs of equal count. The trainer is given the lines in file order, the full byte
alphabet up front (``ByteLevel.alphabet()``, all 256 bytes, which also makes every test text
encodable) and ``min_frequency=2``; ``tokenizers``' BpeTrainer then picks the most frequent pair
with ties broken by the pair's ids, not by map order. This is checked, not assumed:
``tests/data/test_bpe.py`` trains twice in separate processes with different hash seeds and
requires identical merges and an identical tokenizer JSON (PTB's train split at K = 300 gave
the same merges' SHA-256 in two processes, too). The ids are then re-numbered by descending
training count, ties by the token string, so that id order is frequency order as in the word
corpus (Mixtape's frequent-token gates rely on it).

``tokenizers`` is imported here only, when a BPE corpus is prepared, so planning stays light.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import torch

from audit.data.text import EOS, SPLITS, lines
from audit.errors import AuditError
from audit.files import atomic_write_text

BYTES = 256  # the byte alphabet every byte-level BPE vocabulary starts from
MIN_VOCAB = BYTES + 1  # the bytes and <eos>


def _line_words(path) -> list[list[str]]:
    """The whitespace words of each line of ``path`` (``audit.data.text.lines``)."""
    return [text.split() for _, text in lines(path)]


def train_tokenizer(train_lines: list[list[str]], size: int):
    """A byte-level BPE ``tokenizers.Tokenizer`` of exactly ``size`` tokens (256 bytes, ``<eos>``
    and ``size - 257`` merges) trained on ``train_lines`` (each a list of words).

    Raises:
        AuditError: ``size`` below 257, or above what the training text's merges can reach.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if size < MIN_VOCAB:
        raise AuditError(f"config key data.vocab_size: {size} is below {MIN_VOCAB}, the byte-level BPE's "
                         f"{BYTES} bytes and {EOS}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=size, min_frequency=2, show_progress=False, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator((" ".join(words) for words in train_lines), trainer=trainer)
    got = tokenizer.get_vocab_size()
    if got != size:
        raise AuditError(f"config key data.vocab_size: {size} tokens, but the training split's text allows only "
                         f"{got} (every pair seen twice is merged already)")
    return tokenizer


def encode_lines(tokenizer, split_lines: list[list[str]]) -> tuple[list[str], list[bool]]:
    """Token strings of the lines, each followed by ``<eos>``, and whether each token ends a word.

    Returns:
        (tokens, word_end): two lists of the same length; ``sum(word_end)`` is the word corpus's
        token count of these lines (their words plus one ``<eos>`` each).
    """
    tokens: list[str] = []
    ends: list[bool] = []
    encodings = tokenizer.encode_batch([words for words in split_lines], is_pretokenized=True,
                                       add_special_tokens=False)
    for encoding in encodings:
        word_ids = encoding.word_ids
        tokens += encoding.tokens
        ends += [i + 1 == len(word_ids) or word_ids[i + 1] != w for i, w in enumerate(word_ids)]
        tokens.append(EOS)
        ends.append(True)
    return tokens, ends


def id_order(train_tokens: list[str], tokenizer) -> list[str]:
    """The vocabulary (token strings) by descending training count, ties by the string."""
    counts = Counter(train_tokens)
    return sorted(tokenizer.get_vocab(), key=lambda token: (-counts[token], token))


def prepare_bpe(paths: dict, size: int, tokenizer_out: str | os.PathLike | None = None) -> dict:
    """Train a byte-level BPE of ``size`` tokens on ``paths["train"]`` and encode the three splits.

    Args:
        paths: ``{split: path}`` of plain (or ``.gz``) text files.
        size: K, the vocabulary size.
        tokenizer_out: where to write the tokenizer's JSON (atomically); None: nowhere.

    Returns:
        ``{"vocab": [K token strings], split: shape (n,) int64 ids, f"word_end_{split}": shape (n,)
        bool}`` for each split.

    Raises:
        AuditError: one line naming the file or the key (a split without words, K out of range).
    """
    texts = {}
    for split in SPLITS:
        texts[split] = _line_words(paths[split])
        if not any(texts[split]):
            raise AuditError(f"{paths[split]}: the {split} split has no words")
    tokenizer = train_tokenizer(texts["train"], size)
    encoded = {split: encode_lines(tokenizer, texts[split]) for split in SPLITS}
    vocab = id_order(encoded["train"][0], tokenizer)
    index = {token: i for i, token in enumerate(vocab)}
    blob: dict = {"vocab": vocab}
    for split, (tokens, ends) in encoded.items():
        blob[split] = torch.tensor([index[t] for t in tokens], dtype=torch.int64)
        blob[f"word_end_{split}"] = torch.tensor(ends, dtype=torch.bool)
    if tokenizer_out is not None:
        atomic_write_text(tokenizer.to_str(), Path(tokenizer_out))
    return blob


def load_tokenizer(path: str | os.PathLike):
    """The tokenizer saved by ``prepare_bpe`` (``tokenizers.Tokenizer``)."""
    from tokenizers import Tokenizer

    if not Path(path).is_file():
        raise AuditError(f"missing tokenizer file {path}; run the data rules first")
    return Tokenizer.from_str(Path(path).read_text())


def decode(tokenizer, vocab: list[str], ids) -> list[str]:
    """The text of corpus ids (ids in ``vocab``'s order), one string per ``<eos>``-ended line."""
    out, piece = [], []
    for i in (int(x) for x in ids):
        if vocab[i] == EOS:
            out.append(tokenizer.decode([tokenizer.token_to_id(t) for t in piece]).strip())
            piece = []
        else:
            piece.append(vocab[i])
    return out


def words_scored(word_end: torch.Tensor, start: int, stop: int) -> int:
    """Words whose last token lies in ``[start, stop)``: the words a model scored when it
    predicted those positions (a word counts once its last piece is predicted; for a word
    vocabulary every token ends a word, so this is the number of tokens)."""
    return int(word_end[start:stop].sum())


def merges(tokenizer) -> list:
    """The trained merges, in order (for the determinism check)."""
    return json.loads(tokenizer.to_str())["model"]["merges"]
