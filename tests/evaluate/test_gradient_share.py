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


def softmax_np(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def mixture_head(name):
    torch.manual_seed(0)
    h = build_head(name, HeadSpec(d_in=6, embedding=nn.Embedding(30, 4), options={"experts": 3}))
    with torch.no_grad():
        h.bias.normal_()
    return h.double().eval()


def test_mos_share_is_the_whole_gradients_share_by_hand():
    """g_k = r_k (p_k - e_y), r_k = pi_k p_k[y] / p[y]; share = sum_k ||P g_k||^2 / sum_k ||g_k||^2,
    with the projection by least squares on [W, 1] (not the QR basis of the code)."""
    h = mixture_head("mos")
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(7, 6)), rng.integers(0, 30, size=7)
    obs = gs.GradientShare(h, torch.from_numpy(y))
    obs.add(torch.from_numpy(x))
    with torch.no_grad():
        ctx = h.contexts(torch.from_numpy(x)).numpy()              # (n, K, d)
        pi = torch.softmax(h.prior(torch.from_numpy(x)), -1).numpy()
    W, b = h.embedding.weight.detach().numpy(), h.bias.detach().numpy()
    p_k = softmax_np(ctx @ W.T + b)                                # (n, K, V)
    rows = np.arange(7)
    p_y = (pi * p_k[rows, :, y]).sum(1)
    r = pi * p_k[rows, :, y] / p_y[:, None]
    g = r[:, :, None] * (p_k - np.eye(30)[y][:, None, :])
    A = np.hstack([W, np.ones((30, 1))])
    proj = A @ np.linalg.lstsq(A, g.reshape(-1, 30).T, rcond=None)[0]
    kept = (proj.T.reshape(7, 3, 30) ** 2).sum((1, 2))
    expected = kept / (g ** 2).sum((1, 2))
    assert obs.summary()["gradient_share"] == pytest.approx(expected.mean(), rel=1e-9)
    assert 0.0 < expected.mean() < 1.0


def test_moc_share_is_the_softmax_share_of_its_averaged_context():
    h = mixture_head("moc")
    x = torch.from_numpy(np.random.default_rng(5).normal(size=(5, 6)))
    y = np.array([1, 2, 3, 4, 5])
    obs = gs.GradientShare(h, torch.from_numpy(y))
    obs.add(x)
    with torch.no_grad():
        l = h.transformed_logits(x).numpy()
    g = softmax_np(l)
    g[np.arange(5), y] -= 1.0
    assert obs.summary()["gradient_share"] == pytest.approx(lstsq_share(h.embedding.weight.detach().numpy(), g).mean(), rel=1e-9)


def test_mixtape_is_refused():
    torch.manual_seed(0)
    emb = nn.Embedding(30, 4)
    mixtape = build_head("mixtape", HeadSpec(d_in=4, embedding=emb, options={"gate_embedding_size": 3}))
    assert gs.pre_map(mixtape) is None
    with pytest.raises(AuditError, match="per-word gates"):
        gs.GradientShare(mixtape, torch.zeros(3, dtype=torch.long))
