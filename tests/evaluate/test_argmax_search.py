"""The witness search (audit.evaluate.argmax_search): what it certifies is argmaxable (checked by an
independent numpy forward at its witness), a token no input makes the argmax is never counted,
and on small heads it finds what brute force over a dense grid of the box finds."""

import numpy as np
import pytest
import torch
import torch.nn as nn

from audit.errors import AuditError
from audit.evaluate import argmax, argmax_search
from audit.model.heads import HeadSpec, build_head


def mixture_numpy(x):
    """log p of ``TwoSoftmaxes`` at x (n, 2), in numpy: log(0.5 softmax(l_A) + 0.5 softmax(l_B))."""
    s = x[:, 0] + x[:, 1]
    def softmax(l):
        e = np.exp(l - l.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    a = np.stack([3 * x[:, 0], -3 * x[:, 0], 10 * s - 16, 3 * x[:, 0] - 1], axis=1)
    b = np.stack([3 * x[:, 1], -3 * x[:, 1], 10 * s - 16, 3 * x[:, 1] - 1], axis=1)
    return np.log(0.5 * softmax(a) + 0.5 * softmax(b))


class TwoSoftmaxes(nn.Module):
    """A constructed mixture of two softmaxes over V = 4 words on x in R^2, (T, B, 2) -> (T, B, 4).

    Token 3's logit is token 0's minus 1 in both components, so p_3 < p_0 everywhere: unargmaxable.
    Token 2's logit 10 (x1 + x2) - 16 beats the others only near the corner (1, 1) of [-1, 1]^2
    (x1 + x2 > 1.9: 0.1% of the box), so only a search that climbs finds it."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.0))   # a parameter, so dtype moves reach the head

    def forward(self, h):
        x1, x2 = h[..., 0] * self.scale, h[..., 1] * self.scale
        s = x1 + x2
        a = torch.stack([3 * x1, -3 * x1, 10 * s - 16, 3 * x1 - 1], dim=-1)
        b = torch.stack([3 * x2, -3 * x2, 10 * s - 16, 3 * x2 - 1], dim=-1)
        return torch.logsumexp(torch.stack([a.log_softmax(-1), b.log_softmax(-1)]), dim=0) - np.log(2.0)


def strict_argmax(logp, c):
    others = np.delete(logp, c, axis=1)
    return logp[:, c] - others.max(axis=1) > argmax.MARGIN


def test_the_search_finds_the_corner_token_and_never_counts_the_dominated_one():
    res = argmax_search.search(TwoSoftmaxes(), 1.0, 2, steps=100)
    assert res.argmaxable.tolist() == [0, 1, 2] and res.unresolved.tolist() == [3]
    # every witness, recomputed in numpy, makes its token the strict argmax, inside the box
    for c, x in zip(res.argmaxable, res.witnesses):
        assert np.abs(x).max() <= 1.0 and strict_argmax(mixture_numpy(x[None]), c)[0]
    assert res.witnesses[2].sum() > 1.9
    # the corner is rare: 20,000 uniform points in the box rarely reach it (the search climbs)
    x = np.random.default_rng(0).uniform(-1, 1, size=(20_000, 2))
    assert strict_argmax(mixture_numpy(x), 2).mean() < 0.005
    summary = res.summary()
    assert summary["unargmaxable"] is None and summary["argmax_argmaxable"] == 3
    assert summary["argmax_unresolved"] == 1 and summary["argmax_searched_tokens"] == 4
    assert summary["argmax_note"] == "lower bound from a witness search: at least 3 argmaxable, 1 unresolved"
    assert summary["argmax_seconds"] == summary["argmax_seconds_search"] > 0


def test_a_per_coordinate_box_bounds_the_witnesses():
    lo, hi = np.array([0.5, 0.95]), np.array([1.0, 1.2])    # x1 + x2 > 1.9 is easy here, x1 < 0 impossible
    res = argmax_search.search(TwoSoftmaxes(), (lo, hi), 2, steps=50)
    assert 2 in res.argmaxable and 1 not in res.argmaxable and 3 not in res.argmaxable
    assert (res.witnesses >= lo).all() and (res.witnesses <= hi).all()


def test_the_token_budget_leaves_the_rest_unresolved():
    res = argmax_search.search(TwoSoftmaxes(), 1.0, 2, steps=100, budget=2)
    assert res.argmaxable.tolist() == [0, 1] and res.unresolved.tolist() == [2, 3] and res.searched == 2
    assert res.summary()["argmax_note"] == ("lower bound from a witness search: at least 2 argmaxable, 2 unresolved "
                                            "(2 of them beyond the evaluate.argmax.search_tokens budget of 2)")
    with pytest.raises(AuditError, match="steps and budget must be >= 0"):
        argmax_search.search(TwoSoftmaxes(), 1.0, 2, steps=-1)


def small_head(name, vocab, d, d_in, seed, scale=3.0, **options):
    torch.manual_seed(seed)
    embedding = nn.Embedding(vocab, d)
    nn.init.normal_(embedding.weight, 0.0, scale)
    head = build_head(name, HeadSpec(d_in=d_in, embedding=embedding, options=options))
    with torch.no_grad():
        head.bias.normal_(0.0, 1.0)
        for module in head.modules():   # spread the latent and gate layers: distinct regions in the box
            if isinstance(module, nn.Linear):
                module.weight.mul_(4.0)
    return head.eval()


def grid_argmaxable(head, points=601):
    g = np.linspace(-1.0, 1.0, points)
    x = torch.from_numpy(np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)).double()
    with torch.no_grad():
        logp = head.double()(x[None])[0].numpy()
    top2 = np.sort(logp, axis=1)[:, -2:]
    strict = top2[:, 1] - top2[:, 0] > 1e-9
    return set(np.unique(logp.argmax(axis=1)[strict]).tolist())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_on_a_tiny_mos_the_search_agrees_with_brute_force_over_a_dense_grid(seed):
    head = small_head("mos", 6, 2, 2, seed, experts=2, dropoutl=0.0)
    res = argmax_search.search(head, 1.0, 2, steps=100, seed=seed)
    grid = grid_argmaxable(head)
    assert set(res.argmaxable.tolist()) == grid
    assert 0 < len(grid) < 6        # both kinds present: the comparison can fail


def test_on_a_softmax_head_the_search_never_certifies_what_the_exact_test_refutes():
    head = small_head("softmax", 40, 3, 3, 4, scale=1.0)
    W, b = (t.detach().double().numpy() for t in head.output_layer())
    exact = argmax.check(W, b)
    assert exact.unresolved.size == 0 and 0 < exact.unargmaxable.size < 40
    res = argmax_search.search(head, 1.0, 3, steps=100)
    assert not set(res.argmaxable.tolist()) & set(exact.unargmaxable.tolist())
    assert set(res.argmaxable.tolist()) == set(range(40)) - set(exact.unargmaxable.tolist())


def test_a_duplicate_token_ties_everywhere_and_is_never_certified():
    head = small_head("softmax", 5, 2, 2, 0, scale=1.0)
    with torch.no_grad():
        head.embedding.weight[4] = head.embedding.weight[0]
        head.bias[4] = head.bias[0]
    res = argmax_search.search(head, 1.0, 2, steps=30)
    assert 0 not in res.argmaxable and 4 not in res.argmaxable


def test_mixtape_witnesses_hold_in_an_independent_float64_forward():
    head = small_head("mixtape", 12, 4, 5, 3, scale=1.0, gate_embedding_size=3, frequent_token_fraction=0.5)
    res = argmax_search.search(head, 1.0, 5, steps=60)
    assert res.argmaxable.size > 0
    double = build_head("mixtape", HeadSpec(d_in=5, embedding=nn.Embedding(12, 4),
                                            options={"gate_embedding_size": 3, "frequent_token_fraction": 0.5}))
    double.load_state_dict(head.state_dict())
    with torch.no_grad():
        logp = double.double().eval()(torch.from_numpy(res.witnesses)[None])[0].numpy()
    assert all(strict_argmax(logp[i:i + 1], c)[0] for i, c in enumerate(res.argmaxable))
    # words that win on a large part of the box are found
    x = torch.from_numpy(np.random.default_rng(0).uniform(-1, 1, size=(20_000, 5)))
    with torch.no_grad():
        winners = np.bincount(double(x[None])[0].numpy().argmax(axis=1), minlength=12)
    assert set(np.flatnonzero(winners > 200).tolist()) <= set(res.argmaxable.tolist())


def test_without_steps_every_start_is_still_checked():
    # the corner start m + r sign(grad f_2(m)) = (1, 1) certifies token 2 with no ascent at all
    res = argmax_search.search(TwoSoftmaxes(), 1.0, 2, steps=0)
    assert 2 in res.argmaxable and 3 not in res.argmaxable and res.summary()["argmax_search_steps"] == 0
