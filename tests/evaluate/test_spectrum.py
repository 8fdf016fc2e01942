"""Tests for audit.evaluate.spectrum: streamed singular values and the rank functions.

Golden values are either known by construction (U diag(s) V^T with orthogonal factors), computed
independently with a full LAPACK SVD of the same matrix, or hand-checked arithmetic.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from audit.evaluate import spectrum
from audit.errors import AuditError
from audit.model.heads import HeadSpec, build_head

F32_EPS = float(np.finfo(np.float32).eps)


def _orthonormal(rng, rows, cols):
    q, r = np.linalg.qr(rng.standard_normal((rows, cols)))
    return q * np.sign(np.diag(r))  # unique Q: a deterministic orthonormal basis


def _known(rng, m, n, s):
    """An m x n float64 matrix whose singular values are exactly s (descending, length min(m, n))."""
    k = len(s)
    return _orthonormal(rng, m, k) @ np.diag(s) @ _orthonormal(rng, n, k).T


def _blocks(a, sizes):
    """Split rows of a into blocks of the cycling sizes (uneven on purpose)."""
    out, start, i = [], 0, 0
    while start < a.shape[0]:
        step = sizes[i % len(sizes)]
        out.append(a[start:start + step])
        start, i = start + step, i + 1
    return out


@pytest.mark.parametrize("m,n", [(500, 120), (120, 500), (120, 120), (121, 120), (37, 120)])
def test_constructed_spectrum_recovered(m, n):
    rng = np.random.default_rng(1)
    s = np.logspace(0, -4, min(m, n))  # four decades: resolved by the float64 Gram
    a = _known(rng, m, n, s)
    sp = spectrum.stream_spectrum(_blocks(a, [1, 17, 64, 5]))
    assert (sp.m, sp.n) == (m, n)
    assert sp.sv.dtype == np.float64 and sp.sv.shape == (min(m, n),)
    np.testing.assert_allclose(sp.sv, s, rtol=1e-7, atol=1e-12)


def test_torch_chunks_and_wrapper_match_numpy():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((300, 80)).astype(np.float32)
    expected = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    from_torch = spectrum.singular_values(torch.from_numpy(b) for b in _blocks(a, [50]))
    from_numpy = spectrum.singular_values(iter(_blocks(a, [33])))
    np.testing.assert_allclose(from_torch, expected, rtol=1e-10)
    np.testing.assert_allclose(from_numpy, expected, rtol=1e-10)


def test_buffered_rows_are_copied():
    """A producer that refills one buffer must not corrupt rows buffered while m <= n."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((60, 40)).astype(np.float32)

    def reuse():
        buf = np.empty((10, 40), dtype=np.float32)
        for start in range(0, 60, 10):
            buf[:] = a[start:start + 10]
            yield buf

    expected = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    np.testing.assert_allclose(spectrum.singular_values(reuse()), expected, rtol=1e-10)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_chunks_accumulate_on_device():
    rng = np.random.default_rng(4)
    for m, n in [(700, 200), (150, 200)]:
        a = rng.standard_normal((m, n)).astype(np.float32)
        expected = np.linalg.svd(a.astype(np.float64), compute_uv=False)
        chunks = [torch.from_numpy(b).cuda() for b in _blocks(a, [64])]
        np.testing.assert_allclose(spectrum.singular_values(chunks), expected, rtol=1e-9)


def test_bad_streams_raise():
    with pytest.raises(AuditError, match="empty"):
        spectrum.stream_spectrum([])
    with pytest.raises(AuditError, match="columns"):
        spectrum.stream_spectrum([np.ones((3, 4)), np.ones((3, 5))])
    with pytest.raises(AuditError, match="2-D"):
        spectrum.stream_spectrum([np.ones(4)])
    bad = np.ones((10, 4))
    bad[7, 2] = np.nan
    with pytest.raises(AuditError, match="column 2"):
        spectrum.stream_spectrum([bad])        # tall: column Gram
    with pytest.raises(AuditError, match="non-finite"):
        spectrum.stream_spectrum([bad[5:8]])  # short: row Gram


# ---- Press rank: streamed Gram vs float64 SVD (equal) and float32 LAPACK (within 0.1%) ----

def _press_three_ways(logp: np.ndarray):
    """Press rank from the streamed Gram, a float64 SVD and the float32 LAPACK SVD."""
    m, n = logp.shape
    ours = spectrum.press_rank(spectrum.singular_values(_blocks(logp, [256])), m, n)
    f64 = spectrum.press_rank(np.linalg.svd(logp.astype(np.float64), compute_uv=False), m, n)
    f32 = spectrum.press_rank(np.linalg.svd(logp, compute_uv=False), m, n)
    return ours, f64, f32


