"""Shared fixtures: the offline data mirror beside the checkout, a tiny prepared corpus, and one
finished smoke study for the session (support/smoke.py)."""

import os
from pathlib import Path

import pytest

# under CI=true, a skip that does not need CUDA fails (see support/ci.py)
from support.ci import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401
# under pytest-xdist, tests that share an expensive fixture share a worker (see support/workers.py)
from support.workers import pytest_collection_modifyitems  # noqa: F401

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


@pytest.fixture(scope="session")
def ptb_corpus_2k(mirror, tmp_path_factory):
    """PTB with its vocabulary capped at its 2,000 most frequent words, the rest ``<unk>``
    (``data.vocab_size: 2000``), prepared once per session: for the tests whose cost grows as V^2
    (a reverse-mode Jacobian: V backward rows of V outputs; the argmax tiers) and whose point does
    not depend on V."""
    from audit.data.corpus import prepare, restrict_vocab, save

    path = tmp_path_factory.mktemp("ptb-2k") / "corpus.pt"
    save(restrict_vocab(prepare(mirror / "ptb", unseen_to_unk=True), 2000), path)
    return path


@pytest.fixture(scope="session")
def smoke_study(mirror, tmp_path_factory):
    """The smoke study (configs/smoke.yaml) run once through the whole Snakemake DAG, shared by every
    test that only needs a finished one (tests/test_pipeline.py, tests/test_slurm.py). Read it;
    copy it with ``support.smoke.copy`` before changing it: at the end of the session this fixture
    fails if any file in it was changed, added or removed."""
    from support import smoke

    workdir = smoke.finish(tmp_path_factory.mktemp("smoke-study"), mirror)
    before = smoke.snapshot(workdir)
    yield workdir
    changed = smoke.changed(before, smoke.snapshot(workdir))
    assert not changed, (f"a test changed the shared smoke study instead of a copy (support.smoke.copy): "
                         f"{len(changed)} files, e.g. {changed[:5]}")


@pytest.fixture(scope="session")
def outside_study(mirror, tmp_path_factory):
    """(work folder, Snakemake run) of one study of outside heads and bodies through the whole DAG,
    shared by tests/test_outside_head.py and tests/test_outside_measurements.py (support/outside.py).
    Read only: at the end of the session this fixture fails if any file in it was changed."""
    from support import outside, smoke

    workdir, proc = outside.finish(tmp_path_factory.mktemp("outside-study"), mirror)
    before = smoke.snapshot(workdir)
    yield workdir, proc
    changed = smoke.changed(before, smoke.snapshot(workdir))
    assert not changed, f"a test changed the shared outside-parts study: {len(changed)} files, e.g. {changed[:5]}"
