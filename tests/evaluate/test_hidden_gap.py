import numpy as np
import pytest
import torch

from audit.errors import AuditError
from audit.evaluate import hidden_gap, spectrum


def softmax_log_p(m, V, d, noise, seed):
    rng = np.random.default_rng(seed)
    H, W, b = rng.uniform(-1, 1, size=(m, d)), 2.0 * rng.normal(size=(V, d)), rng.normal(size=V)
    logits = H @ W.T + b
    log_p = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) - logits.max(1, keepdims=True)
    return log_p + noise * rng.normal(size=log_p.shape)


@pytest.mark.parametrize("d, seed", [(5, 0), (12, 1), (30, 2)])
def test_the_gap_of_a_noisy_softmax_log_p_is_d(d, seed):
    A = softmax_log_p(400, 150, d, 1e-4, seed)
    col = hidden_gap.ColumnMean(None)
    for block in np.array_split(A, 7):
        col.add(torch.from_numpy(block))
    sv = spectrum.singular_values(hidden_gap.double_centred(np.array_split(A, 7), col.mean()))
    dim, ratio = hidden_gap.largest_gap(sv)
    assert dim == d and np.isfinite(ratio) and ratio > 100
    # without centring the bias and the normaliser add two directions: the raw gap is not d
    assert hidden_gap.largest_gap(np.linalg.svd(A, compute_uv=False), centred=False)[0] != d


def test_double_centring_matches_the_projectors():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(9, 6))
    col = hidden_gap.ColumnMean(7)          # only the first 7 rows form the stack
    col.add(A[:4]); col.add(A[4:])
    B = np.vstack(list(hidden_gap.double_centred([A[:7]], col.mean())))
    C, R = np.eye(7) - 1.0 / 7, np.eye(6) - 1.0 / 6
    assert np.allclose(B, C @ A[:7] @ R)


def test_largest_gap_by_hand():
    assert hidden_gap.largest_gap([8.0, 4.0, 3.0, 0.3, 0.2], centred=False) == (3, 10.0)
    assert hidden_gap.largest_gap([8.0, 4.0, 3.0, 0.3, 0.2, 1e-16]) == (3, 10.0)   # structural zero left out
    assert hidden_gap.largest_gap([5.0, 1.0, 0.0], centred=False) == (2, float("inf"))
    with pytest.raises(AuditError, match="hidden gap"):
        hidden_gap.largest_gap([1.0, 0.5])


def test_float32_noise_around_the_floor_is_not_counted():
    """The centred spectrum of a trained d = 64 softmax (default config, 1,000 contexts): 64
    values down to 4.8e-4 s_1, then float32 noise straddling FLOOR = 1e-7. Counting the noise
    above the floor gave 66; the gap into the noise is the estimate."""
    sv = np.concatenate([np.geomspace(1.0, 4.8e-4, 64), [1.77e-7, 1.07e-7, 9.9e-8, 9.7e-8], np.full(30, 5e-8), [0.0]])
    dim, ratio = hidden_gap.largest_gap(sv)
    assert dim == 64 and ratio == pytest.approx(4.8e-4 / 1.77e-7)


def centred_sv(A):
    col = hidden_gap.ColumnMean(None)
    col.add(A)
    return spectrum.singular_values(hidden_gap.double_centred(np.array_split(A, 5), col.mean()))


@pytest.mark.parametrize("d, seed", [(5, 0), (12, 1)])
def test_the_control_fails_when_the_log_p_is_perturbed(d, seed):
    """Issue 33: d_hat == d could fail only on numerical breakdown. A log-P perturbed by 1e-3
    keeps its largest gap at d (the estimate still reads d) but is no longer rank d: the
    control, which also asks the spectrum to end at d, fails; the exact rows pass it."""
    from audit.evaluate import debate
    clean, noisy = (centred_sv(softmax_log_p(400, 150, d, noise, seed)) for noise in (0.0, 1e-3))
    for sv in (clean, noisy):
        assert hidden_gap.largest_gap(sv)[0] == d
    fields = debate.hidden_gap_fields(clean, True, d, d)
    assert fields["hidden_gap_ok"] is True and fields["hidden_gap_residual"] <= hidden_gap.RESIDUAL_TOL
    fields = debate.hidden_gap_fields(noisy, True, d, d)
    assert fields["hidden_gap_ok"] is False and fields["hidden_gap_dim"] == d and fields["hidden_gap_miss"] == 0
    assert fields["hidden_gap_residual"] == pytest.approx(noisy[d] / noisy[0]) and fields["hidden_gap_residual"] > 5e-5
    # and the estimate against a rank the body does not imply fails too: d + 1 expected, d read
    assert debate.hidden_gap_fields(clean, True, d + 1, d + 1)["hidden_gap_ok"] is False
    # no control on a head without a known rank, nor on a body that states none
    assert debate.hidden_gap_fields(noisy, False, d, d)["hidden_gap_ok"] is None
    assert debate.hidden_gap_fields(clean, True, d, None)["hidden_gap_expected"] is None


def test_a_final_layernorm_leaves_rank_d_minus_1_as_the_body_says():
    """The Transformer's final LayerNorm: its features sum to zero before gamma and beta, so the
    double-centred log-P has rank d - 1 (not d, and not d + 1), the body's ``output_rank``."""
    from tests.model.test_transformer import D, model
    lm = model()
    with torch.no_grad():
        lm.body.ln_out.weight.uniform_(0.5, 2.0)
        lm.body.ln_out.bias.normal_(0.0, 1.0)
        y = lm.body.ln_out(torch.randn(300, D) * 3).double().numpy()
    rng = np.random.default_rng(4)
    W, b = 2.0 * rng.normal(size=(60, D)), rng.normal(size=60)
    logits = y @ W.T + b
    log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    sv = centred_sv(log_p)
    assert lm.body.output_rank == D - 1 and hidden_gap.largest_gap(sv)[0] == D - 1
    assert hidden_gap.control(sv, lm.body.output_rank)[0] and not hidden_gap.control(sv, D)[0]
