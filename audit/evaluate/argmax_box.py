"""The input box of the argmax tests: every input the body can produce lies in it.

A box is [lo_1, hi_1] x ... x [lo_d, hi_d], given as a half-width a (the scalar box [-a, a]^d,
``half`` kept so that the exact tiers run the formulas written for it) or as per-coordinate
bounds (lo, hi); ``audit.evaluate.argmax`` (exact tiers) and ``audit.evaluate.argmax_search``
(witness search) read it, and eval.json records it (``describe``). Its own module so that the
tiers and their LP stay within a module each; ``audit.evaluate.argmax.Box`` is the same class.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit.errors import AuditError


@dataclass(frozen=True)
class Box:
    """The input box [lo_1, hi_1] x ... x [lo_d, hi_d]; ``half`` is a when the box was given as
    the half-width of [-a, a]^d (the scalar formulas then run, see the module docstring)."""

    lo: np.ndarray
    hi: np.ndarray
    half: float | None = None

    @classmethod
    def of(cls, box, d: int) -> "Box":
        """The box of a half-width a (float: [-a, a]^d), a pair (lo, hi) of length-d bounds, or a
        ``Box``; a bad one is a one-line error naming it."""
        if isinstance(box, Box):
            if box.lo.shape != (d,):
                raise AuditError(f"argmax box: {box.lo.size} coordinates for inputs of size {d}")
            return box
        if box is None or isinstance(box, (str, bytes)):
            raise AuditError(f"argmax box must be a half-width or a pair (lo, hi), got {box!r}")
        if np.isscalar(box) or (isinstance(box, np.ndarray) and box.ndim == 0):
            try:
                half = float(box)
            except (TypeError, ValueError):
                raise AuditError(f"argmax box must be a half-width or a pair (lo, hi), got {box!r}") from None
            if not (np.isfinite(half) and half > 0):
                raise AuditError(f"argmax box: half-width must be finite and > 0, got {box!r}")
            return cls(np.full(d, -half), np.full(d, half), half)
        try:
            lo, hi = (np.asarray(v, dtype=np.float64).reshape(-1) for v in box)
        except (TypeError, ValueError):
            raise AuditError(f"argmax box must be a half-width or a pair (lo, hi), got {type(box).__name__}") from None
        if lo.shape != (d,) or hi.shape != (d,):
            raise AuditError(f"argmax box: lo and hi need {d} coordinates, got {lo.size} and {hi.size}")
        if not (np.isfinite(lo).all() and np.isfinite(hi).all() and (lo <= hi).all()):
            raise AuditError("argmax box: lo and hi must be finite with lo <= hi in every coordinate")
        return cls(lo, hi)

    @property
    def centre(self) -> np.ndarray:
        return (self.lo + self.hi) / 2

    @property
    def radius(self) -> np.ndarray:
        """Half-widths, (d,)."""
        return (self.hi - self.lo) / 2

    def clip(self, x: np.ndarray) -> np.ndarray:
        return np.clip(x, self.lo, self.hi)

    def describe(self):
        """eval.json's ``argmax_box``: the half-width, or {"lo": [...], "hi": [...]}."""
        return self.half if self.half is not None else {"lo": self.lo.tolist(), "hi": self.hi.tolist()}
