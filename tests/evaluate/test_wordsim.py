"""Tests for audit.evaluate.wordsim against an independent computation and the real benchmark files.

The independent path lists the expected pairs by hand, takes cosines with scipy's cosine distance
and computes Spearman's rho as the Pearson correlation of average ranks (scipy.stats.rankdata),
so it shares no code with the module under test.
"""

import numpy as np
import pytest
import scipy.spatial.distance
import scipy.stats
import torch

from audit.evaluate import wordsim
from audit.errors import AuditError

WORDS = ["car", "automobile", "gem", "jewel", "tiger", "cat", "money", "cash", "bank", "river",
         "noon", "midday"]


@pytest.fixture
def embedding():
    rng = np.random.default_rng(11)
    return rng.standard_normal((len(WORDS), 6)).astype(np.float32)


@pytest.fixture
def bench_dir(tmp_path):
    # tabs, LF, an upper-case word, an OOV pair, a duplicated pair, tied gold scores
    (tmp_path / "EN-A.txt").write_bytes(
        b"car\tautomobile\t3.9\n"
        b"Gem\tjewel\t3.8\n"
        b"tiger\tcat\t3.0\n"
        b"money\tcash\t4.0\n"
        b"zebra\tcat\t2.0\n"
        b"money\tcash\t3.0\n"
        b"bank\triver\t3.0\n"
        b"noon\tmidday\t1.0\n"
        b"\n")
    # CRLF, spaces, reversed pair kept as its own line, no final newline
    (tmp_path / "EN-B.txt").write_bytes(
        b"cash money 7.5\r\n"
        b"money  cash 7.0\r\n"
        b"river bank 2.5\r\n"
        b"cat unknownword 1.0\r\n"
        b"automobile noon 0.5\r\n"
        b"jewel tiger 0.5")
    # too few found pairs for a rank correlation
    (tmp_path / "EN-C.txt").write_text("car cat 1\ncar qqq 2\n")
    (tmp_path / "notes.md").write_text("not a benchmark\n")
    return tmp_path


def _expected(vectors, pairs):
    """Independent rho: hand-listed (w1, w2, gold) pairs, scipy cosine, Pearson of average ranks."""
    index = {w: i for i, w in enumerate(WORDS)}
    gold = np.array([g for _, _, g in pairs])
    cos = np.array([1.0 - scipy.spatial.distance.cosine(vectors[index[a]].astype(np.float64),
                                                         vectors[index[b]].astype(np.float64))
                    for a, b, _ in pairs])
    rho = np.corrcoef(scipy.stats.rankdata(gold), scipy.stats.rankdata(cos))[0, 1]
    return cos, rho


A_FOUND = [("car", "automobile", 3.9), ("gem", "jewel", 3.8), ("tiger", "cat", 3.0),
           ("money", "cash", 3.5), ("bank", "river", 3.0), ("noon", "midday", 1.0)]
B_FOUND = [("cash", "money", 7.5), ("money", "cash", 7.0), ("river", "bank", 2.5),
           ("automobile", "noon", 0.5), ("jewel", "tiger", 0.5)]


def test_evaluate_matches_independent_computation(embedding, bench_dir):
    before = embedding.copy()
    table = wordsim.evaluate(embedding, WORDS, bench_dir)
    np.testing.assert_array_equal(embedding, before)  # nothing modified in place
    assert list(table.columns) == ["benchmark", "pairs", "found", "spearman"]
    assert list(table["benchmark"]) == ["EN-A", "EN-B", "EN-C"]
    assert list(table["pairs"]) == [7, 6, 2]   # EN-A: money/cash twice counts once
    assert list(table["found"]) == [6, 5, 1]
    for row, pairs in ((0, A_FOUND), (1, B_FOUND)):
        _, rho = _expected(embedding, pairs)
        assert table["spearman"][row] == pytest.approx(rho, abs=1e-12)
    assert np.isnan(table["spearman"][2])      # one found pair: NaN by design


def test_pair_similarities_rows_and_cosines(embedding, bench_dir):
    pairs = wordsim.pair_similarities(embedding, WORDS, bench_dir)
    assert list(pairs.columns) == ["benchmark", "word1", "word2", "gold", "cosine"]
    a = pairs[pairs["benchmark"] == "EN-A"]
    assert list(zip(a["word1"], a["word2"], a["gold"])) == A_FOUND  # duplicate -> mean 3.5
    cos, _ = _expected(embedding, A_FOUND)
    np.testing.assert_allclose(a["cosine"].to_numpy(), cos, rtol=1e-12)
    b = pairs[pairs["benchmark"] == "EN-B"]
    assert list(zip(b["word1"], b["word2"])) == [p[:2] for p in B_FOUND]
    # reversed pairs have the same cosine (symmetry)
    assert b["cosine"].iloc[0] == pytest.approx(b["cosine"].iloc[1], rel=1e-12)