def _head_logp(name, vocab, d, contexts, seed, scale=2.0):
    torch.manual_seed(seed)
    emb = nn.Embedding(vocab, d)
    head = build_head(name, HeadSpec(d_in=d, embedding=emb))
    with torch.no_grad():
        head.bias.normal_(0, 1)
        h = torch.randn(contexts, 1, d) * scale
        return head(h).reshape(contexts, vocab).numpy().astype(np.float32)


def _mos_logp(rng, vocab, d, contexts, experts, scale):
    """Mixture-of-softmaxes log-P: log sum_k pi_k softmax(W h_k), high rank by construction."""
    w = rng.standard_normal((vocab, d))
    h = scale * rng.standard_normal((contexts, experts, d))
    log_prior = F.log_softmax(torch.from_numpy(rng.standard_normal((contexts, experts))), -1)
    logp = torch.logsumexp(log_prior[..., None] + F.log_softmax(torch.from_numpy(h @ w.T), -1), 1)
    return logp.numpy().astype(np.float32)


def test_press_rank_softmax_head_is_d_plus_2():
    logp = _head_logp("softmax", vocab=400, d=24, contexts=1100, seed=5)
    ours, f64, f32 = _press_three_ways(logp)
    assert ours == f64 == 24 + 2  # span of h, the bias and the log-normaliser
    assert abs(ours - f32) <= 0.001 * min(logp.shape)


@pytest.mark.parametrize("kind", ["sigsoftmax", "mos", "mos-short"])
def test_press_rank_high_rank_heads(kind):
    """Scales chosen so the rank is high but partial: the tolerance cuts through a decaying tail."""
    rng = np.random.default_rng(6)
    if kind == "sigsoftmax":
        logp = _head_logp("sigsoftmax", vocab=1000, d=24, contexts=2400, seed=6, scale=0.1)
    elif kind == "mos":
        logp = _mos_logp(rng, vocab=1000, d=24, contexts=2400, experts=3, scale=0.03)
    else:  # fewer contexts than words: the row-Gram path
        logp = _mos_logp(rng, vocab=1000, d=24, contexts=700, experts=3, scale=0.03)
    ours, f64, f32 = _press_three_ways(logp)
    assert ours == f64
    assert 24 + 2 < ours < min(logp.shape)  # above the softmax bound, below full rank
    assert abs(ours - f32) <= max(1.0, 0.001 * min(logp.shape))


# ---- hand-checked rank functions ----

def test_press_rank_golden():
    # m + n + 1 = 16: tol = 0.5 * 4 * 4 * eps = 8 eps = 9.54e-7
    assert spectrum.press_rank([4.0, 2.0, 1.0, 1e-6, 0.0], 10, 5) == 4
    assert spectrum.press_rank([4.0, 2.0, 1.0, 9e-7, 0.0], 10, 5) == 3
    assert spectrum.press_rank([4.0, 8 * F32_EPS], 10, 5) == 1  # equal to tol: not counted
    assert spectrum.press_rank([4.0, 1e-9], 10, 5, eps=1e-12) == 2
    assert spectrum.press_rank([], 3, 3) == 0
    assert spectrum.press_rank([0.0, 0.0], 3, 3) == 0


def test_epsilon_rank_golden():
    sv = [3.0, 2.0, 1.0]  # energies 9, 4, 1 of 14
    assert spectrum.epsilon_rank(sv, 0.5) == 1    # 9 >= 7
    assert spectrum.epsilon_rank(sv, 0.1) == 2    # 13 >= 12.6 > 9
    assert spectrum.epsilon_rank(sv, 0.05) == 3   # 13.3 > 13
    assert spectrum.epsilon_rank(sv, 0.0) == 3
    assert spectrum.epsilon_rank([1.0, 3.0, 2.0], 0.1) == 2  # order does not matter
    assert spectrum.epsilon_rank([0.0, 0.0], 1e-3) == 0
    with pytest.raises(AuditError):
        spectrum.epsilon_rank(sv, 1.0)


def test_entropy_rank_golden():
    assert spectrum.entropy_rank([1.0, 1.0, 1.0, 1.0]) == pytest.approx(4.0)
    # p = (1/2, 1/4, 1/4): H = 1.5 ln 2, exp(H) = 2 ** 1.5
    assert spectrum.entropy_rank([2.0, 1.0, 1.0, 0.0]) == pytest.approx(2 ** 1.5)
    assert spectrum.entropy_rank([5.0]) == pytest.approx(1.0)
    assert spectrum.entropy_rank([0.0, 0.0]) == 0.0


