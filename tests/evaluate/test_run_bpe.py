"""Evaluating a run on a byte-level BPE corpus (data.tokenizer: bpe): perplexity per word, and
word similarity recorded as not applicable."""

import json
import math

import pytest
import torch

from audit.data import corpus as corpus_module
from audit.data.corpus import EOS, load
from audit.evaluate.run import WORDSIM_SUBWORD_NOTE, evaluate_run, load_model, per_word_fields
from audit.report.summary import coverage_table
from audit.train.run import train
from audit.train.trainer import batchify
from audit.train.validation import evaluate_loss
from helpers import TINY_EVALUATE, tiny_settings


@pytest.fixture(scope="module")
def bpe_run(mirror, tmp_path_factory):
    """A tiny softmax run on a BPE (K = 300) corpus of PTB's first lines."""
    root = tmp_path_factory.mktemp("bpe")
    paths = []
    for split, n in (("train", 3000), ("valid", 300), ("test", 300)):
        lines = (mirror / "ptb" / f"{split}.txt").read_text().splitlines(keepends=True)[:n]
        (root / f"{split}.txt").write_text("".join(lines))
        paths.append(str(root / f"{split}.txt"))
    corpus_path = root / "corpus_bpe300.pt"
    corpus_module.main(["--files", *paths, "--tokenizer", "bpe", "--vocab-size", "300", "--out", str(corpus_path)])
    run_dir = root / "run"
    train(tiny_settings(epochs=1), str(corpus_path), run_dir, log=lambda m: None)
    return run_dir, corpus_path


def test_perplexity_per_word_is_the_same_nll_over_the_words(bpe_run, mirror):
    run_dir, corpus_path = bpe_run
    result = evaluate_run(run_dir, str(corpus_path), str(mirror / "wordsim"), options=TINY_EVALUATE)
    corpus = load(corpus_path)
    test = corpus.test[:1000]   # tiny_settings' max_tokens test
    model, _ = load_model(run_dir / "model.pt", torch.device("cpu"))
    loss = evaluate_loss(model, batchify(test, 1, torch.device("cpu")), 20)  # the NLL by another code path
    assert result["test_tokens"] == 999 and result["test_ppl"] == pytest.approx(math.exp(loss), rel=1e-6)
    # words scored, counted from the token strings: a word ends where the next token starts one
    # (the byte-level BPE marks a word's first piece with 'Ġ'; <eos> is a word of its own, and so
    # is every token after one)
    tokens = [corpus.vocab[i] for i in corpus.test[:1001].tolist()]
    starts = [t.startswith("Ġ") or t == EOS or (j > 0 and tokens[j - 1] == EOS) for j, t in enumerate(tokens)]
    words = sum(starts[j + 1] for j in range(1, 1000))
    assert result["test_words"] == words and 0 < words < 999
    assert result["test_ppl_per_word"] == pytest.approx(math.exp(loss * 999 / words), rel=1e-6)
    assert result["test_ppl_per_word"] > result["test_ppl"]   # fewer words than tokens, the same NLL
    # word similarity: the reason instead of scores, in eval.json and in the report's coverage table
    assert result["wordsim_note"] == WORDSIM_SUBWORD_NOTE and "wordsim" not in result
    assert (run_dir / "wordsim_pairs.csv").read_text().strip() == "benchmark,word1,word2,gold,cosine"
    table = coverage_table([run_dir])
    assert len(table) == 1
    assert table[["benchmark", "runs", "note"]].iloc[0].tolist() == ["all", 1, WORDSIM_SUBWORD_NOTE]
    assert table[["pairs", "found", "coverage", "oov_pairs"]].isna().all().all()   # no counts, not zeros
    assert json.loads((run_dir / "eval.json").read_text())["test_ppl_per_word"] == result["test_ppl_per_word"]


def test_per_word_fields_by_hand():
    # positions 1..5 predicted; words end at 2 and 3 there (position 0's word is never scored, and
    # the word still open at position 5 is not complete)
    ends = torch.tensor([True, False, True, True, False, False, True])
    fields = per_word_fields(6.0, 5, ends)
    assert fields == {"test_words": 2, "test_ppl_per_word": pytest.approx(math.exp(3.0))}
