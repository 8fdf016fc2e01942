from collections import Counter

import pytest

from audit.data.corpus import EOS, build_vocab, load, prepare, tokenise
from audit.errors import AuditError


def test_ptb_counts_match_the_published_ones(ptb_corpus):
    corpus = load(ptb_corpus)
    assert len(corpus.vocab) == 10_000
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (929_589, 73_760, 82_430)


def test_vocabulary_is_frequency_ordered_and_ids_round_trip(ptb_corpus, mirror):
    corpus = load(ptb_corpus)
    counts = Counter(tokenise(mirror / "ptb" / "train.txt"))
    freqs = [counts[w] for w in corpus.vocab]
    assert freqs == sorted(freqs, reverse=True)
    assert corpus.vocab[0] == "the" and EOS in corpus.vocab
    first_line = (mirror / "ptb" / "test.txt").read_text().split("\n")[0].split() + [EOS]
    assert [corpus.vocab[i] for i in corpus.test[: len(first_line)].tolist()] == first_line


def test_one_eos_per_line_blank_lines_included(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text(" a b \n\n c\n")
    assert tokenise(path) == ["a", "b", EOS, EOS, "c", EOS]
    assert build_vocab(["b", "a", "b", "c", "a"]) == ["a", "b", "c"]  # ties broken by the word


def test_unknown_test_token_is_a_one_line_error(tmp_path):
    for split, text in {"train": "a b\n", "valid": "a\n", "test": "a zebra\n"}.items():
        (tmp_path / f"{split}.txt").write_text(text)
    with pytest.raises(AuditError, match=r"test\.txt: token 'zebra' is not in the training vocabulary"):
        prepare(tmp_path)
