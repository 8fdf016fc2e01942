import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from audit.data import fetch as fetch_module
from audit.data.fetch import fetch, source
from audit.errors import AuditError
from audit.files import digest_of, sha256_of


@pytest.fixture
def offline(monkeypatch):
    """No network in tests: every download attempt fails at once, as it does on CI."""
    def refuse(*args, **kwargs):
        raise urllib.error.URLError("network disabled in tests")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.delenv(fetch_module.MIRROR_ENV, raising=False)


def test_fetch_from_mirror_verifies_checksum(mirror, tmp_path, offline):
    dest = fetch("wordsim", "EN-RG-65.txt", tmp_path / "out" / "rg.txt", mirror)
    assert sha256_of(dest) == source("wordsim", "EN-RG-65.txt")["sha256"]
    assert sorted(p.name for p in dest.parent.iterdir()) == ["rg.txt"]


def test_checksum_mismatch_names_file_and_both_hashes_and_leaves_nothing(mirror, tmp_path, offline):
    bad = tmp_path / "mirror" / "wordsim"
    bad.mkdir(parents=True)
    (bad / "EN-RG-65.txt").write_bytes((mirror / "wordsim" / "EN-RG-65.txt").read_bytes() + b"x")
    out = tmp_path / "out"
    expected = source("wordsim", "EN-RG-65.txt")["sha256"]
    with pytest.raises(AuditError) as err:
        fetch("wordsim", "EN-RG-65.txt", out / "rg.txt", tmp_path / "mirror")
    message = str(err.value)
    assert "EN-RG-65.txt" in message and expected in message and sha256_of(bad / "EN-RG-65.txt") in message
    assert "\n" not in message
    assert list(out.iterdir()) == []  # no partial or unverified file


def test_missing_data_without_mirror_lists_the_places_tried(tmp_path, offline):
    with pytest.raises(AuditError, match=r"cannot obtain ptb/train\.txt: tried https://\S+ptb\.train\.txt") as err:
        fetch("ptb", "train.txt", tmp_path / "train.txt")
    assert "AUDIT_DATA_MIRROR" in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_missing_file_in_mirror_falls_back_then_fails(tmp_path, offline):
    (tmp_path / "empty").mkdir()
    with pytest.raises(AuditError, match=r"tried .*empty/ptb/valid\.txt \(FileNotFoundError\); https://"):
        fetch("ptb", "valid.txt", tmp_path / "v.txt", tmp_path / "empty")


