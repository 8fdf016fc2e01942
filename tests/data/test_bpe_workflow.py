"""End to end: a tiny study with ``data.tokenizer: bpe`` on a corpus of the user's own files (the
outside text of tests/data/test_user_workflow.py), run by Snakemake to its audit: the BPE cache
and tokenizer beside it, every arm below its unigram, perplexity per word in the runs table and
the baselines, word similarity reported as not applicable."""

import pandas as pd
import pytest

from tests.data.test_user_workflow import below_unigram, user_study
from tests.test_pipeline import snakemake


@pytest.mark.slow
def test_a_bpe_study_runs_to_its_audit(tmp_path, mirror):
    # one epoch: the subword text (~3.5 tokens a word at K = 300) is long, and a word's later tokens
    # are easy to predict (test perplexities of 43-57 against the unigram's 72 here)
    workdir = user_study(tmp_path, mirror, "subword", "A tiny study on a byte-level BPE of the test's own files.",
                         epochs=1, tokenizer="bpe", vocab_size=300)

    proc = snakemake(workdir, "--configfile", "configs/subword.yaml", mirror=mirror)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = workdir / "results" / "subword" / "data" / "mytext"
    assert (data / "corpus_bpe300.pt").is_file() and (data / "corpus_bpe300.json").is_file()
    assert not (data / "corpus.pt").exists()   # the word corpus is never built
    runs, _ = below_unigram(workdir, "subword")
    assert len(runs) == 6 and (runs["vocab_size"] == 300).all()
    assert runs["test_ppl_per_word"].notna().all() and (runs["test_ppl_per_word"] > runs["test_ppl"]).all()
    assert not [c for c in runs if c.startswith("wordsim_")]   # no scores, and no note mistaken for one
    baselines = pd.read_csv(workdir / "reports" / "subword" / "tables" / "baselines.csv")
    assert baselines.loc[0, "vocab_size"] == 300
    assert baselines.loc[0, "unigram_ppl_per_word"] > baselines.loc[0, "unigram_ppl"]
    html = (workdir / "reports" / "subword" / "audit.html").read_text()
    assert "not applicable: subword vocabulary" in html and "per word" in html
