"""audit/model/matmuls.py (issue 57): the head's matmuls in bfloat16, every other op in float32;
the CPU's float32 emulation equals the native bfloat16 kernel up to the order of the sum; the
``train.precision: bf16_head`` training forward goes through it."""

import math

import pytest
import torch
import torch.nn.functional as F

from audit.model.matmuls import LowPrecisionMatmuls
from audit.train.trainer import Trainer
from helpers import tiny_settings

def _ulp(v: torch.Tensor) -> torch.Tensor:
    """The spacing of bfloat16 numbers at |v| (8 significant bits: 2^(e - 7) for 2^e <= |v| < 2^(e+1))."""
    _, exponent = torch.frexp(v.double().abs().clamp_min(2.0 ** -120))
    return torch.ldexp(torch.ones_like(v, dtype=torch.float64), exponent - 8)


def _linear_case(seed=0, n=64, k=96, m=200):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, k, generator=g, requires_grad=True)
    w = torch.randn(m, k, generator=g, requires_grad=True)
    b = torch.randn(m, generator=g, requires_grad=True)
    return x, w, b


@pytest.mark.parametrize("emulate", [False, True])
def test_a_matmul_is_rounded_to_bf16_and_the_rest_stays_float32(emulate):
    x, w, b = _linear_case()
    with LowPrecisionMatmuls(torch.bfloat16, emulate=emulate):
        logits = F.linear(x, w, b)
        out = torch.log_softmax(logits, -1)
    assert logits.dtype == out.dtype == torch.float32
    # the logits hold bfloat16 values; the normalisation ran in float32 on them, not in bfloat16
    assert torch.equal(logits, logits.to(torch.bfloat16).float())
    assert torch.equal(out, torch.log_softmax(logits.detach(), -1))
    # the exact product of the rounded operands, rounded once: within one ulp (the float32 sum's
    # own error, ~k * 2^-24 of sum |x w|, may tip a value to the neighbouring bfloat16 number)
    def rounded(t):
        return t.detach().to(torch.bfloat16).double()

    exact = F.linear(rounded(x), rounded(w), rounded(b))
    slack = 96 * 2.0 ** -24 * (rounded(x).abs() @ rounded(w).abs().T + rounded(b).abs())
    assert not torch.equal(logits.double(), F.linear(x.double(), w.double(), b.double()))   # it did round
    assert ((logits.double() - exact).abs() <= _ulp(exact) + slack).all()


def test_the_emulation_equals_the_native_bf16_kernel_up_to_the_order_of_the_sum():
    results = {}
    for emulate in (False, True):
        x, w, b = _linear_case(seed=3)
        with LowPrecisionMatmuls(torch.bfloat16, emulate=emulate):
            y = F.linear(x, w, b) @ w            # a chain: the second matmul reads rounded values
        y.square().mean().backward()
        results[emulate] = (y.detach(), x.grad, w.grad, b.grad)
    for native, emulated in zip(results[False], results[True]):
        assert native.dtype == emulated.dtype == torch.float32
        # the two sums differ in their last float32 bits only: nearly every value is the same
        # bfloat16 number, the rest a neighbour (two ulps where the second matmul reads a
        # neighbour of the first's output)
        apart = (native - emulated).abs() / _ulp(torch.maximum(native.abs(), emulated.abs()))
        assert apart.max() <= 2 and (apart == 0).float().mean() > 0.9


def test_the_bf16_head_training_forward_differs_from_fp32_by_rounding_alone(ptb_corpus):
    losses = {}
    for precision in ("fp32", "bf16_head"):
        trainer = Trainer(tiny_settings(head="mos", precision=precision, model={"last_size": 8}),
                          str(ptb_corpus), log=lambda m: None)
        torch.manual_seed(0)
        words, targets = trainer.train_data[:20], trainer.train_data[1:21]
        hidden = trainer.model.init_hidden(trainer.t["batch_size"])
        trainer.model.eval()   # no dropout: the two forwards differ in their precision alone
        losses[precision] = trainer.forward_loss(words, targets, hidden)[0].item()
    assert trainer.head_autocast is torch.bfloat16
    assert losses["fp32"] != losses["bf16_head"]
    assert math.isclose(losses["fp32"], losses["bf16_head"], rel_tol=1e-2)
