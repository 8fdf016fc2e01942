"""Provenance: config hash, git states (none, no commit, clean, dirty), checksums, run times."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest
import yaml

from audit.report import provenance

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


def test_config_hash_ignores_key_order_but_not_values():
    a = {"study": "s", "model": {"emb_size": 16, "n_layers": 2}}
    b = {"model": {"n_layers": 2, "emb_size": 16}, "study": "s"}
    assert provenance.config_hash(a) == provenance.config_hash(b)
    assert provenance.config_hash(a) != provenance.config_hash({**a, "study": "t"})
    expected = hashlib.sha256(json.dumps(a, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert provenance.config_hash(a) == expected


def test_not_a_git_repository(tmp_path):
    state = provenance.git_state(tmp_path)
    assert state["commit"] is None and state["dirty"] is None
    assert "not a git repository" in state["note"] or "git is not installed" in state["note"]


@needs_git
def test_git_no_commit_then_clean_then_dirty(tmp_path):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path,
                       check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("1\n")
    state = provenance.git_state(tmp_path)
    assert state["commit"] is None and "no commit" in state["note"] and state["dirty"] is True
    git("add", "a.txt")
    git("commit", "-q", "-m", "one")
    state = provenance.git_state(tmp_path)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert state == {"commit": head, "dirty": False, "note": ""}
    (tmp_path / "a.txt").write_text("2\n")
    assert provenance.git_state(tmp_path)["dirty"] is True


def good_and_bad(tmp_path, dataset):
    """sources.yaml's path and two data files of ``dataset``: test.txt ("a b c"), valid.txt ("x")."""
    good, bad = tmp_path / "data" / dataset / "test.txt", tmp_path / "data" / dataset / "valid.txt"
    good.parent.mkdir(parents=True)
    good.write_text("a b c\n")
    bad.write_text("x\n")
    return tmp_path / "sources.yaml", good, bad


def test_data_checksums_against_pinned(tmp_path):
    sources, good, bad = good_and_bad(tmp_path, "ptb")
    sources.write_text(yaml.safe_dump({"ptb": {
        "test.txt": {"url": "u1", "sha256": hashlib.sha256(b"a b c\n").hexdigest()},
        "valid.txt": {"url": "u2", "sha256": "0" * 64}}}))
    rows = provenance.data_checksums([bad, good], tmp_path / "data", sources)
    assert [(r["dataset"], r["file"], r["match"]) for r in rows] == [("ptb", "test.txt", True), ("ptb", "valid.txt", False)]
    assert rows[1]["actual"] == hashlib.sha256(b"x\n").hexdigest()


def test_a_file_pinned_by_sha1_alone_is_matched_by_its_sha1(tmp_path):
    """WikiText-103's files carry gluon-nlp's SHA-1 only: a right file matches, a wrong one not."""
    sources, good, bad = good_and_bad(tmp_path, "wikitext-103")
    sha1 = hashlib.sha1(b"a b c\n").hexdigest()
    sources.write_text(yaml.safe_dump({"wikitext-103": {
        "test.txt": {"url": "u1", "member": "m1", "sha1": sha1},
        "valid.txt": {"url": "u2", "member": "m2", "sha1": "0" * 40}}}))
    rows = provenance.data_checksums([bad, good], tmp_path / "data", sources)
    assert [(r["file"], r["pinned"], r["match"]) for r in rows] == [
        ("test.txt", f"sha1 {sha1}", True), ("valid.txt", "sha1 " + "0" * 40, False)]
    assert rows[0]["actual"] == hashlib.sha256(b"a b c\n").hexdigest()


def test_a_user_corpus_file_is_recorded_unpinned(tmp_path):
    """A file of data.files (outside the data folder): its SHA-256, no pin, match None (not False)."""
    own = tmp_path / "texts" / "train.txt"
    own.parent.mkdir()
    own.write_text("my words\n")
    rows = provenance.data_checksums([own], tmp_path / "data", tmp_path / "sources.yaml")
    assert rows == [{"dataset": "(your file)", "file": str(own), "url": "", "pinned": "",
                     "actual": hashlib.sha256(b"my words\n").hexdigest(), "match": None}]


def test_collect_reads_run_times_and_config(tmp_path):
    run = tmp_path / "runs" / "ptb" / "softmax" / "1"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"corpus": "ptb", "head": "softmax", "seed": 1, "status": "ok",
                                                  "device": "cpu", "epochs_run": 3, "wall_seconds": 12.5}))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"study": "s", "seeds": [1]}))
    record = provenance.collect(config, [run], [], tmp_path, "snakemake --cores all", tmp_path)
    assert record["runs"] == [{"corpus": "ptb", "head": "softmax", "seed": 1, "status": "ok", "device": "cpu",
                               "epochs_run": 3, "wall_seconds": 12.5}]
    assert record["config_sha256"] == provenance.config_hash({"study": "s", "seeds": [1]})
    assert record["software"]["packages"]["numpy"] != "not installed"
    assert record["hardware"]["cpu"] and record["command"] == "snakemake --cores all"
    json.dumps(record)  # serialisable as written by the CLI


def _benchmark(path, **values) -> None:
    """A benchmark file as Snakemake writes it (its own writer)."""
    from snakemake.benchmark import BenchmarkRecord, write_benchmark_records

    record = BenchmarkRecord(**values)
    record.data_collected = "max_rss" in values
    write_benchmark_records([record], str(path), False)


def test_benchmarks_reads_snakemakes_files_per_run_and_job(tmp_path):
    measured, old = tmp_path / "ptb" / "softmax" / "2", tmp_path / "ptb" / "mos" / "1"
    measured.mkdir(parents=True)
    old.mkdir(parents=True)
    _benchmark(measured / "benchmark_train.tsv", running_time=125.5, max_rss=812.25, cpu_time=240.0)
    _benchmark(measured / "benchmark_evaluate.tsv", running_time=9.75)  # nothing sampled: NA columns
    rows = provenance.benchmarks([measured, old])  # the old run has no benchmark files
    assert rows == [
        {"corpus": "ptb", "head": "softmax", "seed": 2, "job": "train", "seconds": 125.5, "max_rss_mb": 812.25,
         "cpu_seconds": 240.0},
        {"corpus": "ptb", "head": "softmax", "seed": 2, "job": "evaluate", "seconds": 9.75, "max_rss_mb": None,
         "cpu_seconds": None}]
