"""Tests for audit.bench.candidates: specs, and one tiny candidate scored against its unigram."""

import numpy as np
import pytest

from audit.bench import candidates
from audit.errors import AuditError


def test_spec_keys_are_typed_and_unknown_ones_refused():
    spec = candidates.parse_spec("K=500,d=16,lr=2.5,head=mos,experts=2")
    assert (spec["K"], spec["d"], spec["lr"], spec["head"], spec["experts"]) == (500, 16, 2.5, "mos", 2)
    assert spec["H"] == candidates.DEFAULTS["H"]
    # the latent dropout alone (the MoS sweep's arms) or with every other dropout
    alone = candidates.settings_for(candidates.parse_spec("head=mos,experts=1,last=32,dropl=0.29"))
    assert alone["options"]["dropoutl"] == 0.29 and alone["model"]["dropout"] == alone["model"]["wdrop"] == 0.0
    every = candidates.settings_for(candidates.parse_spec("head=mos,experts=1,last=32,drop=0.29"))
    assert every["options"]["dropoutl"] == every["model"]["dropout"] == every["model"]["wdrop"] == 0.29
    with pytest.raises(AuditError, match="dropl=0.29 needs head=mos"):
        candidates.settings_for(candidates.parse_spec("dropl=0.29"))
    with pytest.raises(AuditError, match="unknown spec key 'width'"):
        candidates.parse_spec("width=3")
    with pytest.raises(AuditError, match="spec key d='x' is not a int"):
        candidates.parse_spec("d=x")


def test_a_tiny_candidate_is_scored_against_the_unigram_of_its_vocabulary(ptb_corpus, tmp_path):
    from audit.data.corpus import load, restrict_vocab

    spec = candidates.parse_spec("K=100,d=8,H=16,E=1,T=3000")
    out = candidates.measure(spec, ptb_corpus, tmp_path)
    assert len(out["valid_ppl"]) == 1 and out["cpu_seconds"] > 0
    # the unigram written out by hand: add-0.5 counts of the K = 100 training split
    corpus = restrict_vocab(load(ptb_corpus), 100)
    counts = np.bincount(corpus.train.numpy(), minlength=100) + 0.5
    logp = np.log(counts / counts.sum())
    for label, tokens in (("test", corpus.test), ("test_first_5000", corpus.test[:5000])):
        expected = float(np.exp(-logp[tokens[1:].numpy()].mean()))
        assert out[label]["unigram_ppl"] == pytest.approx(expected, abs=0.005)   # rounded to 2 digits
        assert out[label]["ratio"] == pytest.approx(out[label]["ppl"] / out[label]["unigram_ppl"], abs=1e-3)
