from collections import Counter

import torch

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
    with pytest.raises(AuditError, match=r"test\.txt: line 1: token 'zebra' is not in the training vocabulary"):
        prepare(tmp_path)


def _toy(tmp_path):
    """A corpus small enough to count by hand."""
    texts = {"train": "a a b c <unk>\na b d a\nb c e\n", "valid": "a e d\n", "test": "e e b\n"}
    for split, text in texts.items():
        (tmp_path / f"{split}.txt").write_text(text)
    return prepare(tmp_path)


def test_restrict_vocab_keeps_the_k_most_frequent_and_maps_the_rest_to_unk(tmp_path):
    from audit.data.corpus import UNK, restrict_vocab, unk_rate

    corpus = _toy(tmp_path)
    # training counts: a 4, <eos> 3, b 3, c 2, <unk> 1, d 1, e 1 (ties by the word)
    assert corpus.vocab == ["a", EOS, "b", "c", UNK, "d", "e"]
    small = restrict_vocab(corpus, 4)
    # the 4 most frequent are a, <eos>, b, c; <unk> is not among them, so a, <eos>, b + <unk>;
    # after the mapping <unk> counts c 2 + <unk> 1 + d 1 + e 1 = 5, the most frequent
    assert small.vocab == [UNK, "a", EOS, "b"]
    words = lambda split: [small.vocab[i] for i in small.split(split).tolist()]
    assert words("train") == ["a", "a", "b", UNK, UNK, EOS, "a", "b", UNK, "a", EOS, "b", UNK, UNK, EOS]
    assert words("valid") == ["a", UNK, UNK, EOS] and words("test") == [UNK, UNK, "b", EOS]
    assert unk_rate(small, "train") == 5 / 15 and unk_rate(small, "test") == 2 / 4
    assert unk_rate(corpus, "train") == 1 / 15
    # <unk> already among the K most frequent: exactly those K words are kept
    five = restrict_vocab(corpus, 5)
    assert sorted(five.vocab) == sorted(["a", EOS, "b", "c", UNK])
    # <unk> 1 + d 1 + e 1 = 3 ties with <eos> and b: the word breaks it ("<" sorts before "b")
    assert five.vocab == ["a", EOS, UNK, "b", "c"]
    assert restrict_vocab(corpus, 7) is corpus


def test_restrict_vocab_bad_size_is_a_one_line_error(tmp_path):
    from audit.data.corpus import restrict_vocab

    corpus = _toy(tmp_path)
    for size in (1, 8):
        with pytest.raises(AuditError, match=r"config key data.vocab_size: .* between 2 and the corpus's 7 words"):
            restrict_vocab(corpus, size)


def test_restrict_vocab_on_ptb_is_frequency_ordered(ptb_corpus):
    from audit.data.corpus import UNK, restrict_vocab, unk_rate

    corpus = restrict_vocab(load(ptb_corpus), 2000)
    assert len(corpus.vocab) == 2000 and UNK in corpus.vocab
    counts = torch.bincount(corpus.train, minlength=2000).tolist()
    assert counts == sorted(counts, reverse=True)
    # PTB's own <unk> (4.8% of training tokens) plus the 13% outside the 2,000 most frequent words
    assert 0.17 < unk_rate(corpus, "train") < 0.19
