"""Learnable piecewise-linear increasing function (PLIF) of Ganea et al. (2019).

The function lives on K uniform knots over [-T, T] (spacing delta = 2T/K) with positive slopes
s = softplus(w). With the bucket index i = clamp(floor((x + T) / delta), 0, K - 1) and the
offset r = (x + T) / delta - i (in units of delta), it is

    f(x) = delta * (s_i * r + sum_{j < i} s_j),

which is continuous, increasing, zero at -T, and extended linearly beyond the interval (the
clamp keeps the first/last slope while r leaves [0, 1]).

Why a custom autograd function: the obvious autograd version keeps an int64 index and several
gathered float tensors of the full logit size (N x V) alive, runs a scatter per gather in the
backward, and on the CPU every one of those tensors is a round trip through DRAM (casting
float to int64 is moreover a slow non-vectorised path there). Here forward and backward run
row block by row block (``audit.model.kernels.blocked``): the int32 bucket index and the offset live only
per block in cache, one gather per element fetches the knot value and the slope together, the
forward can apply the log_softmax in the same pass, and the saved tensors are the output, the
gathered slope (df/dx) and, when the slopes are trained, the input (three N x V tensors where
softmax keeps one). The slope gradient is scattered into the K-vector with bincount, which
sums in a fixed order on the CPU, so CPU runs stay bitwise reproducible; on CUDA it is an
``index_add_`` (atomics, as in the reference, and no host read of the index's range). No N x V x K tensor exists at any point.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from audit.model.kernels.blocked import BLOCK_ELEMENTS, row_blocks

# softplus(W_CENTRE) == 1: the initial slopes scatter around the identity's slope
W_CENTRE = math.log(math.e - 1.0)


def plif_init(knots: int, w_scale: float, seed: int, dtype=torch.float32) -> torch.Tensor:
    """Initial raw slopes w = log(e - 1) + w_scale * N(0, 1), drawn from their own generator.

    Args:
        knots: number of pieces K.
        w_scale: standard deviation of the noise (the reference calls it a "variance").
        seed: seed of the private generator, so the draw does not shift the global RNG stream.
        dtype: floating dtype of the result.

    Returns:
        Tensor of shape (K,).
    """
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    noise = torch.randn(knots, generator=gen, dtype=torch.float64)
    return (W_CENTRE + w_scale * noise).to(dtype)


def _block_elements(knots: int) -> int:
    """Block size for the PLIF loops: each block's two bincounts also zero and add K-vectors,
    so blocks of several K elements keep that overhead small (and still fit in the L3)."""
    return max(BLOCK_ELEMENTS, 4 * knots)


def _bucket(xb: torch.Tensor, bound: float, delta: float, knots: int):
    """Bucket index (int32) and offset r in units of delta of a block of inputs."""
    # u = (x + T) / delta in one pass; after the clamp to [0, K - 1] truncation is floor, and
    # int32 conversion is vectorised on the CPU (int64 is not)
    # new_full, not new_tensor: a fill on the device instead of a blocking host-to-device copy
    u = torch.add(xb.new_full((), bound / delta), xb, alpha=1.0 / delta)
    idx = u.clamp(0, knots - 1).to(torch.int32)
    return idx, u.sub_(idx)  # r leaves [0, 1] outside [-T, T]: linear extension


class _PiecewiseLinear(torch.autograd.Function):
    """f(x), or log_softmax(f(x)) over the last axis, with gradients for x and the slopes."""

    @staticmethod
    def forward(ctx, x, slopes, bound, normalise):
        knots = slopes.shape[0]
        delta = 2.0 * bound / knots
        # per bucket i: (f at knot i, slope) = (delta * sum_{j<i} s_j, s_i), packed as one
        # complex number so that a single gather fetches both (float32 -> complex64)
        prefix = (torch.cumsum(slopes, 0) - slopes).mul_(delta)
        table = torch.view_as_complex(torch.stack((prefix, slopes), dim=1))
        x2 = x.reshape(-1, x.shape[-1])
        out = torch.empty_like(x2)
        # the gathered slope is df/dx: keeping it costs one tensor but saves the backward a
        # second gather, the most expensive step after the matrix products on the CPU
        slope_at = torch.empty_like(x2) if ctx.needs_input_grad[0] else None
        for rows in row_blocks(x2, _block_elements(knots)):
            idx, r = _bucket(x2[rows], bound, delta, knots)
            pair = torch.view_as_real(table.index_select(0, idx.view(-1))).view(*r.shape, 2)
            f = torch.addcmul(pair[..., 0], pair[..., 1], r, value=delta)
            if slope_at is not None:
                slope_at[rows] = pair[..., 1]
            if normalise:
                torch._log_softmax(f, -1, False, out=out[rows])
            else:
                out[rows] = f
        # x only when the slopes need a gradient: the backward rebuilds the buckets from it
        ctx.save_for_backward(x if ctx.needs_input_grad[1] else None, slopes, out, slope_at)
        ctx.bound, ctx.delta, ctx.normalise = bound, delta, normalise
        return out.view_as(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, slopes, out, slope_at = ctx.saved_tensors
        knots, delta = slopes.shape[0], ctx.delta
        want_x, want_s = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        g2 = grad.reshape(out.shape)
        grad_x = torch.empty_like(out) if want_x else None
        own = slopes.new_zeros(knots)   # sum over inputs in bucket j of grad * r
        hits = slopes.new_zeros(knots)  # sum over inputs in bucket j of grad
        for rows in row_blocks(out, _block_elements(knots)):
            gb = g2[rows]
            if ctx.normalise:
                gb = torch._log_softmax_backward_data(gb, out[rows], -1, out.dtype)
            if want_x:  # df/dx = s_i: the index is piecewise constant in x
                torch.mul(gb, slope_at[rows], out=grad_x[rows])
            if want_s:
                idx, r = _bucket(x.reshape(out.shape)[rows], ctx.bound, delta, knots)
                flat = idx.view(-1)
                if x.is_cuda:  # CUDA bincount reads the index's min and max back (two syncs)
                    own.index_add_(0, flat, r.mul_(gb).view(-1))
                    hits.index_add_(0, flat, gb.reshape(-1))
                else:  # bincount: faster than index_add_ here, same fixed summation order
                    own += torch.bincount(flat, weights=r.mul_(gb).view(-1), minlength=knots)
                    hits += torch.bincount(flat, weights=gb.reshape(-1), minlength=knots)
        grad_s = None
        if want_s:  # df/ds_j = delta r in its own bucket and delta in every later bucket
            grad_s = (own + hits.flip(0).cumsum(0).flip(0) - hits).mul_(delta)
        return (grad_x.view(grad.shape) if want_x else None), grad_s, None, None


def plif_apply(x: torch.Tensor, w: torch.Tensor, bound: float) -> torch.Tensor:
    """Apply the PLIF with raw slopes ``w`` element-wise.

    Args:
        x: input of any shape (the logits, e.g. (T, B, V)).
        w: raw slopes, shape (K,); the slopes are softplus(w).
        bound: T, the grid covers [-T, T].

    Returns:
        f(x), same shape and dtype as x.
    """
    slopes = F.softplus(w).to(x.dtype)
    return _PiecewiseLinear.apply(x.contiguous(), slopes, float(bound), False)


def plif_log_softmax(x: torch.Tensor, w: torch.Tensor, bound: float) -> torch.Tensor:
    """log_softmax(f(x)) over the last axis, fused (no f tensor of the full size is stored).

    Args and shapes as ``plif_apply``.
    """
    slopes = F.softplus(w).to(x.dtype)
    return _PiecewiseLinear.apply(x.contiguous(), slopes, float(bound), True)


def plif_reference(x: torch.Tensor, w: torch.Tensor, bound: float) -> torch.Tensor:
    """Plain-autograd PLIF (int64 index, two gathers), used by tests to check ``plif_apply``."""
    slopes = F.softplus(w).to(x.dtype)
    knots = slopes.shape[0]
    delta = 2.0 * bound / knots
    idx = torch.floor((x.detach() + bound) / delta).clamp(0, knots - 1).long()
    knot = -bound + idx.to(x.dtype) * delta
    prefix = delta * (torch.cumsum(slopes, 0) - slopes)
    return slopes[idx] * (x - knot) + prefix[idx]
