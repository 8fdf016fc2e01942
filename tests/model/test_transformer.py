"""The Transformer body (audit.model.bodies.transformer): its parameter count against the closed
form, causality, rotary positions' relativity, and sliding-window streaming against a direct
forward pass of each window."""

import numpy as np
import pytest
import torch

from audit.errors import AuditError
from audit.model.language_model import LanguageModel, ModelConfig, count_parameters
from audit.model.bodies.transformer import rotary_tables, rotate

V, D, FF, L, HEADS, CONTEXT = 40, 16, 24, 2, 4, 12


def model(positions="learned", **extra):
    torch.manual_seed(0)
    cfg = ModelConfig.of(vocab_size=V, emb_size=D, hidden_size=FF, n_layers=L, n_heads=HEADS, body="transformer",
                      positions=positions, context_size=CONTEXT, dropout=0.0, dropouti=0.0, **extra)
    return LanguageModel(cfg).eval()


@pytest.mark.parametrize("positions, bias", [("learned", True), ("rotary", True), ("rotary", False)])
def test_parameter_count_matches_closed_form(positions, bias):
    # tied embedding V d; per block two LayerNorms (4d), qkv (3d^2 + 3d), output (d^2 + d), MLP
    # (2 d ff + ff + d); final LayerNorm 2d; learned positions context x d; decoder bias V
    per_block = 4 * D + (3 * D * D + 3 * D) + (D * D + D) + (2 * D * FF + FF + D)
    expected = V * D + L * per_block + 2 * D + (CONTEXT * D if positions == "learned" else 0) + (V if bias else 0)
    assert count_parameters(model(positions, decoder_bias=bias)) == expected


@pytest.mark.parametrize("positions", ["learned", "rotary"])
def test_outputs_are_causal(positions):
    lm = model(positions)
    words = torch.randint(0, V, (10, 2))
    changed = words.clone()
    changed[6:] = (changed[6:] + 1) % V
    first = lm(words, lm.init_hidden(2))[0]
    second = lm(changed, lm.init_hidden(2))[0]
    torch.testing.assert_close(first[:6], second[:6])      # positions 0..5 never see tokens 6..9
    assert not torch.allclose(first[6:], second[6:])


def test_rotary_scores_depend_only_on_the_offset():
    cos, sin = rotary_tables(20, 8, "cpu", torch.float64)
    q, k = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    rq = rotate(q.expand(1, 1, 20, 8), cos, sin)[0, 0]
    rk = rotate(k.expand(1, 1, 20, 8), cos, sin)[0, 0]
    torch.testing.assert_close(rq.norm(dim=-1), q.norm().expand(20))          # rotations keep norms
    torch.testing.assert_close(rq[7] @ rk[3], rq[14] @ rk[10])                # offset 4 both times


@pytest.mark.parametrize("positions", ["learned", "rotary"])
def test_streaming_is_a_sliding_window(positions):
    """Chunks of 5 through a 12-token context with stride 3: each piece's log-P (pieces of 3 from
    each chunk's start) equal the last rows of one direct forward over the window ending with it
    (the earlier ids, cut to the context's last 12)."""
    lm = model(positions, eval_stride=3)
    ids = torch.randint(0, V, (23, 1))
    hidden, rows = lm.init_hidden(1), []
    for start in range(0, 23, 5):
        log_p, hidden, _, _ = lm(ids[start:start + 5], hidden)
        rows.append(log_p)
        for piece in range(start, min(start + 5, 23), 3):
            end = min(piece + 3, start + 5, 23)
            window = ids[max(0, end - CONTEXT):end]
            direct = lm.head(lm.body.features(window))[-(end - piece):]   # one window, no pieces
            torch.testing.assert_close(log_p[piece - start:end - start], direct)
        assert hidden.size(0) == min(start + 5, 23, CONTEXT - 1)
    assert torch.cat(rows).shape == (23, 1, V)   # every position once


def test_bad_sizes_are_one_line():
    with pytest.raises(AuditError, match="n_heads=3 must divide emb_size=16"):
        LanguageModel(ModelConfig.of(vocab_size=V, emb_size=D, n_heads=3, body="transformer"))
    with pytest.raises(AuditError, match="training chunk of 13 tokens is longer than model.context_size=12"):
        lm = model().train()
        lm(torch.zeros(13, 1, dtype=torch.long), lm.init_hidden(1))


def test_the_output_box_holds_every_final_layernorm_output():
    lm = model()
    with torch.no_grad():                       # trained-looking LayerNorm parameters, one gamma negative
        lm.body.ln_out.weight.uniform_(0.5, 2.0)
        lm.body.ln_out.weight[3] = -1.5
        lm.body.ln_out.bias.normal_(0.0, 1.0)
    lo, hi = lm.body.output_box
    assert lo.shape == hi.shape == (D,) and (lo < hi).all()
    gamma, beta = lm.body.ln_out.weight.detach().double().numpy(), lm.body.ln_out.bias.detach().double().numpy()
    assert np.allclose(hi - beta, np.abs(gamma) * np.sqrt(D - 1)) and np.allclose(beta - lo, hi - beta)
    # the body's features of random text, random vectors through the LayerNorm, and the extreme
    # inputs e_i (all the variance in one coordinate: z_i = sqrt(d - 1), the bound itself)
    with torch.no_grad():
        features = lm.body(torch.randint(0, V, (30, 4)), lm.body.init_hidden(4))[1].reshape(-1, D).double().numpy()
        vectors = torch.randn(2000, D) * torch.rand(2000, 1) * 10
        spikes = torch.cat([torch.eye(D) * 1e3, -torch.eye(D) * 1e3])
        normed = lm.body.ln_out(torch.cat([vectors, spikes])).double().numpy()
    for y in (features, normed):
        assert (y >= lo - 1e-5).all() and (y <= hi + 1e-5).all()
    reach = np.maximum(normed[-2 * D:] - beta, beta - normed[-2 * D:]).max(axis=0)
    assert np.allclose(reach, hi - beta, rtol=1e-4)      # the spikes reach the box's faces: it is tight
