"""The byte-level BPE vocabulary (audit/data/bpe.py, ``data.tokenizer: bpe``)."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from audit.config import check_study, run_settings
from audit.data import corpus as corpus_module
from audit.data.bpe import SPLITS, decode, load_tokenizer, merges, prepare_bpe, words_scored
from audit.data.corpus import EOS, load
from audit.data.text import tokenise
from audit.errors import AuditError

ROOT = Path(__file__).resolve().parents[2]


def _texts(seed=0, lines=400):
    """Three splits of made-up words (a seeded Generator), with non-ASCII text in test only."""
    rng = np.random.default_rng(seed)
    stems = ["tok", "ena", "bel", "corp", "mar", "vin", "sto", "quel", "dran", "pim"]
    ends = ["", "s", "ing", "ed", "er", "ly"]
    words = [s + e for s in stems for e in ends]
    p = 1.0 / np.arange(1, len(words) + 1)
    p /= p.sum()

    def block(n):
        return "".join(" ".join(rng.choice(words, size=rng.integers(1, 12), p=p)) + "\n" for _ in range(n))

    return {"train": block(lines), "valid": block(lines // 4), "test": block(lines // 4) + "café 日本 naïve\n\n"}


def _write(folder, texts):
    folder.mkdir(parents=True, exist_ok=True)
    for split, text in texts.items():
        (folder / f"{split}.txt").write_text(text, encoding="utf-8")
    return {s: folder / f"{s}.txt" for s in SPLITS}


def test_vocabulary_has_exactly_k_tokens_in_frequency_order(tmp_path):
    blob = prepare_bpe(_write(tmp_path, _texts()), 300, tmp_path / "tok.json")
    assert len(blob["vocab"]) == 300 == len(set(blob["vocab"]))
    assert load_tokenizer(tmp_path / "tok.json").get_vocab_size() == 300
    assert EOS in blob["vocab"]
    counts = np.bincount(blob["train"].numpy(), minlength=300)
    assert (np.diff(counts) <= 0).all()  # id order is descending training count


def test_text_round_trips_and_word_counts_are_the_word_corpus(tmp_path):
    paths = _write(tmp_path, _texts())
    blob = prepare_bpe(paths, 300, tmp_path / "tok.json")
    tokenizer = load_tokenizer(tmp_path / "tok.json")
    # the word corpus's tokens (words + one <eos> per line); it would refuse this test split
    # (unseen words, no <unk>), which the byte-level BPE encodes
    for split in SPLITS:
        expected = [" ".join(line.split()) for line in paths[split].read_text(encoding="utf-8").splitlines()]
        assert decode(tokenizer, blob["vocab"], blob[split]) == expected  # unseen bytes (é, 日本) included
        assert int(blob[f"word_end_{split}"].sum()) == len(tokenise(paths[split]))
        assert blob[f"word_end_{split}"].shape == blob[split].shape


def test_vocabulary_comes_from_the_train_split_alone(tmp_path):
    texts = _texts()
    first = prepare_bpe(_write(tmp_path / "a", texts), 300)
    # valid and test full of a word absent from train: the merges and the vocabulary stay the same
    other = {**texts, "valid": "zqzqzq zqzqzq\n" * 500, "test": "zqzqzq\n" * 500}
    second = prepare_bpe(_write(tmp_path / "b", other), 300)
    assert first["vocab"] == second["vocab"] and torch.equal(first["train"], second["train"])
    assert "zq" not in first["vocab"] and "Ġzq" not in second["vocab"]


def test_two_trainings_in_separate_processes_give_the_same_merges(tmp_path):
    paths = _write(tmp_path, _texts())
    script = ("import sys, json; from audit.data.bpe import prepare_bpe; "
              "prepare_bpe({s: sys.argv[1] + '/' + s + '.txt' for s in ('train', 'valid', 'test')}, 300, sys.argv[2])")
    for seed, name in (("1", "a.json"), ("2", "b.json")):  # the hash seed differs: Rust's hash maps do too
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", script, str(tmp_path), str(tmp_path / name)], check=True, env=env)
    a, b = (load_tokenizer(tmp_path / n) for n in ("a.json", "b.json"))
    assert len(merges(a)) == 300 - 257 and merges(a) == merges(b)
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()


@pytest.mark.parametrize("size, message", [(256, "below 257"), (5000, "allows only")])
def test_impossible_sizes_are_one_line_errors(tmp_path, size, message):
    with pytest.raises(AuditError, match=f"data.vocab_size: {size} .*{message}") as err:
        prepare_bpe(_write(tmp_path, _texts()), size)
    assert "\n" not in str(err.value)


def test_words_scored_counts_words_whose_last_piece_is_predicted():
    # tokens: [a1 a2] [b] [<eos>] [c1 c2 c3]; position 0 is never predicted
    ends = torch.tensor([False, True, True, True, False, False, True])
    assert words_scored(ends, 1, 7) == 4          # a (its tail a2 predicted), b, <eos>, c
    assert words_scored(ends, 1, 5) == 3          # c's last piece not reached
    assert words_scored(torch.ones(5, dtype=torch.bool), 1, 5) == 4  # a word corpus: every token


def test_prepare_verb_writes_the_corpus_and_the_tokenizer(tmp_path):
    texts = _texts()
    paths = _write(tmp_path / "text", {**texts, "test": texts["valid"]})  # the word corpus needs no unseen word
    out = tmp_path / "corpus_bpe300.pt"
    assert corpus_module.main(["--files", *map(str, paths.values()), "--tokenizer", "bpe",
                               "--vocab-size", "300", "--out", str(out)]) == 0
    corpus = load(out)
    assert corpus.subword and len(corpus.vocab) == 300
    assert load_tokenizer(tmp_path / "corpus_bpe300.json").get_vocab_size() == 300
    assert not load_from_word(paths, tmp_path).subword
    with pytest.raises(AuditError, match="--vocab-size"):
        corpus_module.main(["--files", *map(str, paths.values()), "--tokenizer", "bpe", "--out", str(out)])


def load_from_word(paths, tmp_path):
    out = tmp_path / "corpus.pt"
    corpus_module.main(["--files", *map(str, paths.values()), "--out", str(out)])
    return load(out)


def _study(**data):
    return {"study": "s", "seeds": [1], "heads": [{"name": "softmax"}], "data": {"corpora": ["ptb"], **data}}


def test_bpe_without_vocab_size_is_a_one_line_error_naming_the_key():
    with pytest.raises(AuditError, match=r"^s.yaml: config key data.vocab_size is required with data.tokenizer: bpe"):
        check_study(_study(tokenizer="bpe"), "s.yaml")
    with pytest.raises(AuditError, match="data.vocab_size: 100 is below 257"):
        check_study(_study(tokenizer="bpe", vocab_size=100), "s.yaml")
    with pytest.raises(AuditError, match="data.tokenizer"):
        check_study(_study(tokenizer="sentencepiece", vocab_size=1000), "s.yaml")


def test_tokenizer_enters_the_run_settings_only_when_bpe():
    word = run_settings(check_study(_study(vocab_size=1000)), "ptb", "softmax", 1)
    explicit = run_settings(check_study(_study(vocab_size=1000, tokenizer="word")), "ptb", "softmax", 1)
    bpe = run_settings(check_study(_study(vocab_size=1000, tokenizer="bpe")), "ptb", "softmax", 1)
    assert "tokenizer" not in word and word == explicit
    assert bpe == {**word, "tokenizer": "bpe"}


def test_planning_does_not_import_tokenizers():
    code = "import sys, audit.config, audit.data.corpus, audit.model.params; assert 'tokenizers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
