"""A study's own corpora (audit/data/user.py): the config check, the run settings, the planner."""

import gzip
import hashlib
import shutil

import pytest

from audit.config import check_study, load_study, run_settings, settings_text
from audit.data.corpus import prepare_files
from audit.data.user import SPLITS, builtin_corpora
from audit.errors import AuditError
from audit.plan import resources

TEXTS = {"train": "the cat sat on the mat\nthe dog sat\n", "valid": "the cat sat\n", "test": "the dog\non the mat\n"}


def _write(folder, gz=("valid",)):
    """A user corpus in ``folder``: {split: file name}, the splits in ``gz`` gzip-compressed."""
    folder.mkdir(parents=True, exist_ok=True)
    names = {}
    for split, text in TEXTS.items():
        name = f"{split}.txt.gz" if split in gz else f"{split}.txt"
        (folder / name).write_bytes(gzip.compress(text.encode()) if split in gz else text.encode())
        names[split] = name
    return names


def _study(files: dict, corpora=("mytext",), **data):
    return {"study": "mine", "seeds": [1], "heads": [{"name": "softmax"}],
            "data": {"corpora": list(corpora), "files": files, **data}}


def test_builtin_corpora_are_the_pinned_ones():
    assert builtin_corpora() == ["ptb", "wikitext-2", "wikitext-103"]


def test_relative_paths_resolve_against_the_workflow_directory(tmp_path):
    names = _write(tmp_path / "texts")
    config = check_study(_study({"mytext": {s: f"texts/{n}" for s, n in names.items()}}), "s.yaml", base=tmp_path)
    assert config["data"]["files"]["mytext"] == {s: str(tmp_path / "texts" / n) for s, n in names.items()}


@pytest.mark.parametrize("name", ["ptb", "wikitext-2", "wikitext-103"])
def test_a_user_corpus_may_not_shadow_a_builtin_one(tmp_path, name):
    names = _write(tmp_path)
    with pytest.raises(AuditError) as err:
        check_study(_study({name: names}, corpora=[name]), "s.yaml", base=tmp_path)
    assert str(err.value) == (f"s.yaml: config key data.files.{name}: {name!r} is a built-in corpus "
                              "(ptb, wikitext-2, wikitext-103); give your corpus another name")


def test_missing_file_and_unknown_corpus_are_one_line_errors(tmp_path):
    names = _write(tmp_path)
    with pytest.raises(AuditError, match=r"^s\.yaml: config key data\.files\.mytext\.test: file not found: "
                                         r".*/nope\.txt$"):
        check_study(_study({"mytext": {**names, "test": "nope.txt"}}), "s.yaml", base=tmp_path)
    with pytest.raises(AuditError, match=r"^s\.yaml: config key data\.corpora\[1\]: unknown corpus 'other'; "
                                         r"built-in: ptb, wikitext-2, wikitext-103; or give its files under data\.files\.other$"):
        check_study(_study({"mytext": names}, corpora=["mytext", "other"]), "s.yaml", base=tmp_path)
    with pytest.raises(AuditError, match=r"config key data\.files\.mytext: 'test' is a required property"):
        check_study(_study({"mytext": {"train": "a", "valid": "b"}}), "s.yaml", base=tmp_path)


def test_run_settings_record_each_files_sha256_and_follow_its_content(tmp_path):
    names = _write(tmp_path / "a")
    study = _study({"mytext": {s: str(tmp_path / "a" / n) for s, n in names.items()}})
    settings = run_settings(check_study(study), "mytext", "softmax", 1)
    files = settings["user_corpus"]["files"]
    for split in SPLITS:
        assert files[split]["sha256"] == hashlib.sha256((tmp_path / "a" / names[split]).read_bytes()).hexdigest()
    before = settings_text(settings)

    # moved, same content: the same settings (nothing retrains)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    moved = _study({"mytext": {s: str(tmp_path / "b" / n) for s, n in names.items()}})
    assert settings_text(run_settings(check_study(moved), "mytext", "softmax", 1)) == before

    # one changed line of the test file: other settings, the test file's hash alone among them
    (tmp_path / "b" / "test.txt").write_text("the dog\non the cat\n")
    changed = run_settings(check_study(moved), "mytext", "softmax", 1)
    assert settings_text(changed) != before
    assert [s for s in SPLITS if changed["user_corpus"]["files"][s] != files[s]] == ["test"]


