"""End to end: a tiny study on a corpus of the user's own files, run by Snakemake to its audit.

The corpus is written by the test (words of a word-similarity benchmark, so that word similarity
has pairs to score), its valid split gzip-compressed, its paths relative to the workflow folder.
"""

import gzip
import json

import numpy as np
import pandas as pd
import pytest
import yaml

from helpers import TINY_EVALUATE, copy_workflow
from tests.test_pipeline import job_counts, snakemake


def _sentences(rng, words, probs, n_tokens):
    lines, count = [], 0
    while count < n_tokens:
        line = rng.choice(words, size=int(rng.integers(4, 13)), p=probs)
        lines.append(" ".join(line))
        count += len(line) + 1
    return "\n".join(lines) + "\n"


def _write_corpus(folder, mirror):
    """train.txt, valid.txt.gz, test.txt of Zipf-distributed benchmark words (seeded)."""
    pairs = pd.read_csv(mirror / "wordsim" / "EN-WS-353-ALL.txt", sep=r"\s+", header=None)
    words = np.array(sorted(set(pairs[0].str.lower()) | set(pairs[1].str.lower())))
    rng = np.random.default_rng(7)
    probs = 1 / np.arange(1, len(words) + 1)
    train = _sentences(rng, words, probs / probs.sum(), 12_000)
    seen = np.array(sorted(set(train.split())))  # valid and test words from train: no <unk> is needed
    p_seen = 1 / np.arange(1, len(seen) + 1)
    folder.mkdir()
    (folder / "train.txt").write_text(train)
    (folder / "valid.txt.gz").write_bytes(gzip.compress(_sentences(rng, seen, p_seen / p_seen.sum(), 1500).encode()))
    (folder / "test.txt").write_text(_sentences(rng, seen, p_seen / p_seen.sum(), 1500))


def user_study(tmp_path, mirror, study: str, description: str, **data):
    """A workflow copy with the test's corpus in ``texts/`` (``mytext``) and ``configs/<study>.yaml``:
    the smoke study's shape at a tiny size on that corpus, ``data`` added to its ``data:``."""
    workdir = copy_workflow(tmp_path)
    _write_corpus(workdir / "texts", mirror)
    config = yaml.safe_load((workdir / "configs" / "smoke.yaml").read_text())
    config["study"], config["description"] = study, description
    config["data"] = {"corpora": ["mytext"], **data,
                      "files": {"mytext": {"train": "texts/train.txt", "valid": "texts/valid.txt.gz",
                                           "test": "texts/test.txt"}}}
    config["model"].update(emb_size=8, hidden_size=16)
    config["train"].update(epochs=1, batch_size=10, device="cpu")
    config["evaluate"] = TINY_EVALUATE
    (workdir / "configs" / f"{study}.yaml").write_text(yaml.safe_dump(config))
    return workdir


@pytest.mark.slow
def test_a_study_on_the_users_files_runs_to_its_audit(tmp_path, mirror):
    workdir = user_study(tmp_path, mirror, "mine", "A tiny study on a corpus of the test's own files.")

    proc = snakemake(workdir, "--configfile", "configs/mine.yaml", mirror=mirror)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (workdir / "reports" / "mine" / "audit.html").is_file()
    assert (workdir / "results" / "mine" / "data" / "mytext" / "corpus.pt").is_file()
    runs = pd.read_csv(workdir / "reports" / "mine" / "runs.csv")
    assert len(runs) == 6 and set(runs["corpus"]) == {"mytext"}
    assert runs["test_ppl"].notna().all()
    baselines = pd.read_csv(workdir / "reports" / "mine" / "tables" / "baselines.csv")
    assert set(baselines["corpus"]) == {"mytext"}
    record = json.loads((workdir / "reports" / "mine" / "provenance.json").read_text())
    own = [row for row in record["data"] if row["dataset"] == "(your file)"]
    assert sorted(row["file"] for row in own) == sorted(str(workdir / "texts" / n)
                                                         for n in ("train.txt", "valid.txt.gz", "test.txt"))
    assert "3 your own" in (workdir / "reports" / "mine" / "audit.html").read_text()

    # an edited file reruns its corpus and every run on it (its hash is in the run settings)
    with open(workdir / "texts" / "test.txt", "a") as handle:
        handle.write("money bank\n")
    plan = snakemake(workdir, "--configfile", "configs/mine.yaml", "-n", mirror=mirror)
    assert plan.returncode == 0, plan.stderr[-3000:]
    counts = job_counts(plan.stdout + plan.stderr)
    assert counts["prepare_user_corpus"] == 1 and counts["train"] == 6
