"""Singular values of a tall matrix streamed in row blocks, and the ranks read from them.

The reference code stacks the whole log-P matrix (contexts x vocabulary) in float32 and calls a
single-precision LAPACK SVD: 3.3 GB plus workspace for PTB, and WikiText-2 had to be cut short.
Here the matrix is never held. For an m x n stack with m > n the singular values are the square
roots of the eigenvalues of the n x n Gram matrix A^T A, which is accumulated block by block in
float64 (on the chunk's GPU when the chunks are CUDA tensors) and handed to a symmetric
eigensolver. Squaring the matrix squares its condition number, which is why the Gram is float64:
singular values down to about sqrt(eps64) ~ 1e-8 of the largest stay resolved, three orders of
magnitude below the float32 Press tolerance (~1.8e-5 of the largest for PTB).

When the stream is short (m <= n) the n x n Gram would be wasteful (2,000 x 10,000 would need a
10,000^2 eigensolve), so rows are buffered while m <= n and, if the stream ends there, the m x m
row Gram A A^T is used instead; both have the same nonzero eigenvalues.

Bounded (issue 49): one pass over a finite stream (each block loop of ``add`` takes at least one
row a turn), then one symmetric eigensolve. That solve (LAPACK's divide and conquer, syevd, in
SciPy or torch) iterates only inside LAPACK, whose QL/QR sweeps and secular-equation solves stop
at LAPACK's own caps (30 n sweeps, 30 steps a root) and report a failure, which SciPy and torch
raise (LinAlgError): never a loop here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from scipy.linalg import blas

from audit.errors import AuditError
from audit.evaluate.ranks import EPSILONS, erank_key

# rows per float64 block handed to BLAS: bounds the buffered rows at ~512 MB whatever the caller's
# chunk size, while keeping the rank-k update k large enough to run at full matmul speed
_BLOCK_BYTES = 1 << 29


@dataclass
class Spectrum:
    """Singular values of an m x n matrix, descending, float64 (length min(m, n))."""

    sv: np.ndarray
    m: int
    n: int


def _is_torch(chunk) -> bool:
    """A torch tensor, subclasses included (checked by module so torch need not be imported)."""
    return any(c.__module__.startswith("torch") for c in type(chunk).__mro__)


def _is_cuda_tensor(chunk) -> bool:
    return _is_torch(chunk) and getattr(chunk, "is_cuda", False)


def _as_numpy(chunk) -> np.ndarray:
    """A CPU chunk (numpy array or CPU torch tensor) as a numpy array, without copying if possible."""
    if type(chunk).__module__.startswith("torch"):
        chunk = chunk.detach().cpu().numpy()
    return np.asarray(chunk)


class _CpuGram:
    """Upper triangle of the float64 column Gram, as panel tiles updated in place by BLAS.

    Rows are buffered (in float64, split into column panels) until ``rows_per_block`` of them
    are there, then every upper tile (i <= j) gets X_i^T X_j: dsyrk on the diagonal tiles, dgemm
    off it. Why tiles and not one dsyrk on the whole n x n matrix: (a) OpenBLAS's threaded dsyrk
    crashes (SIGSEGV) for n above ~21,000 (measured here with scipy's OpenBLAS 0.3.30 at
    n = 23,000 and 33,278; fine single-threaded and at n <= 20,000; cf. OpenBLAS issue #2821),
    and WikiText-2 has n = 33,278; (b) only the upper tiles are stored, half the n x n matrix
    until the eigensolve. Why buffer: a model streams small blocks (bptt x batch rows) and a
    rank-k update with small k only moves memory.
    """

    PANEL = 8192  # columns per tile: BLAS calls stay far below the crashing size

    def __init__(self, n: int):
        self.n = n
        self.bounds = [(a, min(a + self.PANEL, n)) for a in range(0, n, self.PANEL)]
        # F order so that BLAS updates each tile in place (f2py copies anything else)
        self.tiles = {(i, j): np.zeros((bi[1] - bi[0], bj[1] - bj[0]), dtype=np.float64, order="F")
                      for i, bi in enumerate(self.bounds) for j, bj in enumerate(self.bounds) if i <= j}
        # ~512 MB of buffered rows at most, at least 256 rows (k of the rank-k updates)
        self.rows_per_block = int(np.clip(_BLOCK_BYTES // (8 * n), 256, 4096))
        self.panels = [np.empty((self.rows_per_block, b - a), dtype=np.float64) for a, b in self.bounds]
        self.filled = 0

    def add(self, chunk) -> None:
        x = _as_numpy(chunk)
        start = 0
        while start < x.shape[0]:
            take = min(self.rows_per_block - self.filled, x.shape[0] - start)
            for panel, (a, b) in zip(self.panels, self.bounds):
                panel[self.filled:self.filled + take] = x[start:start + take, a:b]
            self.filled += take
            start += take
            if self.filled == self.rows_per_block:
                self._flush()

    def _flush(self) -> None:
        k = self.filled
        if k == 0:
            return
        # panel[:k] is C-contiguous, so its transpose is the F-contiguous p x k operand BLAS wants
        cols = [panel[:k].T for panel in self.panels]
        for (i, j), tile in self.tiles.items():
            if i == j:
                self.tiles[i, j] = blas.dsyrk(1.0, cols[i], beta=1.0, c=tile, trans=0, lower=0, overwrite_c=1)
            else:  # X_i^T X_j = cols[i] @ cols[j]^T
                self.tiles[i, j] = blas.dgemm(1.0, cols[i], cols[j], beta=1.0, c=tile, trans_b=1,
                                              overwrite_c=1)
        self.filled = 0

    def eigenvalues(self) -> np.ndarray:
        self._flush()
        self.panels = []
        diagonal = np.concatenate([np.diag(self.tiles[i, i]) for i in range(len(self.bounds))])
        _check_finite(diagonal)
        gram = np.zeros((self.n, self.n), dtype=np.float64, order="F")
        for (i, j) in list(self.tiles):  # move tile by tile: the peak is the n x n matrix plus one tile
            (a, b), (c, d) = self.bounds[i], self.bounds[j]
            gram[a:b, c:d] = self.tiles.pop((i, j))
        # only the upper triangle is filled and read; LAPACK may overwrite it (no 2nd n x n copy)
        return scipy.linalg.eigh(gram, lower=False, eigvals_only=True, overwrite_a=True,
                                 check_finite=False, driver="evd")


class _TorchGram:
    """Float64 column Gram on the chunks' CUDA device, updated in place with addmm_."""

    def __init__(self, n: int, device):
        import torch

        self.torch = torch
        self.device = device
        self.gram = torch.zeros((n, n), dtype=torch.float64, device=device)
        self.rows_per_block = max(1, _BLOCK_BYTES // (8 * n))
        self.buffer = torch.empty((self.rows_per_block, n), dtype=torch.float64, device=device)
        self.filled = 0

    def add(self, chunk) -> None:
        torch = self.torch
        if not _is_torch(chunk):
            chunk = torch.from_numpy(np.asarray(chunk))
        x = chunk.detach().to(self.device)
        # rows gather in one float64 buffer: one large addmm_ per rows_per_block rows instead of
        # a small one per evaluation chunk (a chunk is bptt = 70 rows)
        while x.shape[0]:
            take = min(x.shape[0], self.rows_per_block - self.filled)
            self.buffer[self.filled:self.filled + take].copy_(x[:take])
            self.filled += take
            x = x[take:]
            if self.filled == self.rows_per_block:
                self._flush()

    def _flush(self) -> None:
        block = self.buffer[:self.filled]
        self.gram.addmm_(block.T, block)
        self.filled = 0

    def eigenvalues(self) -> np.ndarray:
        if self.filled:
            self._flush()
        self.buffer = None
        _check_finite(self.gram.diagonal().cpu().numpy())
        return self.torch.linalg.eigvalsh(self.gram).cpu().numpy()


def _check_finite(diagonal: np.ndarray) -> None:
    # a NaN or inf anywhere in column j makes the sum of squares G[j, j] non-finite, so checking
    # the diagonal once is as good as checking every chunk
    if not np.all(np.isfinite(diagonal)):
        bad = int(np.flatnonzero(~np.isfinite(diagonal))[0])
        raise AuditError(f"spectrum: the matrix has non-finite values (first in column {bad})")


def _row_gram_eigenvalues(rows: list) -> np.ndarray:
    """Eigenvalues of A A^T for a short stack A (m <= n) held as a list of row blocks."""
    if any(_is_cuda_tensor(r) for r in rows):
        import torch

        device = next(r.device for r in rows if _is_cuda_tensor(r))
        a = torch.cat([(r if _is_torch(r) else torch.from_numpy(r))
                       .detach().to(device, torch.float64) for r in rows])
        _check_finite((a * a).sum(dim=0).cpu().numpy())
        return torch.linalg.eigvalsh(a @ a.T).cpu().numpy()
    a = np.concatenate([_as_numpy(r).astype(np.float64) for r in rows])
    _check_finite(np.einsum("ij,ij->j", a, a))
    return scipy.linalg.eigh(a @ a.T, eigvals_only=True, overwrite_a=True, check_finite=False,
                             driver="evd")


def stream_spectrum(chunks: Iterable) -> Spectrum:
    """Singular values of the vertical stack of ``chunks``, never holding the whole matrix.

    Args:
        chunks: iterable of 2-D float row blocks (numpy arrays or torch tensors, CPU or CUDA),
            each of shape (rows_i, n) with the same n. Blocks with zero rows are skipped.

    Returns:
        ``Spectrum(sv, m, n)``: sv of shape (min(m, n),), float64, descending, non-negative;
        m = total number of rows.

    Raises:
        AuditError: no rows at all, a block that is not 2-D or has a different number of
            columns, or non-finite values.
    """
    n = None
    m = 0
    buffered: list = []   # row blocks kept while m <= n
    gram = None           # _CpuGram or _TorchGram once m > n
    for index, chunk in enumerate(chunks):
        shape = tuple(chunk.shape)
        if len(shape) != 2:
            raise AuditError(f"spectrum: chunk {index} has shape {shape}, expected 2-D rows x columns")
        if n is None:
            n = shape[1]
            if n == 0:
                raise AuditError("spectrum: chunk 0 has zero columns")
        elif shape[1] != n:
            raise AuditError(f"spectrum: chunk {index} has {shape[1]} columns, expected {n}")
        if shape[0] == 0:
            continue
        m += shape[0]
        if gram is None:
            # copy: a producer may refill the same buffer for its next block
            buffered.append(chunk.detach().clone() if _is_torch(chunk)
                            else np.array(chunk, copy=True))
            if m > n:  # tall from now on: the n x n Gram is the smaller problem
                first = next((c for c in buffered if _is_cuda_tensor(c)), None)
                gram = _TorchGram(n, first.device) if first is not None else _CpuGram(n)
                for block in buffered:
                    gram.add(block)
                buffered = []
        else:
            gram.add(chunk)
    if m == 0:
        raise AuditError("spectrum: the stream of row blocks is empty (no rows)")
    eigenvalues = gram.eigenvalues() if gram is not None else _row_gram_eigenvalues(buffered)
    # rounding can leave the eigenvalues of a PSD matrix slightly negative: they are zeros
    sv = np.sqrt(np.clip(np.asarray(eigenvalues, dtype=np.float64), 0.0, None))[::-1]
    return Spectrum(sv=np.ascontiguousarray(sv), m=m, n=n)


def singular_values(chunks: Iterable) -> np.ndarray:
    """Singular values (descending, float64) of the vertical stack of ``chunks``.

    Args:
        chunks: iterable of 2-D float row blocks (rows_i, n); see ``stream_spectrum``.

    Returns:
        Array of shape (min(m, n),).
    """
    return stream_spectrum(chunks).sv


def press_rank(sv, m: int, n: int, eps: float = float(np.finfo(np.float32).eps)) -> int:
    """Numerical Recipes ("Press") rank: singular values strictly above 0.5 sqrt(m+n+1) s_max eps.

    Args:
        sv: singular values, shape (k,), any order.
        m, n: the matrix's dimensions.
        eps: machine epsilon of the precision the matrix is held in (float32 by default, as in
            the papers).

    Returns:
        The rank; 0 for an empty or all-zero spectrum.
    """
    sv = np.asarray(sv, dtype=np.float64)
    if sv.size == 0:
        return 0
    tol = 0.5 * np.sqrt(m + n + 1.0) * sv.max() * eps
    return int(np.count_nonzero(sv > tol))


def epsilon_rank(sv, eps: float) -> int:
    """Smallest k whose top-k singular values hold at least (1 - eps) of the squared total.

    Args:
        sv: singular values, shape (k,), any order (sorted descending here).
        eps: energy left out, in [0, 1).

    Returns:
        k; 0 for an empty or all-zero spectrum.
    """
    if not 0.0 <= eps < 1.0:
        raise AuditError(f"epsilon_rank: eps must lie in [0, 1), got {eps}")
    energy = np.cumsum(np.sort(np.asarray(sv, dtype=np.float64) ** 2)[::-1])
    if energy.size == 0 or energy[-1] == 0.0:
        return 0
    # the total is the last partial sum itself, so eps = 0 gives exactly the number of values
    return int(np.searchsorted(energy, (1.0 - eps) * energy[-1], side="left")) + 1


def entropy_rank(sv) -> float:
    """Roy & Vetterli's effective rank exp(H(p)), p = sv / sum(sv), H in nats.

    Args:
        sv: singular values, shape (k,), non-negative.

    Returns:
        A float in [1, number of nonzero values]; 0.0 for an empty or all-zero spectrum.
    """
    sv = np.asarray(sv, dtype=np.float64)
    total = sv.sum()
    if sv.size == 0 or total == 0.0:
        return 0.0
    p = sv[sv > 0] / total
    return float(np.exp(-np.sum(p * np.log(p))))


def normalised(sv) -> np.ndarray:
    """Singular values divided by the largest (for the decay plot); shape unchanged.

    Args:
        sv: singular values, shape (k,), descending.

    Returns:
        float64 array sv / sv[0]; all zeros when sv[0] is 0.
    """
    sv = np.asarray(sv, dtype=np.float64)
    if sv.size == 0 or sv[0] == 0.0:
        return np.zeros_like(sv)
    return sv / sv[0]


def rank_summary(spec: Spectrum, prefix: str = "") -> dict:
    """Press, entropy and epsilon-effective ranks of one spectrum, keyed
    ``audit.evaluate.ranks.rank_keys(prefix)``: the one place a run and a synthetic fit get them."""
    out = {f"{prefix}press_rank": press_rank(spec.sv, spec.m, spec.n),
           f"{prefix}entropy_rank": entropy_rank(spec.sv)}
    for eps in EPSILONS:
        out[prefix + erank_key(eps)] = epsilon_rank(spec.sv, eps)
    return out
