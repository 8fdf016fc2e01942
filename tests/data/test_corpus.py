from collections import Counter

import torch

import pytest

from audit.data.corpus import SPLITS, EOS, build_vocab, load, prepare, prepare_files, tokenise
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


def _files(tmp_path, texts: dict, gz=()) -> dict:
    """{split: path} of a user corpus written from ``texts``; splits in ``gz`` gzip-compressed."""
    import gzip

    paths = {}
    for split, text in texts.items():
        path = tmp_path / (f"{split}.txt.gz" if split in gz else f"{split}.txt")
        path.write_bytes(gzip.compress(text.encode()) if split in gz else text.encode())
        paths[split] = path
    return paths


USER_TEXTS = {"train": "a a b\nc a <unk>\n", "valid": "a zebra b\n", "test": "c c\nb\n"}


def test_gzip_and_plain_files_give_the_same_corpus(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "gz").mkdir()
    plain = prepare_files(_files(tmp_path / "plain", USER_TEXTS))
    packed = prepare_files(_files(tmp_path / "gz", USER_TEXTS, gz=("train", "valid", "test")))
    assert plain.vocab == packed.vocab
    for split in SPLITS:
        assert torch.equal(plain.split(split), packed.split(split))


def test_user_corpus_maps_unseen_words_to_unk_when_the_vocabulary_has_it(tmp_path):
    corpus = prepare_files(_files(tmp_path, USER_TEXTS))
    assert corpus.vocab == ["a", EOS, "<unk>", "b", "c"]  # a x3, <eos> x2, then ties by the word
    words = [corpus.vocab[i] for i in corpus.valid.tolist()]
    assert words == ["a", "<unk>", "b", EOS]  # 'zebra' is not in train: <unk>


def test_unseen_word_without_unk_names_file_line_and_token(tmp_path):
    paths = _files(tmp_path, {"train": "a b\n", "valid": "a\n", "test": "b\nb a\na b zebra c\n"})
    with pytest.raises(AuditError) as err:
        prepare_files(paths)
    assert str(err.value) == (f"{paths['test']}: line 3: token 'zebra' is not in the training vocabulary "
                              "(which has no <unk> to map it to)")


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_an_empty_split_is_a_one_line_error(tmp_path, text):
    paths = _files(tmp_path, {"train": "a b\n", "valid": text, "test": "a\n"})
    with pytest.raises(AuditError, match=r"valid\.txt: the valid split has no words$"):
        prepare_files(paths)


def test_bad_input_leaves_no_cache_behind(tmp_path):
    """`python -m audit prepare --files` on a bad file: the error, and no file (nor temp file) written."""
    from audit.data.corpus import main

    paths = _files(tmp_path, {"train": "a b\n", "valid": "a\n", "test": "a b\n"})
    paths["test"].write_bytes(b"a \xc3\x28\n")  # an invalid two-byte sequence at offset 2
    out = tmp_path / "cache" / "corpus.pt"
    out.parent.mkdir()
    with pytest.raises(AuditError, match=r"test\.txt: not UTF-8 text: byte 0xc3 at byte offset 2 \(line 1\)"):
        main(["--files", *(str(paths[s]) for s in SPLITS), "--out", str(out)])
    assert list(out.parent.iterdir()) == []
    paths["test"].write_text("a b\n")
    assert main(["--files", *(str(paths[s]) for s in SPLITS), "--out", str(out)]) == 0
    assert load(out).vocab == [EOS, "a", "b"] and [p.name for p in out.parent.iterdir()] == ["corpus.pt"]


# own text as users bring it (issue 49): words carry their punctuation, and no <unk> anywhere
OWN_TEXTS = {"train": "The ability to read the text.\nthe reader reads the text.\n",
             "valid": "the ability, to read\n", "test": "to read the text,\nreads\n"}


def test_a_capped_vocabulary_maps_words_unseen_in_training_to_unk(tmp_path):
    """With data.vocab_size a valid or test word never seen in training is <unk>, as a word past the
    first K is; without it the one-line error stays (test_unseen_word_without_unk_...)."""
    from audit.data.corpus import UNK, restrict_vocab, unk_rate

    paths = _files(tmp_path, OWN_TEXTS)
    with pytest.raises(AuditError, match=r"valid\.txt: line 1: token 'ability,' is not in the training vocabulary"):
        prepare_files(paths)
    full = prepare_files(paths, unseen_to_unk=True)
    # the 9 training words (the 3, <eos> 2, text. 2, then the 1s by the word) and <unk> last: it
    # has no training count
    assert full.vocab == ["the", EOS, "text.", "The", "ability", "read", "reader", "reads", "to", UNK]
    words = lambda corpus, split: [corpus.vocab[i] for i in corpus.split(split).tolist()]
    assert words(full, "valid") == ["the", UNK, "to", "read", EOS]             # 'ability,' unseen
    assert words(full, "test") == ["to", "read", "the", UNK, EOS, "reads", EOS]  # 'text,' unseen
    assert unk_rate(full, "train") == 0.0 and unk_rate(full, "valid") == 1 / 5 and unk_rate(full, "test") == 1 / 7
    # the cap: K entries, <unk> among them, the unseen and the rare words alike
    small = restrict_vocab(full, 4)
    assert small.vocab == [UNK, "the", EOS, "text."]    # <unk> now counts the 6 rare training words
    assert words(small, "valid") == ["the", UNK, UNK, UNK, EOS] and unk_rate(small, "valid") == 3 / 5
    assert unk_rate(small, "train") == 6 / 13
    # a cap at the training vocabulary's own size (9 types): the least frequent word makes room for <unk>
    assert len(restrict_vocab(full, 9).vocab) == 9


def test_prepare_with_a_vocab_size_takes_own_text_as_it_is(tmp_path, capsys):
    """`python -m audit prepare --files ... --vocab-size K` (the workflow's restrict_user_corpus):
    unseen words are <unk>, and each split's <unk> share is printed; without --vocab-size the
    error names the file, line and word."""
    from audit.data.corpus import UNK, main

    paths = _files(tmp_path, OWN_TEXTS)
    files = [str(paths[s]) for s in SPLITS]
    out = tmp_path / "corpus_v5.pt"
    assert main(["--files", *files, "--vocab-size", "5", "--out", str(out)]) == 0
    corpus = load(out)
    assert len(corpus.vocab) == 5 and UNK in corpus.vocab
    assert "valid 5 (60.00% <unk>)" in capsys.readouterr().out
    with pytest.raises(AuditError, match=r"valid\.txt: line 1: token 'ability,' is not in the training vocabulary "
                                         r"\(which has no <unk> to map it to\)$"):
        main(["--files", *files, "--out", str(tmp_path / "corpus.pt")])
