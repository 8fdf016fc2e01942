"""The argmax benchmark at a small size: the planted tokens are exactly the unargmaxable ones."""

import numpy as np

from audit.bench import argmax as bench
from audit.evaluate import argmax


def test_planted_tokens_lie_inside_the_hull_and_only_the_lp_proves_them():
    W, b, planted = bench.layer(300, 12, 2.0, 4, seed=1)   # scale: the bias range must not dominate at d = 12
    c = planted[0]
    # l_c is the mean of three rows' logits: never above their max anywhere (a random probe)
    x = np.random.default_rng(2).uniform(-1, 1, size=(200, 12))
    logits = x @ W.T + b
    others = np.delete(logits, c, axis=1).max(axis=1)
    assert np.all(logits[:, c] <= others + 1e-12)
    result = argmax.check(W, b)
    assert np.isin(planted, result.unargmaxable).all() and result.lp_unargmaxable >= 4
    assert result.unresolved.size == 0


def test_the_command_prints_every_tier_and_the_witness_search(capsys):
    assert bench.main(["--vocab", "300", "--dim", "12", "--scale", "2", "--planted", "3", "--experts", "3",
                       "--mixture-dim", "6", "--mixture-input", "8", "--search-steps", "20", "--search-sample", "10",
                       "--search-planted", "4"]) == 0
    out = capsys.readouterr().out
    for tier in ("witness", "dominated", "braid", "lp"):
        assert f"| {tier} |" in out
    assert "the planted ones among them: yes" in out and "CPU seconds per LP" in out
    assert "| random sample | 10 |" in out and "| planted (every step runs: the worst case) | 4 | 0 |" in out
    assert "planted tokens certified (must be 0): 0" in out and "evaluate.argmax.search_tokens" in out


def test_planted_mixture_tokens_are_never_the_argmax():
    # p_c <= the mean of its three parents' p in every component: checked at random inputs
    import torch

    W, b, planted = bench.layer(50, 4, 1.0, 3, seed=2)
    head = bench.mixture_head(W, b, 3, 5, seed=0)
    x = torch.from_numpy(np.random.default_rng(0).uniform(-1, 1, size=(4000, 5))).float()
    with torch.no_grad():
        logp = head(x[None])[0].numpy()
    for c in planted:
        assert (logp[:, c] < np.delete(logp, c, axis=1).max(axis=1)).all()
