import numpy as np
import pytest
import torch
import torch.nn as nn

from audit.errors import AuditError
from audit.evaluate import gradient_share as gs
from audit.model.heads import HeadSpec, build_head


def lstsq_share(W, g):
    """Direct projection: least squares of each g on [W, 1]."""
    A = np.hstack([W, np.ones((W.shape[0], 1))])
    coef = np.linalg.lstsq(A, g.T, rcond=None)[0]
    proj = (A @ coef).T
    return (proj ** 2).sum(1) / (g ** 2).sum(1)


def test_shares_match_a_direct_lstsq_projection():
    rng = np.random.default_rng(0)
    W, g = rng.normal(size=(200, 7)), rng.normal(size=(30, 200))
    s = gs.shares(g, gs.basis(W))
    assert np.allclose(s, lstsq_share(W, g), rtol=1e-10)
    assert 0.0 < s.min() and s.max() < 0.2     # random g: about (d + 1) / V of it survives


def test_a_rank_deficient_w_has_a_truncated_basis():
    rng = np.random.default_rng(1)
    W = rng.normal(size=(50, 2)) @ rng.normal(size=(2, 6))
    Q = gs.basis(W)
    assert Q.shape == (50, 3) and np.allclose(Q.T @ Q, np.eye(3))
    g = rng.normal(size=(4, 50))
    assert np.allclose(gs.shares(g, Q), lstsq_share(W, g))


def head(name, V=40, d=5, options=None, seed=0):
    torch.manual_seed(seed)
    emb = nn.Embedding(V, d)
    nn.init.normal_(emb.weight)
    h = build_head(name, HeadSpec(d_in=d, embedding=emb, options=options or {}))
    with torch.no_grad():
        h.bias.normal_()
    return h.double()


def hand_gradient(name, W, b, x, y):
    l = x @ W.T + b
    if name == "softmax":
        f, slope = l, np.ones_like(l)
    else:  # sigsoftmax: f = l + log sigmoid(l), f' = 2 - sigmoid(l)
        sig = 1.0 / (1.0 + np.exp(-l))
        f, slope = l + np.log(sig), 2.0 - sig
    p = np.exp(f - f.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(len(y)), y] -= 1.0
    return slope * p


@pytest.mark.parametrize("name", ["softmax", "sigsoftmax"])
def test_the_observer_uses_the_pre_map_gradient(name):
    h = head(name)
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, size=(13, 5))
    y = rng.integers(0, 40, size=13)
    obs = gs.GradientShare(h, torch.from_numpy(y), limit=10)
    obs.add(torch.from_numpy(x[:6]))
    obs.add(torch.from_numpy(x[6:]))   # positions 10-12 are beyond the limit
    W, b = h.embedding.weight.detach().numpy(), h.bias.detach().numpy()
    expected = lstsq_share(W, hand_gradient(name, W, b, x[:10], y[:10]))
    out = obs.summary()
    assert out["gradient_share_tokens"] == 10
    assert out["gradient_share"] == pytest.approx(expected.mean(), rel=1e-9)
    assert out["gradient_norm_share"] == pytest.approx(np.sqrt(expected).mean(), rel=1e-9)


@pytest.mark.parametrize("name, options", [("gss", {"c": 0.5, "k": 3.0}), ("plif", {"knots": 8, "bound": 2.0, "seed": 1})])
def test_from_logits_is_the_heads_forward(name, options):
    h = head(name, options=options)
    x = torch.from_numpy(np.random.default_rng(3).uniform(-1, 1, size=(4, 5)))
    assert torch.allclose(h.from_logits(h.logits(x)), h(x), atol=1e-10)


def test_a_mixture_is_refused():
    torch.manual_seed(0)
    emb = nn.Embedding(30, 4)
    mos = build_head("mos", HeadSpec(d_in=4, embedding=emb))
    with pytest.raises(AuditError, match="no pre-map logits"):
        gs.GradientShare(mos, torch.zeros(3, dtype=torch.long))