def test_normalised():
    np.testing.assert_allclose(spectrum.normalised(np.array([4.0, 2.0, 1.0])), [1.0, 0.5, 0.25])
    np.testing.assert_array_equal(spectrum.normalised(np.zeros(3)), np.zeros(3))


def test_rank_functions_on_constructed_spectrum():
    """Ranks from the streamed spectrum equal the ranks of the known singular values."""
    rng = np.random.default_rng(7)
    s = np.concatenate([np.logspace(0, -3, 60), np.full(40, 1e-9)])  # 60 above tol, 40 below
    a = _known(rng, 400, 100, s)
    sv = spectrum.singular_values(_blocks(a, [64]))
    assert spectrum.press_rank(sv, 400, 100) == spectrum.press_rank(s, 400, 100) == 60
    for eps in (1e-3, 1e-4, 1e-5):
        assert spectrum.epsilon_rank(sv, eps) == spectrum.epsilon_rank(s, eps)
    assert spectrum.entropy_rank(sv) == pytest.approx(spectrum.entropy_rank(s), rel=1e-6)
    assert math.isfinite(spectrum.entropy_rank(sv))


# ---- the benchmark's matrix and its command line, at a toy size ----

def test_bench_matrix_is_a_log_p_with_bounded_rank():
    from audit.bench.spectrum import logp_chunks

    blocks = list(logp_chunks(rows=300, cols=120, rank=30, seed=4))
    again = np.concatenate(list(logp_chunks(rows=300, cols=120, rank=30, seed=4)))
    logp = np.concatenate(blocks)
    np.testing.assert_array_equal(logp, again)                    # seeded: reproducible
    assert logp.dtype == np.float32 and logp.shape == (300, 120)
    np.testing.assert_allclose(np.exp(logp.astype(np.float64)).sum(axis=1), 1.0, rtol=1e-5)
    ours, f64, _ = _press_three_ways(logp)
    assert ours == f64 <= 30 + 2   # logit term, unigram bias, log-normaliser


def test_bench_command_prints_both_methods(capfd):
    from audit.bench.spectrum import main

    assert main(["--rows", "400", "--cols", "150", "--rank", "40"]) == 0
    out = capfd.readouterr().out
    assert "ours (streamed float64 Gram + eigh)" in out and "materialised float32 LAPACK SVD" in out
    ranks = out.split("Press ranks ")[1].split(" (")[0].split(" vs ")
    assert ranks[0] == ranks[1] and 0 < int(ranks[0]) <= 42
    assert out.count("peak RSS") == 2


def test_tiled_gram_with_several_panels_and_flushes_matches_lapack(monkeypatch):
    """Panels of 7 columns over n = 20 (tiles 7, 7, 6; dgemm off the diagonal) and 700 rows in
    37-row chunks (two full 256-row flushes and a partial one) give LAPACK's singular values."""
    from audit.evaluate import spectrum as module

    monkeypatch.setattr(module._CpuGram, "PANEL", 7)
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((700, 20)) * np.logspace(0, -4, 20)).astype(np.float32)
    got = module.singular_values(a[i:i + 37] for i in range(0, 700, 37))
    want = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12 * want[0])


def test_rank_summary_is_the_one_source_of_the_rank_keys():
    # issue 20: evaluate.run and synthetic.fit each wrote the keys; both now call rank_summary
    from audit.evaluate.ranks import rank_keys
    from audit.synthetic import plan
    rng = np.random.default_rng(3)
    s = np.array([10.0, 5.0, 1.0, 1e-4, 1e-7])
    spec = spectrum.stream_spectrum([_known(rng, 40, 5, s)])
    out = spectrum.rank_summary(spec, "f_logits_")
    assert list(out) == rank_keys("f_logits_") and len(out) == 5
    # hand-worked: Press tolerance 0.5 sqrt(40 + 5 + 1) * 10 * eps32 = 4.0e-6 keeps 10, 5, 1, 1e-4;
    # energy 126 + 1e-8: the top two leave 1/126 = 7.9e-3 out, the top three 8e-11 (< every eps)
    assert out["f_logits_press_rank"] == 4
    assert out["f_logits_erank_1e-3"] == 3 and out["f_logits_erank_1e-5"] == 3
    assert out["f_logits_entropy_rank"] == pytest.approx(spectrum.entropy_rank(spec.sv))
    assert plan.METRICS[4:] == rank_keys() and plan.TRUE_RANKS == rank_keys("true_")