def test_cli_error_is_one_line(tmp_path):
    bad = tmp_path / "mirror" / "ptb"
    bad.mkdir(parents=True)
    (bad / "test.txt").write_text("not ptb\n")
    proc = subprocess.run([sys.executable, "-m", "audit", "fetch", "--dataset", "ptb", "--file", "test.txt",
                           "--out", str(tmp_path / "t.txt"), "--mirror", str(tmp_path / "mirror")],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: checksum mismatch for ")


def test_unknown_file_names_the_known_ones():
    with pytest.raises(AuditError, match="unknown file 'nope.txt' in dataset 'ptb'; known: train.txt"):
        source("ptb", "nope.txt")


def test_every_source_pins_a_checksum_and_archive_members_name_their_archive():
    from audit.data.fetch import DIGESTS, sources

    for dataset, files in sources().items():
        for name, entry in files.items():
            assert set(entry) <= {"url", "member", *DIGESTS}, (dataset, name)
            assert any(algorithm in entry for algorithm in DIGESTS), (dataset, name)
            if "member" in entry:
                assert entry["url"].endswith(".zip"), (dataset, name)


def test_gluon_nlp_sha1_pins_match_the_verified_wikitext_2(mirror):
    """The WikiText-103 pins come from gluon-nlp's table; its WikiText-2 pins, from the same
    table, must match the SHA-256-verified mirror copies byte for byte, or the source is not
    to be trusted."""
    for split in ("train", "valid", "test"):
        entry = source("wikitext-2", f"{split}.txt")
        path = mirror / "wikitext-2" / f"{split}.txt"
        assert digest_of(path, "sha256") == entry["sha256"]
        assert digest_of(path, "sha1") == entry["sha1"]


# A small corpus of WikiText-103's shape: its archive, a folder of wiki.{split}.tokens members.
WIKI = {
    "train": " \n = Valkyria Chronicles III = \n \n Senjō no Valkyria 3 : <unk> Chronicles \n",
    "valid": " \n = Homarus gammarus = \n \n Homarus gammarus is a large <unk> \n",
    "test": " \n = Robert Boulter = \n \n Robert Boulter is an English actor \n",
}


@pytest.fixture
def wiki_archive(tmp_path, monkeypatch):
    """A zip laid out as wikitext-103-v1.zip, and a sources table whose wikitext-103 points at it
    by a file:// URL, with the members' true SHA-1s. Returns (table, download counter)."""
    import hashlib
    import zipfile

    from audit.data.fetch import sources

    archive = tmp_path / "site" / "wikitext-103-v1.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as zf:
        for split, text in WIKI.items():
            zf.writestr(f"wikitext-103/wiki.{split}.tokens", text.encode())
    table = {k: dict(v) for k, v in sources().items()}
    table["wikitext-103"] = {
        f"{split}.txt": {"url": archive.as_uri(), "member": f"wikitext-103/wiki.{split}.tokens",
                         "sha1": hashlib.sha1(text.encode()).hexdigest()}
        for split, text in WIKI.items()}
    monkeypatch.setattr(fetch_module, "sources", lambda: table)
    monkeypatch.delenv(fetch_module.MIRROR_ENV, raising=False)
    downloads = []
    real = urllib.request.urlopen

    def counting(url, *args, **kwargs):
        downloads.append(url)
        return real(url, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", counting)
    return table, downloads


def test_archive_members_are_fetched_verified_and_the_archive_downloaded_once(tmp_path, wiki_archive):
    from audit.data.corpus import prepare

    _, downloads = wiki_archive
    folder = tmp_path / "data" / "wikitext-103"
    for split, text in WIKI.items():
        path = fetch("wikitext-103", f"{split}.txt", folder / f"{split}.txt")
        assert path.read_text() == text
    assert len(downloads) == 1  # valid and test came from the kept archive
    assert sorted(p.name for p in folder.iterdir()) == [".archives", "test.txt", "train.txt", "valid.txt"]
    corpus = prepare(folder)  # tokenised as WikiText-2 is: words plus one <eos> a line
    assert len(corpus.train) == sum(len(line.split()) + 1 for line in WIKI["train"].splitlines())
    assert "<unk>" in corpus.vocab and "Valkyria" in corpus.vocab


def test_parallel_jobs_of_one_corpus_download_its_archive_once(tmp_path, wiki_archive, monkeypatch):
    """Snakemake fetches train, valid and test at once; each used to find no archive and download
    it (WikiText-103's is 180 MB). Threads lock as processes do: flock is per open file."""
    import threading
    import time

    _, downloads = wiki_archive
    slow = urllib.request.urlopen  # the counting one

    def slower(url, *args, **kwargs):
        time.sleep(0.3)  # a download long enough for the others to start meanwhile
        return slow(url, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", slower)
    folder = tmp_path / "data" / "wikitext-103"
    errors = []

    def job(split):
        try:
            fetch("wikitext-103", f"{split}.txt", folder / f"{split}.txt")
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=job, args=(split,)) for split in WIKI]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(downloads) == 1
    assert {split: (folder / f"{split}.txt").read_text() for split in WIKI} == WIKI


def test_archive_member_mismatch_is_one_line_and_keeps_nothing(tmp_path, wiki_archive):
    table, _ = wiki_archive
    table["wikitext-103"]["valid.txt"]["sha1"] = "0" * 40
    folder = tmp_path / "data" / "wikitext-103"
    with pytest.raises(AuditError) as err:
        fetch("wikitext-103", "valid.txt", folder / "valid.txt")
    message = str(err.value)
    assert message.startswith("checksum mismatch for file://") and "!wikitext-103/wiki.valid.tokens" in message
    assert "expected sha1 " + "0" * 40 in message and "\n" not in message
    assert list(folder.iterdir()) == []  # the archive that gave a wrong file is not kept, nor its lock


def test_archive_without_the_member_is_a_source_that_cannot_be_read(tmp_path, wiki_archive):
    table, _ = wiki_archive
    table["wikitext-103"]["test.txt"]["member"] = "wikitext-103/wiki.nope.tokens"
    with pytest.raises(AuditError, match=r"cannot obtain wikitext-103/test\.txt: tried file://\S+!wikitext-103/"
                                         r"wiki\.nope\.tokens \(OSError\)"):
        fetch("wikitext-103", "test.txt", tmp_path / "out" / "test.txt")
    assert not (tmp_path / "out" / "test.txt").exists()


def test_unreachable_archive_lists_the_member_and_leaves_nothing(tmp_path, offline):
    with pytest.raises(AuditError, match=r"cannot obtain wikitext-103/valid\.txt: tried https://wikitext\.smerity\.com/"
                                         r"wikitext-103-v1\.zip!wikitext-103/wiki\.valid\.tokens \(URLError\)"):
        fetch("wikitext-103", "valid.txt", tmp_path / "out" / "valid.txt")
    assert list((tmp_path / "out").iterdir()) == []   # no archive folder, no partial file
