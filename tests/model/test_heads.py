"""Property tests of every output head (audit.model.heads, audit.model.kernels).

Invariants checked: log-probabilities normalise in float32 and float64 and stay finite for
logits of +-1e4; the GSS family reduces to softmax / sigsoftmax and matches its defining
formula; PLIF is increasing, continuous at its knots, linear outside [-T, T] and its fused
gradients match finite differences; the mixture heads match direct probability-space
formulas; the Press rank of log-P is d + 2 for softmax, at most d + 2 for MoC and above d + 2
for MoS, GSS and SigSoftmax.
"""

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from audit.errors import AuditError
from audit.model.kernels.gss import gss_log_softmax
from audit.model.heads import HEADS, HeadSpec, build_head
from audit.model.heads.base import mean_nll
from audit.model.kernels.dropout import locked_dropout
from audit.model.kernels.mixtures import mixture_log_probs, mixture_target_log_probs, sigmoid_tree
from audit.model.kernels.plif import W_CENTRE, plif_apply, plif_log_softmax, plif_reference
from audit.evaluate.spectrum import press_rank

V, D, D_IN, T, B = 60, 8, 12, 5, 4
SMALL = {"plif": {"knots": 300}, "plif_frozen": {"knots": 300}, "mixtape": {"gate_embedding_size": 6}}


def make_head(name, dtype=torch.float32, options=None, seed=0, d_in=None, weight_scale=None):
    """A head on a fresh V x D embedding; projecting heads read D_IN-sized inputs."""
    torch.manual_seed(seed)
    emb = nn.Embedding(V, D)
    if weight_scale is not None:
        with torch.no_grad():
            emb.weight.normal_(0.0, weight_scale)
    d_in = d_in or (D_IN if HEADS[name].projects_input else D)
    opts = {**SMALL.get(name, {}), **(options or {})}
    head = build_head(name, HeadSpec(d_in=d_in, embedding=emb, options=opts)).to(dtype)
    return head.eval(), d_in


def inputs(d_in, dtype, scale=1.0, seed=1, rows=(T, B)):
    gen = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(*rows, d_in, generator=gen, dtype=torch.float64)).to(dtype)


