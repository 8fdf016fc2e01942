"""Tests for audit.evaluate.jacobian: Jacobian singular values of heads.

Golden values: the softmax head's closed form (I - 1 p^T) W evaluated in float64 with numpy, and
for the sigsoftmax head a Jacobian from torch.autograd.functional.jacobian (reverse mode, a
different code path from the module's forward mode).
"""

import numpy as np
import pytest
import torch
import torch.nn as nn

from audit.evaluate import jacobian
from audit.errors import AuditError
from audit.model.heads import HeadSpec, build_head

V, D = 60, 8


def _head(name, seed=0, weight=None):
    torch.manual_seed(seed)
    emb = nn.Embedding(V, D)
    if weight is not None:
        emb.weight.data = torch.as_tensor(weight, dtype=torch.float32)
    head = build_head(name, HeadSpec(d_in=D, embedding=emb))
    with torch.no_grad():
        head.bias.normal_(0, 1)
    return head.eval()


def _closed_form_sv(head, h_vector):
    w = head.embedding.weight.detach().double().numpy()
    b = head.bias.detach().double().numpy()
    logits = w @ h_vector.double().numpy() + b
    p = np.exp(logits - logits.max())
    p /= p.sum()
    jac = (np.eye(V) - np.outer(np.ones(V), p)) @ w   # d log p / d h
    return np.linalg.svd(jac, compute_uv=False)


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_softmax_jacobian_matches_closed_form(mode):
    head = _head("softmax")
    h = torch.randn(5, 2, D)  # (T, B, d_in) as the head sees it
    got = jacobian.jacobian_singular_values(head, h, mode=mode)
    assert got.shape == (10, D)
    for row, vector in zip(got, h.reshape(-1, D)):
        np.testing.assert_allclose(row, _closed_form_sv(head, vector), rtol=1e-4, atol=1e-6)
    assert head.embedding.weight.grad is None and head.bias.grad is None  # nothing accumulated


@pytest.mark.parametrize("block", [7, 512])
def test_sigsoftmax_jacobian_matches_autograd(block):
    """The fused sigsoftmax kernel is a custom autograd Function: auto falls back to reverse."""
    head = _head("sigsoftmax", seed=1)
    vector = torch.randn(D)
    expected = torch.autograd.functional.jacobian(
        lambda x: head(x.reshape(1, 1, D)).reshape(-1), vector)
    np.testing.assert_allclose(jacobian.jacobian(head, vector, block=block).numpy(),
                               expected.numpy(), rtol=1e-5, atol=1e-6)


def test_degeneracy_counts_a_collapsed_direction():
    """W with one tiny singular value: exactly one of D Jacobian values per context is tiny."""
    rng = np.random.default_rng(2)
    u, _ = np.linalg.qr(rng.standard_normal((V, D)))
    v, _ = np.linalg.qr(rng.standard_normal((D, D)))
    s = np.array([3.0, 2.5, 2.0, 1.8, 1.5, 1.2, 1.0, 1e-6])
    head = _head("softmax", weight=u @ np.diag(s) @ v.T)
    h = torch.randn(40, D)
    result = jacobian.degeneracy(head, h, count=12, rng=np.random.default_rng(3), threshold=1e-3)
    assert result.per_context.shape == (12, D)
    assert result.fraction_below == pytest.approx(1.0 / D)
    np.testing.assert_allclose(result.mean_sv, result.per_context.mean(axis=0))
    assert result.mean_normalised_sv[0] == pytest.approx(1.0)
    assert np.all(np.diff(result.mean_sv) <= 0)
    # the plain head, same weights without the collapse: no degenerate direction
    plain = _head("softmax", weight=u @ np.diag(np.r_[s[:-1], 0.9]) @ v.T)
    assert jacobian.degeneracy(plain, h, 12, np.random.default_rng(3)).fraction_below == 0.0


def test_sample_is_seeded_and_without_replacement():
    a = jacobian.sample_contexts(1000, 50, np.random.default_rng(7))
    b = jacobian.sample_contexts(1000, 50, np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    assert len(np.unique(a)) == 50 and np.all(np.diff(a) > 0) and a.max() < 1000
    np.testing.assert_array_equal(jacobian.sample_contexts(5, 50, np.random.default_rng(7)),
                                  np.arange(5))


def test_bad_input_raises():
    head = _head("softmax")
    with pytest.raises(AuditError, match="shape"):
        jacobian.jacobian_singular_values(head, torch.randn(D))
    with pytest.raises(AuditError, match="threshold"):
        jacobian.degeneracy(head, torch.randn(4, D), 2, np.random.default_rng(0), threshold=0.0)
    with pytest.raises(AuditError, match="mode"):
        jacobian.jacobian(head, torch.randn(D), mode="sideways")
    with pytest.raises(AuditError, match="count"):
        jacobian.sample_contexts(10, 0, np.random.default_rng(0))


def test_auto_takes_the_mode_with_fewer_passes():
    head = _head("softmax")
    h = torch.randn(D)
    # V = 60 outputs in blocks of 16: 4 backward passes against D = 8 tangents -> reverse;
    # in blocks of 4: 15 passes against 8 -> forward (softmax traces under torch.func)
    assert jacobian._resolve_mode(head, h, block=16) == "reverse"
    assert jacobian._resolve_mode(head, h, block=4) == "forward"
    np.testing.assert_allclose(jacobian.jacobian(head, h, "auto", block=16).numpy(),
                               jacobian.jacobian(head, h, "forward").numpy(), rtol=1e-5, atol=1e-6)