def test_a_builtin_corpus_beside_a_user_one_keeps_its_settings(tmp_path):
    names = _write(tmp_path)
    plain = check_study({"study": "mine", "seeds": [1], "heads": [{"name": "softmax"}]})
    both = check_study(_study({"mytext": {s: str(tmp_path / n) for s, n in names.items()}},
                              corpora=["ptb", "mytext"]))
    assert settings_text(run_settings(both, "ptb", "softmax", 1)) == settings_text(run_settings(plain, "ptb", "softmax", 1))


# sha256 of the '\n'-joined settings_text of every run (corpus x arm x seed) of the shipped
# configs, computed with the code of main at a3cef3f (before user corpora existed): a study
# without user files must keep exactly these settings, or every finished run retrains.
SHIPPED_SETTINGS = {
    "configs/default.yaml": "55a5f2d5d6472798703074babea58925a3829c35bac2ef8d2f9edbbfc6261144",
    "configs/smoke.yaml": "c330aff95210af0f4ec64a2e916d9ab3b19e0a8a071bedf083e86a31e93e51c8",
}


@pytest.mark.parametrize("path", sorted(SHIPPED_SETTINGS))
def test_shipped_studies_keep_their_run_settings(path):
    config = load_study(path)
    seeds = config["seeds"] if isinstance(config["seeds"], list) else [1]  # a sequential design: seed 1
    runs = [run_settings(config, c, e["name"], s)
            for c in config["data"]["corpora"] for e in config["heads"] for s in seeds]
    assert not any("user_corpus" in settings for settings in runs)
    text = "\n".join(settings_text(settings) for settings in runs)
    assert hashlib.sha256(text.encode()).hexdigest() == SHIPPED_SETTINGS[path]


def test_planner_sizes_a_user_corpus_from_its_files(tmp_path):
    """Tokens per split and V as the prepared corpus has them (counted by the torch path)."""
    names = _write(tmp_path)
    paths = {s: str(tmp_path / n) for s, n in names.items()}
    settings = run_settings(check_study(_study({"mytext": paths})), "mytext", "softmax", 1)
    corpus = prepare_files(paths)
    assert [resources.tokens(settings, s) for s in SPLITS] == [len(corpus.split(s)) for s in SPLITS]
    assert resources.vocab_of(settings) == len(corpus.vocab)
    restricted = run_settings(check_study(_study({"mytext": paths}, vocab_size=4)), "mytext", "softmax", 1)
    assert resources.vocab_of(restricted) == 4
    assert resources.train_minutes(settings) >= resources.MIN_MINUTES
    assert resources.evaluate_mem_mb(settings) > 0


def test_model_sizes_use_a_user_corpus_vocabulary(tmp_path):
    """audit.model.params (parameter counts, the capacity-matched softmax's solve) at V of the files."""
    from audit.model.params import vocab_size

    names = _write(tmp_path, gz=("train",))
    paths = {s: str(tmp_path / n) for s, n in names.items()}
    study = check_study(_study({"mytext": paths}))
    assert vocab_size(study, "mytext") == len(prepare_files(paths).vocab) == 7  # 6 words + <eos>


def test_gpu_time_of_a_user_corpus_is_ptbs_per_token_rate_at_its_size(tmp_path):
    """No published time exists for a user corpus: its GPU seconds per token are PTB's at the same
    model and V, and its epoch time follows its own token counts."""
    names = _write(tmp_path)
    paths = {s: str(tmp_path / n) for s, n in names.items()}
    gpu = {"train": {"device": "cuda"}}
    mine = run_settings(check_study({**_study({"mytext": paths}, vocab_size=5), **gpu}), "mytext", "softmax", 1)
    ptb = run_settings(check_study({**_study({}, corpora=["ptb"], vocab_size=5), **gpu}), "ptb", "softmax", 1)
    assert resources.seconds_per_token(mine, True) == resources.seconds_per_token(ptb, True)
    per_token = resources.seconds_per_token(mine, True)
    epoch = per_token * (resources.tokens(mine, "train") + resources.tokens(mine, "valid") / 3)
    assert resources.train_seconds(mine) == pytest.approx(mine["train"]["epochs"] * epoch)