@pytest.mark.parametrize("name", sorted(HEADS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("training", [False, True])
def test_log_probs_normalise(name, dtype, training):
    head, d_in = make_head(name, dtype, options={"dropoutl": 0.3} if name.startswith("mos") or name == "moc" else None)
    head.train(training)
    logp = head(inputs(d_in, dtype))
    assert logp.shape == (T, B, V) and logp.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert torch.logsumexp(logp, -1).abs().max().item() < tol
    assert (logp <= tol).all()


@pytest.mark.parametrize("name", sorted(HEADS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_extreme_logits_stay_finite(name, dtype):
    # embedding entries of ~2e3 give logits of order 1e4 (|W h| up to D * 2e3 * |h|)
    head, d_in = make_head(name, dtype, weight_scale=2e3)
    head.train()
    h = inputs(d_in, dtype).requires_grad_(True)
    logits = head.logits(h if not head.projects_input else torch.tanh(h[..., :D]))
    assert logits.abs().max().item() > 1e4
    logp = head(h)
    assert torch.isfinite(logp).all()
    assert torch.logsumexp(logp, -1).abs().max().item() < 1e-4
    F.nll_loss(logp.view(-1, V), torch.arange(T * B) % V).backward()
    assert torch.isfinite(h.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in head.parameters() if p.grad is not None)


def test_gss_reduces_to_sigsoftmax_and_softmax():
    h = inputs(D, torch.float64, scale=3.0)
    ss, _ = make_head("sigsoftmax", torch.float64)
    gss02, _ = make_head("gss", torch.float64, {"c": 0.0, "k": 2.0})
    torch.testing.assert_close(gss02(h), ss(h), rtol=0, atol=1e-12)
    soft, _ = make_head("softmax", torch.float64)
    for c in (-1.5, 0.0, 2.0):
        gss_c1, _ = make_head("gss", torch.float64, {"c": c, "k": 1.0})
        torch.testing.assert_close(gss_c1(h), soft(h), rtol=0, atol=1e-12)


def test_sigsoftmax_matches_its_definition():
    # p_i = exp(l_i) sigmoid(l_i) / sum_j exp(l_j) sigmoid(l_j), computed naively in float64
    head, _ = make_head("sigsoftmax", torch.float64)
    h = inputs(D, torch.float64, scale=2.0)
    logits = head.logits(h)
    unnorm = torch.exp(logits) * torch.sigmoid(logits)
    torch.testing.assert_close(head(h), torch.log(unnorm / unnorm.sum(-1, keepdim=True)))


@pytest.mark.parametrize("c,k", [(-1.5, 2.5), (-1.5, 3.0), (0.5, 1.25), (1.0, 0.5)])
def test_gss_matches_two_piece_formula(c, k):
    head, _ = make_head("gss", torch.float64, {"c": c, "k": k})
    h = inputs(D, torch.float64, scale=3.0).requires_grad_(True)
    logits = head.logits(h)
    f = k * (logits - c) + c - (k - 1) * torch.log1p(torch.exp(logits - c))  # the paper's form
    torch.testing.assert_close(head.transformed_logits(h), f)
    torch.testing.assert_close(head(h), torch.log_softmax(f, -1))
    assert torch.autograd.gradcheck(lambda x: gss_log_softmax(x, c, k), (logits.detach().requires_grad_(),))


def test_head_rejects_bad_options_and_names():
    with pytest.raises(AuditError, match="unknown option"):
        make_head("gss", options={"kk": 2})
    with pytest.raises(AuditError, match="outside"):
        make_head("gss", options={"k": -1.0})
    with pytest.raises(AuditError, match="unknown head"):
        build_head("nope", HeadSpec(d_in=D, embedding=nn.Embedding(V, D)))
    with pytest.raises(AuditError, match="d_in"):
        build_head("softmax", HeadSpec(d_in=D + 1, embedding=nn.Embedding(V, D)))


# ---------------------------------------------------------------------------------- PLIF

def _plif_case(knots=40, bound=5.0, seed=3):
    gen = torch.Generator().manual_seed(seed)
    w = (W_CENTRE + torch.randn(knots, generator=gen, dtype=torch.float64)).requires_grad_(True)
    return w, bound, 2 * bound / knots


def test_plif_increasing_continuous_and_linear_outside():
    w, bound, delta = _plif_case()
    s = F.softplus(w).detach()
    x = torch.linspace(-3 * bound, 3 * bound, 20001, dtype=torch.float64)
    f = plif_apply(x, w, bound).detach()
    assert (f.diff() > 0).all()
    knots = -bound + delta * torch.arange(1, w.numel(), dtype=torch.float64)
    eps = 1e-9
    jump = plif_apply(knots + eps, w, bound) - plif_apply(knots - eps, w, bound)
    assert jump.abs().max().item() < 1e-7  # continuous: only the slope changes at a knot
    assert abs(plif_apply(torch.tensor([-bound], dtype=torch.float64), w, bound).item()) < 1e-12
    # f(-T) = 0, f(T) = delta * sum(s); beyond the interval the end slopes continue
    top = delta * s.sum()
    outside = torch.tensor([-bound - 2.0, bound + 3.0], dtype=torch.float64)
    expected = torch.stack((-2.0 * s[0], top + 3.0 * s[-1]))
    torch.testing.assert_close(plif_apply(outside, w, bound).detach(), expected)


def test_plif_matches_reference_and_gradients():
    w, bound, _ = _plif_case()
    gen = torch.Generator().manual_seed(4)
    x = (4.0 * torch.randn(3, 2, 25, generator=gen, dtype=torch.float64)).requires_grad_(True)
    torch.testing.assert_close(plif_apply(x, w, bound), plif_reference(x, w, bound))
    torch.testing.assert_close(plif_log_softmax(x, w, bound), torch.log_softmax(plif_reference(x, w, bound), -1))
    assert torch.autograd.gradcheck(lambda a, b: plif_apply(a, b, bound), (x, w))
    assert torch.autograd.gradcheck(lambda a, b: plif_log_softmax(a, b, bound), (x, w))
    # analytic slope gradient against the plain-autograd reference, on inputs in and out of range
    g = torch.randn(x.shape, generator=gen, dtype=torch.float64)
    fused = torch.autograd.grad((plif_log_softmax(x, w, bound) * g).sum(), (x, w))
    plain = torch.autograd.grad((torch.log_softmax(plif_reference(x, w, bound), -1) * g).sum(), (x, w))
    for a, b in zip(fused, plain):
        torch.testing.assert_close(a, b)


def test_plif_float32_blocks_match_float64():
    # many rows: the CPU path splits them into several cache blocks
    w, bound, _ = _plif_case(knots=1000, bound=20.0)
    x = 6.0 * torch.randn(400, 1000, dtype=torch.float64)
    f64 = plif_log_softmax(x, w.detach(), bound)
    f32 = plif_log_softmax(x.float(), w.detach().float(), bound)
    assert (f32.double() - f64).abs().max().item() < 1e-4


def test_plif_init_groups_and_frozen_control():
    torch.manual_seed(7)
    plif, _ = make_head("plif", options={"seed": 11})
    again, _ = make_head("plif", options={"seed": 11})
    other, _ = make_head("plif", options={"seed": 12})
    assert torch.equal(plif.w, again.w) and not torch.equal(plif.w, other.w)
    # w = log(e - 1) + N(0, 1): mean near log(e - 1), sd near 1 (300 draws)
    assert abs(plif.w.mean().item() - W_CENTRE) < 0.25 and abs(plif.w.std().item() - 1.0) < 0.15
    (group,) = plif.extra_param_groups()
    assert group["lr"] == 0.02 and group["params"][0] is plif.w
    frozen, _ = make_head("plif_frozen", options={"seed": 11})
    assert not frozen.w.requires_grad and frozen.extra_param_groups() == []
    assert torch.equal(frozen.w, plif.w)
    trainable = lambda m: sum(p.numel() for p in m.parameters() if p.requires_grad)  # noqa: E731
    assert trainable(plif) - trainable(frozen) == 300
    h = inputs(D, torch.float32).requires_grad_(True)
    frozen(h).sum().backward()
    assert frozen.w.grad is None and h.grad is not None


# ------------------------------------------------------------------------------ mixtures

def test_mos_and_moc_match_probability_space_formulas():
    mos, _ = make_head("mos", torch.float64, {"experts": 3})
    h = inputs(D_IN, torch.float64)
    latent = torch.tanh(mos.latent(h)).view(T, B, 3, D)
    prior = torch.softmax(mos.prior(h), -1)
    comps = torch.softmax(latent @ mos.embedding.weight.t() + mos.bias, -1)    # (T, B, 3, V)
    torch.testing.assert_close(mos(h), torch.log((prior.unsqueeze(-1) * comps).sum(-2)))
    moc, _ = make_head("moc", torch.float64, {"experts": 3})
    moc.load_state_dict(mos.state_dict())
    context = (prior.unsqueeze(-1) * latent).sum(-2)
    torch.testing.assert_close(moc(h), torch.log_softmax(context @ moc.embedding.weight.t() + moc.bias, -1))
    uniform, _ = make_head("mos_uniform", torch.float64, {"experts": 3})
    assert uniform.prior is None
    uniform.load_state_dict({k: v for k, v in mos.state_dict().items() if not k.startswith("prior")})
    torch.testing.assert_close(uniform(h), torch.log(comps.mean(-2)))
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(mos) == count(moc) == count(uniform) + 3 * D_IN


@pytest.mark.parametrize("experts", [1, 2, 3])
def test_target_mixture_matches_the_full_mixture_at_the_targets(experts):
    # the training loss's path: the mixture formed at the target words alone, against autograd
    # through the plain formula gathered at the targets, and against finite differences
    gen = torch.Generator().manual_seed(10 + experts)
    logits = (4 * torch.randn(T, B, experts, V, generator=gen, dtype=torch.float64)).requires_grad_()
    log_prior = torch.log_softmax(torch.randn(T, B, experts, generator=gen, dtype=torch.float64), -1)
    log_prior.requires_grad_()
    targets = torch.randint(0, V, (T, B), generator=gen)
    weights = torch.randn(T, B, generator=gen, dtype=torch.float64)
    plain = mixture_log_probs(logits, log_prior).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    picked = mixture_target_log_probs(logits, log_prior, targets)
    torch.testing.assert_close(picked, plain, rtol=0, atol=1e-12)
    for a, b in zip(torch.autograd.grad((picked * weights).sum(), (logits, log_prior)),
                    torch.autograd.grad((plain * weights).sum(), (logits, log_prior))):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    small = (logits[:2, :1].detach().clone().requires_grad_(), log_prior[:2, :1].detach().clone().requires_grad_())
    assert torch.autograd.gradcheck(lambda l, p: mixture_target_log_probs(l, p, targets[:2, :1]), small)


def test_target_mixture_mixes_half_precision_in_float32():
    gen = torch.Generator().manual_seed(3)
    logits = (4 * torch.randn(T, B, 2, V, generator=gen)).to(torch.bfloat16).requires_grad_()
    log_prior = torch.log_softmax(torch.randn(T, B, 2, generator=gen), -1).requires_grad_()
    targets = torch.randint(0, V, (T, B), generator=gen)
    picked = mixture_target_log_probs(logits, log_prior, targets)
    exact = mixture_log_probs(logits.double(), log_prior.double()).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    assert picked.dtype == torch.float32
    torch.testing.assert_close(picked.double(), exact, rtol=0, atol=1e-5)   # bf16 itself would be ~1e-2
    grad_logits, grad_prior = torch.autograd.grad(picked.sum(), (logits, log_prior))
    assert grad_logits.dtype == torch.bfloat16 and grad_prior.dtype == torch.float32


@pytest.mark.parametrize("name", sorted(HEADS))
def test_training_loss_is_the_full_log_p_read_at_the_targets(name):
    # every head's training loss (its target_log_probs shortcut where it has one, mean_nll
    # reading either) equals the NLL of its full log-P; MoC must not inherit MoS's mixture
    head, d_in = make_head(name, torch.float64, options={"dropoutl": 0.0} if name.startswith("mos") or name == "moc" else None)
    head.train()
    h = inputs(d_in, torch.float64)
    targets = torch.randint(0, V, (T, B), generator=torch.Generator().manual_seed(5))
    picked = head.target_log_probs(h, targets)
    assert (picked is not None) == (name in ("mos", "mos_uniform"))
    full = head(h)
    expected = F.nll_loss(full.reshape(-1, V), targets.reshape(-1))
    torch.testing.assert_close(mean_nll(full if picked is None else picked, targets), expected, rtol=0, atol=1e-12)


def test_locked_dropout_shares_mask_over_time():
    torch.manual_seed(0)
    x = torch.ones(6, 4, 50)
    y = locked_dropout(x, 0.5, True)
    assert torch.equal(y, y[:1].expand_as(y))
    assert set(torch.unique(y).tolist()) <= {0.0, 2.0}
    assert torch.equal(locked_dropout(x, 0.5, False), x)


def test_sigmoid_tree_is_a_distribution():
    pre = 3 * torch.randn(7, 3, dtype=torch.float64)
    pi = sigmoid_tree(pre)
    assert pi.shape == (7, 4) and (pi > 0).all()
    torch.testing.assert_close(pi.sum(-1), torch.ones(7, dtype=torch.float64))
    torch.testing.assert_close(sigmoid_tree(pre.t(), dim=0), pi.t())


def test_mixtape_matches_per_word_gating():
    head, _ = make_head("mixtape", torch.float64, {"frequent_token_fraction": 0.25})
    nf = head.n_frequent
    assert nf == 15
    h = inputs(D_IN, torch.float64)
    ctx = torch.tanh(head.context(h)).view(T, B, 4, D)
    z = ctx @ head.embedding.weight.t()                                     # (T, B, 4, V)
    gate_tanh = torch.tanh(head.gate_proj(h)).view(T, B, 3, -1)
    shared = head.gate_shared(h)                                            # (T, B, 3)
    logits = torch.empty(T, B, V, dtype=torch.float64)
    for x in range(V):  # the paper's per-word definition, no shortcut
        if x < nf:
            pre = (gate_tanh * head.gate_vocab[x]).sum(-1) + shared + head.gate_bias[x]
        else:
            pre = shared
        g1, g2, g3 = torch.sigmoid(pre).unbind(-1)
        pi = torch.stack((g1 * g2, g1 * (1 - g2), (1 - g1) * g3, (1 - g1) * (1 - g3)), -1)
        logits[..., x] = (pi * z[..., x]).sum(-1) + head.bias[x]
    torch.testing.assert_close(head(h), torch.log_softmax(logits, -1))


def test_mixtape_requires_four_experts():
    with pytest.raises(AuditError, match="experts"):
        make_head("mixtape", options={"experts": 5})


# ---------------------------------------------------------------------------------- rank

def _log_p_rank(name, options=None, rows=200, scale=2.0):
    head, d_in = make_head(name, torch.float64, options)
    with torch.no_grad():
        head.bias.normal_()  # a trained bias: at its zero init it adds nothing to the rank
        logp = head(inputs(d_in, torch.float64, scale=scale, rows=(rows, 1))).squeeze(1).numpy()
    sv = np.linalg.svd(logp, compute_uv=False)
    return press_rank(sv, *logp.shape)


def test_press_rank_of_log_p():
    assert _log_p_rank("softmax") == D + 2
    assert _log_p_rank("moc", {"experts": 4}) <= D + 2
    assert _log_p_rank("mos", {"experts": 4}) > D + 2
    assert _log_p_rank("sigsoftmax") > D + 2
    assert _log_p_rank("gss", {"c": -1.5, "k": 2.5}) > D + 2
    assert _log_p_rank("mixtape") > D + 2


def test_every_registered_head_builds_with_defaults():
    for name in HEADS:
        head = build_head(name, HeadSpec(d_in=D_IN if HEADS[name].projects_input else D,
                                         embedding=nn.Embedding(V, D), options=SMALL.get(name, {})))
        assert head.name == name
    assert issubclass(HEADS["softmax_matched"], HEADS["softmax"])
