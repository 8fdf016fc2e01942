import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from audit.data import fetch as fetch_module
from audit.data.fetch import fetch, sha256_of, source
from audit.errors import AuditError


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
