"""Shared fixtures: the offline data mirror beside the checkout, and a tiny prepared corpus."""

import os
from pathlib import Path

import pytest

# under CI=true, a skip that does not need CUDA fails (see support/ci.py)
from support.ci import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401

REPO = Path(__file__).resolve().parent.parent
MIRROR = Path(os.environ.get("AUDIT_DATA_MIRROR", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def mirror() -> Path:
    if not (MIRROR / "ptb" / "train.txt").is_file():
        pytest.fail(f"offline data mirror not found at {MIRROR}; set AUDIT_DATA_MIRROR")
    return MIRROR


@pytest.fixture(scope="session")
def ptb_corpus(mirror, tmp_path_factory):
    """The full PTB corpus cache, prepared once per session."""
    from audit.data.corpus import prepare, save

    path = tmp_path_factory.mktemp("ptb") / "corpus.pt"
    save(prepare(mirror / "ptb"), path)
    return path
