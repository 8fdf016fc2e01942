"""The corpus text reader (audit/data/text.py): plain and gzip alike, strict UTF-8, counts."""

import gzip
import hashlib

import pytest

from audit.data.text import EOS, summarise, tokenise
from audit.errors import AuditError

TEXT = "the cat sat\n\n  on the mat \r\nthe end"  # a blank line, a CRLF ending, no final newline


def test_gzip_and_plain_give_the_same_tokens(tmp_path):
    plain, packed = tmp_path / "a.txt", tmp_path / "a.txt.gz"
    plain.write_bytes(TEXT.encode())
    packed.write_bytes(gzip.compress(TEXT.encode()))
    expected = ["the", "cat", "sat", EOS, EOS, "on", "the", "mat", EOS, "the", "end", EOS]
    assert tokenise(plain) == expected
    assert tokenise(packed) == expected


def test_summary_counts_tokens_and_types_and_hashes_the_bytes_as_stored(tmp_path):
    packed = tmp_path / "a.txt.gz"
    packed.write_bytes(gzip.compress(TEXT.encode()))
    summary = summarise(packed)
    assert summary.tokens == 12  # 8 words + 4 lines
    assert summary.types == len({"the", "cat", "sat", "on", "mat", "end", EOS})
    assert summary.sha256 == hashlib.sha256(packed.read_bytes()).hexdigest()


def test_summary_follows_a_changed_file(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("a b\n")
    before = summarise(path)
    path.write_text("a b c d\n")  # other size: not the cached summary
    after = summarise(path)
    assert (before.tokens, after.tokens) == (3, 5) and before.sha256 != after.sha256


@pytest.mark.parametrize("gz", [False, True])
def test_undecodable_bytes_name_the_file_and_byte_offset(tmp_path, gz):
    raw = b"good line\nbad \xff word\n"  # 0xff at offset 10 + 4 = 14, on line 2
    path = tmp_path / ("x.txt.gz" if gz else "x.txt")
    path.write_bytes(gzip.compress(raw) if gz else raw)
    with pytest.raises(AuditError) as err:
        tokenise(path)
    message = str(err.value)
    assert message.startswith(f"{path}: not UTF-8 text: byte 0xff at byte offset 14")
    assert "(line 2)" in message and "\n" not in message
    assert ("decompressed" in message) == gz


def test_missing_file_and_bad_gzip_are_one_line_errors(tmp_path):
    with pytest.raises(AuditError, match=r"nowhere\.txt: corpus file not found$"):
        tokenise(tmp_path / "nowhere.txt")
    fake = tmp_path / "plain.txt.gz"
    fake.write_text("not compressed\n")
    with pytest.raises(AuditError, match=r"plain\.txt\.gz: not a readable gzip file"):
        tokenise(fake)
