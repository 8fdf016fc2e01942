"""Jacobian degeneracy of an output head: singular values of d log p / d h at sampled contexts.

The log-P rank says how many directions the head's outputs span over all contexts; the Jacobian
at one context says how many directions of the head's input still move the output there. A head
can have a high log-P rank while most of its Jacobian's singular values are negligible, i.e. the
extra rank is not usable by the layer below. For the plain softmax the Jacobian has the closed
form (I - 1 p^T) W (V x d), which the tests use as the golden value.

The Jacobian is V x d_in with V >> d_in, so it is computed in forward mode (torch.func.jacfwd:
d_in tangent passes) where the head allows it; heads built on custom autograd Functions (the
fused GSS/PLIF kernels) cannot be traced by function transforms, and for them the V rows come
from batched reverse-mode autograd instead (about V / d_in times the work, same result).

Bounded (issue 49): per context d_in tangent passes (forward) or ceil(V / block) backward passes
(reverse), then one batched SVD per ``SVD_BATCH`` contexts (LAPACK's gesdd, whose QR sweeps stop
at LAPACK's own cap and raise on failure); ``evaluate.jacobian.contexts`` contexts in all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from audit.errors import AuditError

DEFAULT_THRESHOLD = 1e-3  # "degenerate": below this fraction of the context's largest value
SVD_BATCH = 8             # Jacobians per batched SVD (jacobian_singular_values)


@dataclass
class JacobianSpectrum:
    """Jacobian singular values of one head over a sample of contexts.

    Attributes:
        per_context: (k, r) descending singular values for each of k contexts, r = min(V, d_in).
        mean_sv: (r,) mean over contexts of per_context.
        mean_normalised_sv: (r,) mean over contexts of per_context / its largest value.
        threshold: relative threshold used for ``fraction_below``.
        fraction_below: share of all k * r values below threshold * their context's largest.
    """

    per_context: np.ndarray
    mean_sv: np.ndarray
    mean_normalised_sv: np.ndarray
    threshold: float
    fraction_below: float


def sample_contexts(n_contexts: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """A seeded sample of context indices without replacement, sorted ascending.

    Args:
        n_contexts: number of available contexts (rows of h).
        count: how many to draw; all of them when count >= n_contexts.
        rng: the caller's seeded numpy Generator.

    Returns:
        int64 array of shape (min(count, n_contexts),).
    """
    if count < 1 or n_contexts < 1:
        raise AuditError(f"jacobian: need count >= 1 and contexts >= 1, got {count} of {n_contexts}")
    if count >= n_contexts:
        return np.arange(n_contexts, dtype=np.int64)
    return np.sort(rng.choice(n_contexts, size=count, replace=False)).astype(np.int64)


def _flat_h(h: torch.Tensor) -> torch.Tensor:
    if h.dim() == 3:      # (T, B, d_in) as the head sees it
        return h.reshape(-1, h.shape[-1])
    if h.dim() == 2:      # (N, d_in)
        return h
    raise AuditError(f"jacobian: h must be (N, d_in) or (T, B, d_in), got shape {tuple(h.shape)}")


def _forward_mode(head, h_vector):
    def log_probs(vector):
        return head(vector.reshape(1, 1, -1)).reshape(-1)

    # no graph back to the head's parameters: the Jacobian is a measurement, not a loss
    # (function transforms ignore an outer no_grad for the derivative they compute)
    with torch.no_grad():
        return torch.func.jacfwd(log_probs)(h_vector)


def _reverse_mode(head, h_vector, block):
    """Rows of J by plain autograd, ``block`` output rows per backward pass.

    The input is replicated into a batch of ``block`` identical positions; position b's output
    j0 + b is summed into one scalar, so one backward pass yields the gradients of ``block``
    different outputs (each position only sees its own input). Works for any head built from
    autograd Functions, including custom ones without forward-mode or functorch support.
    """
    with torch.no_grad():
        vocab = head(h_vector.reshape(1, 1, -1)).shape[-1]
    rows = []
    for start in range(0, vocab, block):
        count = min(block, vocab - start)
        inputs = h_vector.expand(count, -1).clone().requires_grad_(True)
        with torch.enable_grad():
            out = head(inputs.reshape(count, 1, -1)).reshape(count, vocab)
            # out[b, start + b] for every b: a diagonal view, no index tensors (on a GPU, CPU
            # index tensors would be a host-to-device copy per pass)
            picked = out[:, start:start + count].diagonal().sum()
            # autograd.grad, not backward(): nothing accumulates into the head's .grad
            (grad,) = torch.autograd.grad(picked, inputs)
        rows.append(grad)
    return torch.cat(rows)


def jacobian(head: torch.nn.Module, h_vector: torch.Tensor, mode: str = "auto",
             block: int = 512) -> torch.Tensor:
    """d log p / d h of ``head`` at one input vector.

    Args:
        head: module mapping (T, B, d_in) to log-probs (T, B, V) with positions independent of
            each other; its mode (eval/train) is the caller's choice (use eval: no dropout).
        h_vector: (d_in,) input.
        mode: "forward" (torch.func.jacfwd: d_in tangent passes), "reverse" (batched plain
            autograd, ``block`` outputs per pass), or "auto": the one needing fewer passes
            (``_resolve_mode``), reverse also when function transforms cannot trace the head
            (e.g. the fused GSS/PLIF kernels).
        block: outputs per reverse pass (memory ~ block x V per head intermediate).

    Returns:
        (V, d_in) Jacobian, in the head's dtype.
    """
    h_vector = h_vector.detach()
    if mode == "forward":
        return _forward_mode(head, h_vector)
    if mode == "reverse":
        return _reverse_mode(head, h_vector, block).detach()
    if mode != "auto":
        raise AuditError(f"jacobian: mode must be auto, forward or reverse, got {mode!r}")
    return jacobian(head, h_vector, _resolve_mode(head, h_vector, block), block)


def _resolve_mode(head, h_vector, block: int = 512) -> str:
    """The cheaper exact mode for this head: "reverse" when its ceil(V / block) backward passes
    are no more than forward mode's d_in tangents (every language-model head: V = 10,000,
    d_in = 400 needs 20 passes against 400), else "forward" if function transforms can trace the
    head (tried once), else "reverse". Deciding without a trial matters: the first
    ``torch.func`` call of a process costs about 2.3 CPU-s of start-up, a quarter of a small
    study's evaluate job (measured on the CPU default)."""
    with torch.no_grad():
        vocab = head(h_vector.detach().reshape(1, 1, -1)).shape[-1]
    if -(-vocab // block) <= h_vector.numel():
        return "reverse"
    try:
        _forward_mode(head, h_vector.detach())
    except (RuntimeError, NotImplementedError):
        # custom autograd.Function without jvp/setup_context: functorch refuses it
        return "reverse"
    return "forward"


def jacobian_singular_values(head: torch.nn.Module, h: torch.Tensor, mode: str = "auto"
                             ) -> np.ndarray:
    """Singular values of the head's Jacobian at each given context.

    Args:
        head: the head module (see ``jacobian``).
        h: inputs, (N, d_in) or (T, B, d_in).
        mode: "auto", "forward" or "reverse" (see ``jacobian``); auto is resolved once.

    Returns:
        float64 array (N, min(V, d_in)), each row descending. The SVD runs in float64 so that
        small values are not lost to the float32 of the Jacobian's own rounding.
    """
    rows = _flat_h(h)
    if not len(rows):
        return np.zeros((0, 0))
    if mode == "auto":
        mode = _resolve_mode(head, rows[0])
    # batched SVDs of up to SVD_BATCH Jacobians, kept on the head's device and read back once:
    # on a GPU each SVD call reads its convergence info back (a host sync), so one call per
    # batch, not per context; the batch bounds memory (8 x V x d_in float64: 256 MB at V =
    # 10,000, d_in = 400)
    out = []
    for start in range(0, len(rows), SVD_BATCH):
        batch = torch.stack([jacobian(head, row, mode) for row in rows[start:start + SVD_BATCH]])
        out.append(torch.linalg.svdvals(batch.double()))
    return torch.cat(out).cpu().numpy()


def degeneracy(head: torch.nn.Module, h: torch.Tensor, count: int, rng: np.random.Generator,
               threshold: float = DEFAULT_THRESHOLD, mode: str = "auto") -> JacobianSpectrum:
    """Jacobian spectrum of a head averaged over a seeded sample of contexts.

    Args:
        head: the head module (see ``jacobian``).
        h: inputs of all candidate contexts, (N, d_in) or (T, B, d_in).
        count: number of contexts to sample.
        rng: the caller's seeded numpy Generator.
        threshold: relative threshold in (0, 1).
        mode: "auto", "forward" or "reverse" (see ``jacobian``).

    Returns:
        A ``JacobianSpectrum``.
    """
    if not 0.0 < threshold < 1.0:
        raise AuditError(f"jacobian: threshold must lie in (0, 1), got {threshold}")
    rows = _flat_h(h)
    index = sample_contexts(rows.shape[0], count, rng)
    per_context = jacobian_singular_values(head, rows[torch.from_numpy(index).to(rows.device)],
                                           mode)
    largest = per_context[:, :1]
    normalised = np.divide(per_context, largest, out=np.zeros_like(per_context),
                           where=largest > 0)
    return JacobianSpectrum(
        per_context=per_context,
        mean_sv=per_context.mean(axis=0),
        mean_normalised_sv=normalised.mean(axis=0),
        threshold=float(threshold),
        fraction_below=float(np.mean(normalised < threshold)),
    )
