"""`python -m audit data-files`: the mirror files a study reads, against the fetch jobs of its DAG."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from audit.plan.datafiles import mirror_bytes, study_files
from helpers import copy_workflow
from audit.errors import AuditError

REPO = Path(__file__).resolve().parents[2]


def data_files(*args: str, env: dict | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "audit", "data-files", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def fetched_by_dag(workdir: Path, config: Path, mirror: Path) -> list[str]:
    """<dataset>/<file> of every fetch job in a dry run of the study: the second method."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(config)], cwd=workdir,
                          capture_output=True, text=True, env={**os.environ, "AUDIT_DATA_MIRROR": str(mirror)},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    jobs = re.findall(r"^rule (fetch_\w+):\n\s+output: results/data/(\S+)$", proc.stdout, re.M)
    return sorted(path for _, path in jobs)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("datafiles"))


def two_corpora(workdir: Path) -> Path:
    """The smoke study on both corpora: no shipped config has two."""
    config = yaml.safe_load((workdir / "configs" / "smoke.yaml").read_text())
    config["data"]["corpora"] = ["wikitext-2", "ptb"]
    config["study"] = "smoke2"
    path = workdir / "configs" / "smoke2.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("study", ["smoke", "published", "two-corpora"])
def test_listed_files_are_the_fetch_jobs_of_the_dag(workdir, mirror, study):
    config = two_corpora(workdir) if study == "two-corpora" else workdir / "configs" / f"{study}.yaml"
    proc = data_files(str(config), "--mirror", str(mirror))
    assert proc.returncode == 0, proc.stderr
    listed = proc.stdout.splitlines()
    assert len(listed) == len(set(listed))
    assert sorted(listed) == fetched_by_dag(workdir, config, mirror)
    expected = {"smoke": 3 + 13, "published": 0, "two-corpora": 6 + 13}[study]  # splits + wordsim benchmarks
    assert len(listed) == expected
    total = sum((mirror / name).stat().st_size for name in listed)
    checked = {"smoke": "sha256 ok", "published": "nothing to check",   # WikiText-2 also has gluon-nlp's SHA-1
               "two-corpora": "sha256 and sha1 ok"}[study]
    assert proc.stderr.strip() == (f"{expected} files, {total} bytes ({total / 2 ** 20:.1f} MiB) in {mirror}, "
                                   f"{checked}")


def test_without_a_mirror_only_the_list():
    proc = data_files("configs/smoke.yaml", env={"AUDIT_DATA_MIRROR": ""})
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.splitlines()[:3] == ["ptb/train.txt", "ptb/valid.txt", "ptb/test.txt"]


def test_mirror_from_the_environment(mirror):
    proc = data_files("configs/smoke.yaml", env={"AUDIT_DATA_MIRROR": str(mirror)})
    assert proc.returncode == 0 and proc.stderr.startswith("16 files, ")


def test_a_study_with_corpora_but_no_heads_reads_no_wordsim():
    assert study_files({"data": {"corpora": ["ptb"]}, "heads": []}) == ["ptb/train.txt", "ptb/valid.txt",
                                                                        "ptb/test.txt"]


def test_unpinned_corpus_is_named():
    with pytest.raises(AuditError, match=r"unknown dataset 'enwik8'"):
        study_files({"data": {"corpora": ["enwik8"]}, "heads": [{"name": "softmax"}]})


def test_missing_or_altered_mirror_file_is_named(mirror, tmp_path):
    files = ["ptb/valid.txt", "ptb/test.txt"]
    (tmp_path / "ptb").mkdir()
    shutil.copy(mirror / "ptb" / "test.txt", tmp_path / "ptb" / "test.txt")
    assert mirror_bytes(files[1:], tmp_path) == (mirror / "ptb" / "test.txt").stat().st_size
    with pytest.raises(AuditError, match=rf"mirror {tmp_path}: {tmp_path}/ptb/valid\.txt is missing$"):
        mirror_bytes(files, tmp_path)
    (tmp_path / "ptb" / "test.txt").write_bytes((mirror / "ptb" / "test.txt").read_bytes()[:-1])
    with pytest.raises(AuditError, match=r"valid\.txt is missing \(and 1 more\)$"):
        mirror_bytes(files, tmp_path)
    with pytest.raises(AuditError, match=r"test\.txt does not match its pinned sha256$"):
        mirror_bytes(files[1:], tmp_path)


@pytest.mark.parametrize("change, message", [
    ({"data": {"corpora": ["enwik8"]}}, "config key data.corpora[0]: unknown corpus 'enwik8'; built-in: ptb, wikitext-2"),
    ({"dataa": {}}, "'dataa' was unexpected"),
])
def test_bad_config_is_one_line_naming_the_key(tmp_path, change, message):
    config = {**yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text()), **change}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = data_files(str(path), env={"AUDIT_DATA_MIRROR": ""})
    assert proc.returncode == 1 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith(f"error: {path}: ") and message in proc.stderr


def test_a_user_corpus_is_listed_apart_from_the_mirror_files(tmp_path, mirror):
    """A user corpus's files are in no mirror: not on stdout (rsync --files-from), but named on
    stderr with their size; the built-in corpus beside it and wordsim stay on stdout."""
    texts = {"train": "a b\n", "valid": "a\n", "test": "b a\n"}
    for split, text in texts.items():
        (tmp_path / f"{split}.txt").write_text(text)
    config = yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text())
    config["data"]["corpora"] = ["mytext", "ptb"]
    config["data"]["files"] = {"mytext": {s: f"{s}.txt" for s in texts}}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = data_files(str(path), "--mirror", str(mirror), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:3] == ["ptb/train.txt", "ptb/valid.txt", "ptb/test.txt"]
    assert len(proc.stdout.splitlines()) == 3 + 13
    first = proc.stderr.splitlines()[0]
    size = sum(len(t) for t in texts.values())
    assert first == (f"mytext: your corpus, in no mirror ({size} bytes): "
                     + " ".join(str(tmp_path / f"{s}.txt") for s in texts))
    assert proc.stderr.splitlines()[1].startswith("16 files, ")
