"""Count-model baselines of a corpus: the unigram and add-k bigram perplexity a run must beat.

    python -m audit baselines --corpus NAME=CORPUS.pt ... [--max-valid N] [--max-test N] --out baselines.csv
    python -m audit baselines --out baselines.csv     # no corpus: the header alone

Both models are fitted on the training split alone, exactly (counts, no training), on the ids of
the runs' own corpus file (``CORPUS_FILE`` of ``rules/common.smk``: the full vocabulary or its K
most frequent words, ``data.vocab_size``), and scored on the same tokens the runs are scored
on: the first ``data.max_tokens.test`` test tokens (all when unset).

- unigram, add-0.5: ``p(w) = (c(w) + 0.5) / (T + 0.5 V)`` with ``c`` the training counts, ``T``
  the training tokens and ``V`` the vocabulary size (every word of the vocabulary gets mass).
- bigram, add-k: ``p(w | v) = (c(v, w) + k) / (c(v) + k V)``, ``c(v)`` the training bigrams that
  start with ``v``. ``k`` is chosen from ``K_GRID`` by the lowest validation perplexity (the first
  ``data.max_tokens.valid`` validation tokens, as the runs validate), never on the test split.
  Every scored token has a history: the first token of a split is scored after ``<eos>``, the
  token that ends the line before it (each split starts at a line start).

Perplexity is ``exp(-mean log p)`` over the scored tokens (shape (N,) ids). The CSV has one row per
corpus: ``corpus, vocab_size, n_train, n_valid, n_test`` (tokens scored), ``unk_rate_<split>``
(share of the whole split that is ``<unk>``), ``unigram_add``, ``unigram_valid_ppl``,
``unigram_ppl`` (test), ``bigram_k``, ``bigram_k_grid``, ``bigram_valid_ppl``, ``bigram_ppl``
(test). A subword corpus (``data.tokenizer: bpe``, ``audit/data/bpe.py``) adds ``n_test_words``
(the words whose last token is scored), ``unigram_ppl_per_word`` and ``bigram_ppl_per_word``: the
same test NLL sum over the words, as the runs' ``test_ppl_per_word``; a table of word corpora
alone has no such columns. Torch is imported only to read the corpus file. With no ``--corpus`` (a
study that trains nothing and judges only the runs tables of its ``evidence:``) the table is its
header alone: an empty table, not a missing one, so the guard still runs and finds each of those
tables' unigram in the baselines beside it (``audit.stats.sources.evidence_baselines``).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

from audit.data.text import SPLITS
from audit.errors import AuditError

UNIGRAM_ADD = 0.5
K_GRID = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
COLUMNS = ["corpus", "vocab_size", "n_train", "n_valid", "n_test", "unk_rate_train", "unk_rate_valid",
           "unk_rate_test", "unigram_add", "unigram_valid_ppl", "unigram_ppl", "bigram_k", "bigram_k_grid",
           "bigram_valid_ppl", "bigram_ppl"]


PER_WORD_COLUMNS = ["n_test_words", "unigram_ppl_per_word", "bigram_ppl_per_word"]


def per_word_ppl(ppl: float, tokens: int, words: int) -> float:
    """A perplexity over ``tokens`` scored tokens re-expressed per word: the NLL sum
    ``tokens * log(ppl)`` over ``words``."""
    return float(math.exp(tokens * math.log(ppl) / words))


def unigram_ppl(train: np.ndarray, scored: np.ndarray, vocab_size: int, add: float = UNIGRAM_ADD) -> float:
    """Perplexity of the add-``add`` unigram of ``train`` on ``scored`` (both shape (n,) int ids)."""
    counts = np.bincount(train, minlength=vocab_size).astype(float)
    log_p = np.log(counts[scored] + add) - math.log(len(train) + add * vocab_size)
    return float(np.exp(-log_p.mean()))


def bigram_ppl(train: np.ndarray, scored: np.ndarray, vocab_size: int, k: float, start: int) -> float:
    """Perplexity of the add-``k`` bigram of ``train`` on ``scored``; the first scored token's
    history is ``start`` (the id of ``<eos>``). Pairs are kept sparse (pair id ``v * V + w``), so
    a 33,000-word vocabulary needs no V x V matrix."""
    pairs, pair_counts = np.unique(train[:-1] * vocab_size + train[1:], return_counts=True)
    history = np.bincount(train[:-1], minlength=vocab_size).astype(float)
    prev = np.concatenate([[start], scored[:-1]])
    query = prev * vocab_size + scored
    at = np.minimum(np.searchsorted(pairs, query), len(pairs) - 1)
    count = np.where(pairs[at] == query, pair_counts[at], 0).astype(float)
    log_p = np.log(count + k) - np.log(history[prev] + k * vocab_size)
    return float(np.exp(-log_p.mean()))


def corpus_baselines(name: str, vocab: list[str], splits: dict[str, np.ndarray],
                     max_valid: int | None = None, max_test: int | None = None,
                     test_word_end: np.ndarray | None = None) -> dict:
    """The baselines row of one corpus.

    Args:
        name: the corpus name (``ptb``).
        vocab: the vocabulary (id -> word); must hold ``<eos>``.
        splits: ``train``, ``valid``, ``test`` -> shape (n,) int ids.
        max_valid, max_test: score only the first N tokens of these splits (None: all).
        test_word_end: a subword corpus's test ``word_end`` (shape (n,) bool): adds the per-word
            figures (``PER_WORD_COLUMNS``); every test token is scored, so a word counts when its
            last token is among the first ``max_test``.
    """
    from audit.data.corpus import EOS, UNK

    if EOS not in vocab:
        raise AuditError(f"corpus {name!r}: the vocabulary has no {EOS}")
    size = len(vocab)
    train = np.asarray(splits["train"], dtype=np.int64)
    valid = np.asarray(splits["valid"], dtype=np.int64)[:max_valid or None]
    test = np.asarray(splits["test"], dtype=np.int64)[:max_test or None]
    if len(train) < 2 or not len(valid) or not len(test):
        raise AuditError(f"corpus {name!r}: a split is empty (train needs two tokens)")
    eos = vocab.index(EOS)
    unk = vocab.index(UNK) if UNK in vocab else None
    valid_ppl = {k: bigram_ppl(train, valid, size, k, eos) for k in K_GRID}
    best = min(K_GRID, key=lambda k: (valid_ppl[k], k))  # ties: the smaller k
    row = dict(corpus=name, vocab_size=size, n_train=len(train), n_valid=len(valid), n_test=len(test))
    for split in SPLITS:
        ids = np.asarray(splits[split])
        row[f"unk_rate_{split}"] = float((ids == unk).mean()) if unk is not None and len(ids) else 0.0
    row.update(unigram_add=UNIGRAM_ADD, unigram_valid_ppl=unigram_ppl(train, valid, size),
               unigram_ppl=unigram_ppl(train, test, size), bigram_k=best,
               bigram_k_grid=" ".join(f"{k:g}" for k in K_GRID), bigram_valid_ppl=valid_ppl[best],
               bigram_ppl=bigram_ppl(train, test, size, best, eos))
    if test_word_end is not None:
        words = int(np.asarray(test_word_end, dtype=bool)[:len(test)].sum())
        row.update(n_test_words=words, unigram_ppl_per_word=per_word_ppl(row["unigram_ppl"], len(test), words),
                   bigram_ppl_per_word=per_word_ppl(row["bigram_ppl"], len(test), words))
    return row


def load_baselines(path) -> pd.DataFrame:
    """The baselines table written by this verb; AuditError naming the file when unreadable."""
    try:
        table = pd.read_csv(path, dtype={"corpus": str})
    except FileNotFoundError:
        raise AuditError(f"{path}: baselines table not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise AuditError(f"{path}: unreadable CSV ({str(err).splitlines()[0]})") from None
    missing = [c for c in ("corpus", "vocab_size", "unigram_ppl") if c not in table.columns]
    if missing:
        raise AuditError(f"{path}: missing column {missing[0]!r}")
    return table


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit baselines", description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", default=[], metavar="NAME=FILE",
                        help="a corpus name and its id file (audit.data.corpus.save); repeatable; none: "
                             "the header alone")
    parser.add_argument("--max-valid", type=int, default=None, help="score the first N validation tokens")
    parser.add_argument("--max-test", type=int, default=None, help="score the first N test tokens")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    from audit.data.corpus import load
    from audit.files import write_table

    rows = []
    for item in args.corpus:
        name, eq, path = item.partition("=")
        if not eq or not name or not path:
            raise AuditError(f"--corpus {item!r}: expected NAME=FILE")
        corpus = load(path)
        splits = {s: corpus.split(s).numpy() for s in SPLITS}
        word_end = corpus.word_end["test"].numpy() if corpus.subword else None
        rows.append(corpus_baselines(name, corpus.vocab, splits, args.max_valid, args.max_test, word_end))
    subword = any("n_test_words" in r for r in rows)   # only then, so word corpora's tables stay as they were
    table = pd.DataFrame(rows, columns=COLUMNS + (PER_WORD_COLUMNS if subword else []))
    write_table(table, args.out)
    for r in rows:
        print(f"{r['corpus']} (K = {r['vocab_size']:,}): unigram {r['unigram_ppl']:.1f}, "
              f"bigram (k = {r['bigram_k']:g}) {r['bigram_ppl']:.1f} over {r['n_test']:,} test tokens")
    return 0
