import os

import pytest

from audit.files import atomic_write, atomic_write_text, sha256_of


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "t.csv"
    atomic_write_text("a\n1\n", target)

    def half_then_fail(tmp):
        with open(tmp, "w") as handle:
            handle.write("a\n")  # half a table, then a failure
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(target, half_then_fail)
    assert target.read_text() == "a\n1\n"
    assert os.listdir(tmp_path) == ["t.csv"]


def test_sha256_matches_hashlib_of_the_bytes(tmp_path):
    import hashlib

    path = tmp_path / "x.bin"
    data = os.urandom(3 << 20)  # several read blocks
    path.write_bytes(data)
    assert sha256_of(path) == hashlib.sha256(data).hexdigest()
