"""The count baselines against hand-worked values on a 7-token corpus."""

import math

import numpy as np
import pandas as pd
import pytest

from audit.errors import AuditError
from audit.evaluate import baselines as bl

# vocabulary <eos>, a, b, <unk>; train "a b a <eos> a a <eos>": counts <eos> 2, a 4, b 1, <unk> 0
VOCAB = ["<eos>", "a", "b", "<unk>"]
TRAIN = np.array([1, 2, 1, 0, 1, 1, 0])
TEST = np.array([1, 2, 0])   # a b <eos>


def test_unigram_add_half_by_hand():
    # p = (c + 0.5) / (7 + 0.5 * 4): a 4.5/9, b 1.5/9, <eos> 2.5/9
    expected = (9 ** 3 / (4.5 * 1.5 * 2.5)) ** (1 / 3)
    assert bl.unigram_ppl(TRAIN, TEST, 4) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(3.5088, abs=1e-4)   # (729 / 16.875) ** (1/3)


def test_bigram_add_k_by_hand():
    # histories (train[:-1]): a 4, b 1, <eos> 1; pairs a>b 1, b>a 1, a><eos> 2, <eos>>a 1, a>a 1.
    # test after <eos>: p(a|<eos>) = (1+k)/(1+4k), p(b|a) = (1+k)/(4+4k), p(<eos>|b) = k/(1+4k)
    for k in (1.0, 0.1):
        prob = (1 + k) / (1 + 4 * k) * (1 + k) / (4 + 4 * k) * k / (1 + 4 * k)
        assert bl.bigram_ppl(TRAIN, TEST, 4, k, start=0) == pytest.approx(prob ** (-1 / 3), rel=1e-12)
    assert bl.bigram_ppl(TRAIN, TEST, 4, 1.0, start=0) == pytest.approx((2 / 5 * 2 / 8 * 1 / 5) ** (-1 / 3))


def dense_bigram(train, scored, size, k, start):
    """A second implementation: the full V x V count matrix."""
    counts = np.zeros((size, size))
    for v, w in zip(train[:-1], train[1:]):
        counts[v, w] += 1
    prev = [start] + list(scored[:-1])
    logs = [math.log((counts[v, w] + k) / (counts[v].sum() + k * size)) for v, w in zip(prev, scored)]
    return math.exp(-sum(logs) / len(logs))


def test_corpus_row_k_chosen_on_valid_and_unk_rates():
    rng = np.random.default_rng(0)
    splits = {"train": rng.integers(0, 4, 300), "valid": rng.integers(0, 4, 50), "test": rng.integers(0, 4, 40)}
    splits["test"][:4] = 3   # <unk>
    row = bl.corpus_baselines("toy", VOCAB, splits, max_valid=30, max_test=20)
    assert (row["vocab_size"], row["n_train"], row["n_valid"], row["n_test"]) == (4, 300, 30, 20)
    assert row["unk_rate_test"] == pytest.approx(np.mean(splits["test"] == 3))
    assert row["unk_rate_train"] == pytest.approx(np.mean(splits["train"] == 3))
    valid = {k: dense_bigram(splits["train"], splits["valid"][:30], 4, k, 0) for k in bl.K_GRID}
    best = min(valid, key=valid.get)
    assert row["bigram_k"] == best
    assert row["bigram_valid_ppl"] == pytest.approx(valid[best], rel=1e-10)
    assert row["bigram_ppl"] == pytest.approx(dense_bigram(splits["train"], splits["test"][:20], 4, best, 0), rel=1e-10)
    counts = np.bincount(splits["train"], minlength=4)
    p = (counts + 0.5) / (300 + 2)
    assert row["unigram_ppl"] == pytest.approx(math.exp(-np.log(p[splits["test"][:20]]).mean()), rel=1e-12)


def test_no_eos_is_an_error():
    with pytest.raises(AuditError, match="no <eos>"):
        bl.corpus_baselines("toy", ["a", "b"], {"train": TRAIN % 2, "valid": TEST % 2, "test": TEST % 2})


def test_verb_writes_the_table(tmp_path):
    torch = pytest.importorskip("torch")
    from audit.__main__ import main
    from audit.data.corpus import Corpus, save

    save(Corpus(VOCAB, torch.tensor(TRAIN), torch.tensor(TEST), torch.tensor(TEST)), tmp_path / "c.pt")
    assert main(["baselines", "--corpus", f"toy={tmp_path / 'c.pt'}", "--out", str(tmp_path / "b.csv")]) == 0
    table = pd.read_csv(tmp_path / "b.csv")
    assert list(table.columns) == bl.COLUMNS
    assert table.loc[0, "unigram_ppl"] == pytest.approx((9 ** 3 / (4.5 * 1.5 * 2.5)) ** (1 / 3))
    assert main(["baselines", "--corpus", "toy", "--out", str(tmp_path / "x.csv")]) == 1
    # no corpus (a study that judges only its evidence: runs tables): the header, no row
    assert main(["baselines", "--out", str(tmp_path / "none.csv")]) == 0
    empty = bl.load_baselines(tmp_path / "none.csv")
    assert list(empty.columns) == bl.COLUMNS and empty.empty


def test_subword_corpus_gets_per_word_figures_by_hand(tmp_path):
    """TEST read as subwords: "a b" one word (a does not end it), then <eos>: 3 tokens, 2 words."""
    torch = pytest.importorskip("torch")
    from audit.__main__ import main
    from audit.data.corpus import Corpus, save

    ends = torch.tensor([False, True, True])
    save(Corpus(VOCAB, torch.tensor(TRAIN), torch.tensor(TEST), torch.tensor(TEST),
                word_end={"train": torch.ones(7, dtype=torch.bool), "valid": ends, "test": ends}), tmp_path / "s.pt")
    save(Corpus(VOCAB, torch.tensor(TRAIN), torch.tensor(TEST), torch.tensor(TEST)), tmp_path / "w.pt")
    assert main(["baselines", "--corpus", f"sub={tmp_path / 's.pt'}", "--corpus", f"word={tmp_path / 'w.pt'}",
                 "--out", str(tmp_path / "b.csv")]) == 0
    table = pd.read_csv(tmp_path / "b.csv").set_index("corpus")
    assert list(table.columns) == bl.COLUMNS[1:] + bl.PER_WORD_COLUMNS
    # the unigram's NLL sum is log(9^3 / (4.5 * 1.5 * 2.5)) over 2 words
    assert table.loc["sub", "unigram_ppl_per_word"] == pytest.approx((9 ** 3 / (4.5 * 1.5 * 2.5)) ** (1 / 2), rel=1e-8)  # the CSV keeps 9 significant digits
    k = table.loc["sub", "bigram_k"]
    prob = (1 + k) / (1 + 4 * k) * (1 + k) / (4 + 4 * k) * k / (1 + 4 * k)
    assert table.loc["sub", "bigram_ppl_per_word"] == pytest.approx(prob ** (-1 / 2), rel=1e-8)
    assert table.loc["sub", "n_test_words"] == 2 and table.loc["sub", "unigram_ppl"] == table.loc["word", "unigram_ppl"]
    assert table.loc["word", PER_WORD].isna().all()   # a word corpus: not computed, not a number


PER_WORD = bl.PER_WORD_COLUMNS
