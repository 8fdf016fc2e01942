"""End to end: a tiny study on a corpus of the user's own files, run by Snakemake to its audit.

The corpus is an outside text, neither PTB nor WikiText, taken as a user brings it: the Python
Language Reference's topic texts that ship with CPython itself (``pydoc_data.topics``, what
``help("topics")`` prints), words with their punctuation and case, no ``<unk>`` anywhere
(``_write_corpus``). Its valid split is gzip-compressed and its paths are relative to the
workflow folder. The word study caps the vocabulary (``data.vocab_size``), so the valid and test
words never seen in training become ``<unk>`` (issue 49); tests/data/test_bpe_workflow.py runs
the same text on a byte-level BPE. Every arm must beat its corpus's unigram.
"""

import gzip
import json

import pandas as pd
import pytest
import yaml

from helpers import TINY_EVALUATE, copy_workflow
from tests.test_pipeline import job_counts, snakemake

# tokens (words and <eos>) per split of the test's corpus: about 1 CPU-s an epoch of a tiny run here
SPLIT_TOKENS = {"train": 20_000, "valid": 2_000, "test": 2_000}


def outside_text() -> dict[str, list[str]]:
    """{split: lines} of the outside corpus, deterministic for one Python version: every topic
    text of ``pydoc_data.topics`` in the order of its key, blank lines dropped, the line's own
    words kept as they are; of every 10 lines the 4th goes to valid, the 8th to test, the rest to
    train, each split cut after the line that reaches ``SPLIT_TOKENS``. The Python of CI is 3.11+;
    its reference is 65 thousand words, so each cut is reached whatever the version."""
    from pydoc_data.topics import topics

    lines = [line.strip() for key in sorted(topics) for line in topics[key].splitlines() if line.strip()]
    splits = {"train": [], "valid": [], "test": []}
    counts = dict.fromkeys(splits, 0)
    for i, line in enumerate(lines):
        split = {3: "valid", 7: "test"}.get(i % 10, "train")
        if counts[split] < SPLIT_TOKENS[split]:
            splits[split].append(line)
            counts[split] += len(line.split()) + 1
    short = [split for split, n in counts.items() if n < SPLIT_TOKENS[split]]
    assert not short, f"pydoc_data.topics is too short for the {short} split"
    return splits


def _write_corpus(folder):
    """train.txt, valid.txt.gz, test.txt of the outside text (``outside_text``)."""
    text = {split: "\n".join(lines) + "\n" for split, lines in outside_text().items()}
    folder.mkdir()
    (folder / "train.txt").write_text(text["train"])
    (folder / "valid.txt.gz").write_bytes(gzip.compress(text["valid"].encode()))
    (folder / "test.txt").write_text(text["test"])


def user_study(tmp_path, mirror, study: str, description: str, epochs: int = 6, **data):
    """A workflow copy with the test's corpus in ``texts/`` (``mytext``) and ``configs/<study>.yaml``:
    the smoke study's heads and seeds at a tiny size on that corpus, ``data`` added to its
    ``data:``. AdamW on short batches (4 x 20 tokens: 250 steps an epoch) takes a model this small
    past the unigram within a few epochs, where the smoke study's SGD at 10 x 35 stays at it: at
    K = 500 words, 6 epochs, 12 runs (two heads, seeds 1-6) gave test perplexities of 43-52
    against the unigram's 59.5."""
    workdir = copy_workflow(tmp_path)
    _write_corpus(workdir / "texts")
    config = yaml.safe_load((workdir / "configs" / "smoke.yaml").read_text())
    config["study"], config["description"] = study, description
    config["data"] = {"corpora": ["mytext"], **data,
                      "files": {"mytext": {"train": "texts/train.txt", "valid": "texts/valid.txt.gz",
                                           "test": "texts/test.txt"}}}
    config["model"].update(emb_size=16, hidden_size=32)
    config["train"].update(epochs=epochs, batch_size=4, bptt=20, optimizer="adamw", lr=0.02, asgd="none",
                           alpha=0.0, beta=0.0, device="cpu")
    config["evaluate"] = TINY_EVALUATE
    (workdir / "configs" / f"{study}.yaml").write_text(yaml.safe_dump(config))
    return workdir


def below_unigram(workdir, study: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, baselines) of a finished study, after checking every run beats its corpus's unigram."""
    runs = pd.read_csv(workdir / "reports" / study / "runs.csv")
    baselines = pd.read_csv(workdir / "reports" / study / "tables" / "baselines.csv")
    unigram = runs["corpus"].map(baselines.set_index("corpus")["unigram_ppl"])
    assert (runs["status"] == "ok").all() and (runs["test_ppl"] < unigram).all(), \
        runs[["head", "seed", "test_ppl"]].assign(unigram=unigram).to_string()
    return runs, baselines


@pytest.mark.slow
def test_a_study_on_the_users_files_runs_to_its_audit(tmp_path, mirror):
    workdir = user_study(tmp_path, mirror, "mine", "A tiny study on a corpus of the test's own files.",
                         vocab_size=500)

    proc = snakemake(workdir, "--configfile", "configs/mine.yaml", mirror=mirror)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (workdir / "reports" / "mine" / "audit.html").read_text()
    data = workdir / "results" / "mine" / "data" / "mytext"
    assert (data / "corpus_v500.pt").is_file() and not (data / "corpus.pt").exists()   # built from the files
    runs, baselines = below_unigram(workdir, "mine")
    assert len(runs) == 6 and set(runs["corpus"]) == {"mytext"} and (runs["vocab_size"] == 500).all()
    # the valid and test words unseen in training (the full vocabulary has no id for them: the
    # prepare step refused them before issue 49) are <unk> with the rare ones, and each split's
    # share is in the audit's data table (audit.html's "<unk> train / valid / test", from
    # tables/baselines.csv)
    text = outside_text()
    seen = {word for line in text["train"] for word in line.split()}
    assert {word for line in text["valid"] + text["test"] for word in line.split()} - seen
    assert set(baselines["corpus"]) == {"mytext"}
    rates = baselines.loc[0, ["unk_rate_train", "unk_rate_valid", "unk_rate_test"]]
    assert ((0.05 < rates) & (rates < 0.5)).all(), rates
    assert " / ".join(f"{100 * r:.1f}%" for r in rates) in html
    record = json.loads((workdir / "reports" / "mine" / "provenance.json").read_text())
    own = [row for row in record["data"] if row["dataset"] == "(your file)"]
    assert sorted(row["file"] for row in own) == sorted(str(workdir / "texts" / n)
                                                         for n in ("train.txt", "valid.txt.gz", "test.txt"))
    assert "3 your own" in html

    # an edited file reruns its corpus and every run on it (its hash is in the run settings)
    with open(workdir / "texts" / "test.txt", "a") as handle:
        handle.write("money bank\n")
    plan = snakemake(workdir, "--configfile", "configs/mine.yaml", "-n", mirror=mirror)
    assert plan.returncode == 0, plan.stderr[-3000:]
    counts = job_counts(plan.stdout + plan.stderr)
    assert counts["restrict_user_corpus"] == 1 and counts["train"] == 6
