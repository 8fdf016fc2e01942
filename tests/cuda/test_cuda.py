"""The CUDA path against the CPU path: heads, training steps, PLIF's atomics, the spectrum.

On a real GPU these compare CUDA with the CPU. Tolerances are float32's: cuBLAS and the CPU BLAS
sum in different orders (TF32 is off: ``train.precision: fp32`` sets torch's matmul and cuDNN
RNN ``fp32_precision`` to "ieee", asserted here), so values agree to a few ulps of the quantities
summed, not bitwise. Without a GPU they run on the simulated CUDA device
(tests/support/fake_cuda.py): the device path is exercised (transfers, deep copies, module
``.to``, the device spectrum) and every op must keep to one device, but the numbers are the CPU's,
so the comparisons then say nothing about CUDA rounding (docs/gpus.md, "Still owed").
AUDIT_CUDA_TEST_DEVICE=cpu runs them CPU against CPU.
"""

import copy
import os

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from audit.train.precision import apply_precision
from audit.model.heads import HEADS, HeadSpec, build_head
from support.fake_cuda import simulated_cuda

DEVICE = os.environ.get("AUDIT_CUDA_TEST_DEVICE", "cuda")
SIMULATED = DEVICE == "cuda" and not torch.cuda.is_available()
# |log p_cuda - log p_cpu| <= LOGP_ATOL + LOGP_RTOL * |log p_cpu|: a V = 1000 log-sum-exp over
# float32 logits of size ~10 carries ~1e-6 rounding; 50x margin for the heads' extra terms
LOGP_ATOL, LOGP_RTOL = 5e-5, 1e-5
LOSS_RTOL = 1e-4          # training loss after each of 5 SGD steps (lr 1, clip 0.25)
PLIF_SPREAD = 1e-4        # max |g1 - g2| / max |g| of PLIF's slope gradient, run to run
OPTIONS = {"gss": {"c": -1.5, "k": 2.5}, "plif": {"knots": 1000}, "plif_frozen": {"knots": 1000},
           "mos": {"experts": 3, "dropoutl": 0.0}, "moc": {"experts": 3, "dropoutl": 0.0},
           "mos_uniform": {"experts": 3, "dropoutl": 0.0}, "mixtape": {"gate_embedding_size": 8}}


@pytest.fixture(autouse=True)
def device():
    """fp32 flags set the new way (torch refuses the legacy ``allow_tf32`` after that); without a
    GPU the test body runs on the simulated device, which must see no op mixing devices."""
    flags = torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.rnn.fp32_precision
    apply_precision("fp32")
    # TF32 would loosen every tolerance here
    assert torch.backends.cuda.matmul.fp32_precision == torch.backends.cudnn.rnn.fp32_precision == "ieee"
    try:
        if SIMULATED:
            with simulated_cuda() as sim:
                yield
            assert sim.record.ops > 0 and not sim.record.mixed, (sim.record.ops, sim.record.mixed)  # it ran there
        else:
            yield
    finally:
        torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.rnn.fp32_precision = flags


def _head(name, d=32, V=1000, seed=0):
    torch.manual_seed(seed)
    emb = nn.Embedding(V, d)
    head = build_head(name, HeadSpec(d_in=d, embedding=emb, options=OPTIONS.get(name, {})))
    return head.eval()


@pytest.mark.parametrize("name", sorted(set(HEADS) - {"softmax_matched"}))  # = softmax, sized by the config
def test_head_log_probs_on_cuda_equal_the_cpu(name):
    head = _head(name)
    h = torch.randn(7, 5, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        cpu = head(h)
        gpu = copy.deepcopy(head).to(DEVICE)(h.to(DEVICE)).cpu()
    assert cpu.shape == gpu.shape == (7, 5, 1000)
    assert torch.isfinite(gpu).all()
    torch.testing.assert_close(gpu, cpu, atol=LOGP_ATOL, rtol=LOGP_RTOL)


def _train_losses(device, steps=5):
    from audit.model.language_model import LanguageModel, ModelConfig

    torch.manual_seed(0)
    # dropout off: CPU and CUDA draw different random masks from the same seed
    cfg = ModelConfig.of(vocab_size=500, emb_size=16, hidden_size=32, n_layers=2, dropoute=0, dropouti=0,
                      dropouth=0, dropout=0, wdrop=0)
    model = LanguageModel(cfg).to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    data = torch.randint(0, 500, (steps * 10 + 1, 4), generator=torch.Generator().manual_seed(2)).to(device)
    losses = []
    for _ in range(steps):  # one batch again and again, from a fresh state: the loss must fall
        words, targets = data[:10], data[1:11]
        log_probs, _, _, _ = model(words, model.init_hidden(4))
        loss = F.nll_loss(log_probs.reshape(-1, 500), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        losses.append(loss.item())
    return losses


def test_a_few_training_steps_on_cuda_give_the_cpu_losses():
    cpu, gpu = _train_losses("cpu"), _train_losses(DEVICE)
    np.testing.assert_allclose(gpu, cpu, rtol=LOSS_RTOL)
    assert cpu[-1] < cpu[0]  # it did train


def test_plif_scatter_add_spread_run_to_run_is_bounded():
    """PLIF's slope gradient is a bincount with weights: on CUDA atomic adds in no fixed order."""
    head = _head("plif", V=2000).train().to(DEVICE)
    h = torch.randn(20, 10, 32, generator=torch.Generator().manual_seed(3)).to(DEVICE)
    targets = torch.randint(0, 2000, (200,), generator=torch.Generator().manual_seed(4)).to(DEVICE)
    slopes = [head.w]   # the K raw slopes, whose gradient is the bincount
    grads = []
    for _ in range(5):
        head.zero_grad(set_to_none=True)
        F.nll_loss(head(h).reshape(-1, 2000), targets).backward()
        grads.append(torch.cat([p.grad.flatten() for p in slopes]).double().cpu())
    scale = grads[0].abs().max().item()
    spread = max((g - grads[0]).abs().max().item() for g in grads[1:]) / scale
    print(f"PLIF slope-gradient spread over 5 runs on {DEVICE}: {spread:.3g} of max |g| = {scale:.3g}")
    assert scale > 0 and spread <= PLIF_SPREAD


@pytest.mark.parametrize("name", ["softmax", "sigsoftmax"])
def test_cuda_spectrum_gives_the_cpu_press_rank(name):
    from audit.evaluate import spectrum

    head = _head(name, d=16, V=300)
    h = torch.randn(1200, 16, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        log_p = head(h.unsqueeze(0)).squeeze(0)   # (1200, 300) float32
    chunks = list(log_p.split(200))
    cpu = spectrum.singular_values([c.numpy() for c in chunks])
    gpu = spectrum.singular_values([c.to(DEVICE) for c in chunks])
    m, n = log_p.shape
    assert spectrum.press_rank(gpu, m, n) == spectrum.press_rank(cpu, m, n)
    # softmax: log-P = W h + b - lse, rank <= d + 2; sigsoftmax breaks that bound
    assert (spectrum.press_rank(cpu, m, n) <= 16 + 2) == (name == "softmax")