def test_vocab_forms_and_torch_input_agree(embedding, bench_dir):
    as_list = wordsim.evaluate(embedding, WORDS, bench_dir)
    # a dict with shuffled rows and the matching permuted matrix gives the same result
    perm = np.random.default_rng(12).permutation(len(WORDS))
    vocab = {w: int(np.flatnonzero(perm == i)[0]) for i, w in enumerate(WORDS)}
    tensor = torch.from_numpy(embedding[perm].copy())
    as_dict = wordsim.evaluate(tensor, vocab, bench_dir)
    np.testing.assert_allclose(as_dict["spearman"].to_numpy(), as_list["spearman"].to_numpy(),
                               rtol=1e-6, equal_nan=True)


def test_zero_vector_and_constant_scores(tmp_path):
    vectors = np.eye(4)
    vectors[3] = 0.0
    (tmp_path / "EN-Z.txt").write_text("a b 1\na c 1\nb c 1\na d 1\n")
    pairs = wordsim.pair_similarities(vectors, ["a", "b", "c", "d"], tmp_path)
    assert pairs["cosine"].iloc[-1] == 0.0     # zero vector: cosine 0, no division by zero
    table = wordsim.evaluate(vectors, ["a", "b", "c", "d"], tmp_path)
    assert np.isnan(table["spearman"][0])      # constant gold scores: rho undefined


def test_bad_input_raises(tmp_path, embedding):
    missing = tmp_path / "nowhere"
    with pytest.raises(AuditError, match="nowhere"):
        wordsim.evaluate(embedding, WORDS, missing)
    with pytest.raises(AuditError, match="no .txt files"):
        wordsim.evaluate(embedding, WORDS, tmp_path)
    (tmp_path / "EN-X.txt").write_text("car automobile\n")
    with pytest.raises(AuditError, match="EN-X.txt:1"):
        wordsim.evaluate(embedding, WORDS, tmp_path)
    (tmp_path / "EN-X.txt").write_text("car automobile high\n")
    with pytest.raises(AuditError, match="not a number"):
        wordsim.evaluate(embedding, WORDS, tmp_path)


# ---- the real benchmark files of the data mirror ----

DISTINCT_PAIRS = {
    "EN-MC-30": 30, "EN-MEN-TR-3k": 3000, "EN-MTurk-287": 287, "EN-MTurk-771": 771,
    "EN-RG-65": 65, "EN-RW-STANFORD": 2034, "EN-SIMLEX-999": 999, "EN-SimVerb-3500": 3500,
    "EN-VERB-143": 144, "EN-WS-353-ALL": 352, "EN-WS-353-REL": 252, "EN-WS-353-SIM": 203,
    "EN-YP-130": 130,
}

# pairs missing from the PTB vocabulary, LK-SM Table 13 (protocol section 4)
PTB_MISSING = {
    "EN-WS-353-ALL": 116, "EN-WS-353-SIM": 66, "EN-WS-353-REL": 80, "EN-RG-65": 55, "EN-MC-30": 21,
    "EN-MTurk-287": 146, "EN-MTurk-771": 346, "EN-MEN-TR-3k": 1952, "EN-YP-130": 65,
    "EN-VERB-143": 9, "EN-RW-STANFORD": 1889, "EN-SimVerb-3500": 1746, "EN-SIMLEX-999": 424,
}


def test_mirror_pair_counts(mirror):
    benchmarks = wordsim.load_benchmarks(mirror / "wordsim")
    assert {name: len(frame) for name, frame in benchmarks.items()} == DISTINCT_PAIRS
    assert list(benchmarks) == sorted(DISTINCT_PAIRS)


def test_mirror_ptb_vocabulary_misses_match_paper(mirror):
    vocab = sorted(set((mirror / "ptb" / "train.txt").read_text().split()) | {"<eos>"})
    vectors = np.random.default_rng(13).standard_normal((len(vocab), 8))
    table = wordsim.evaluate(vectors, vocab, mirror / "wordsim")
    assert len(table) == 13
    missing = dict(zip(table["benchmark"], table["pairs"] - table["found"]))
    assert missing == PTB_MISSING


def test_pairs_and_scores_match_the_independent_computation(embedding, bench_dir):
    # both tables at once, each against the hand-listed pairs and the independent rho (not
    # against evaluate() or pair_similarities(), which return these very tables)
    pairs, scores = wordsim.pairs_and_scores(embedding, WORDS, bench_dir)
    for name, found in (("EN-A", A_FOUND), ("EN-B", B_FOUND)):
        got = pairs[pairs["benchmark"] == name]
        assert list(zip(got["word1"], got["word2"], got["gold"])) == found
        cos, rho = _expected(embedding, found)
        np.testing.assert_allclose(got["cosine"].to_numpy(), cos, rtol=1e-12)
        assert scores.set_index("benchmark")["spearman"][name] == pytest.approx(rho, abs=1e-12)
    assert list(scores["found"]) == [6, 5, 1] and np.isnan(scores["spearman"].iloc[2])
