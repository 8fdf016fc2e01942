"""Group-sequential boundaries: alpha spending, crossing probabilities and nominal levels.

A two-sample comparison is analysed after each stage k = 1..K with n_k seeds per arm. Its
statistic is put on the z-scale, Z_k, whose null joint law is that of a Brownian motion
observed at information fractions t_k = I_k / I_max: Z_k ~ N(theta sqrt(t_k), 1) with
corr(Z_j, Z_k) = sqrt(t_j / t_k). For two arms of n_a, n_b seeds I is proportional to
n_a n_b / (n_a + n_b), so with equal arms t_k = n_k / n_max.

Boundaries c_k come from a Lan-DeMets alpha-spending function f(t) (f(0) = 0, f(1) = alpha):
P0(first crossing at stage k) = f(t_k) - f(t_{k-1}). A two-sided symmetric design of total
level alpha spends the one-sided function at alpha/2 on each side (the convention of gsDesign,
ldbounds and DeMets & Lan 1994, whose K = 5 O'Brien-Fleming-type values 4.88, 3.36, 2.68,
2.29, 2.03 the tests reproduce). The crossing probabilities are computed by the recursive
numerical integration of Armitage, McPherson & Rowe (1969) as laid out in Jennison & Turnbull
(2000, ch. 19): the density of the score S_k = Z_k sqrt(t_k) on the continuation region is
propagated stage by stage with Simpson's rule. The tests check it against Jennison &
Turnbull's published Pocock and O'Brien-Fleming constants and against
``scipy.stats.multivariate_normal``.

Why not a library: no maintained Python package computes spending boundaries (``gsdesign`` on
PyPI is a 0.1 port; R's gsDesign/rpact/ldbounds are not Python); the recursion is ~60 lines.

Small samples: the test at each stage is Welch's t. It is mapped to the design by its p-value
(the "significance level approach" to group-sequential t-tests described by Jennison &
Turnbull 2000): stage k rejects when Welch's two-sided p < the nominal level 2 (1 - Phi(c_k)).
The simulation in ``python -m audit bench sequential`` shows the family-wise error this gives.
The p-values and confidence intervals valid over the looks are in ``repeated``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, stats

from audit.errors import AuditError

SPENDING = ("obf", "pocock", "hsd")
# Hwang-Shih-DeCani's gamma when none is given: 0, linear spending alpha t, that of the default
# design (configs/schema.yaml seeds.gamma; chosen by ``python -m audit bench sequential --compare``)
HSD_GAMMA = 0.0
_GAMMA_MAX = 40.0  # |gamma| beyond this spends (almost) everything at t = 0 or t = 1 (gsDesign's range)
_C_MAX = 12.0  # a z boundary beyond which crossing has probability < 1e-32: "cannot cross"
_NPTS = 401    # minimum Simpson points per stage; raised so the step stays << sqrt(dt)


def stage_sizes(initial: int, step: int, maximum: int) -> list[int]:
    """Planned seeds per arm after each stage: initial, initial + step, ..., capped at maximum.

    >>> stage_sizes(5, 5, 30)
    [5, 10, 15, 20, 25, 30]
    """
    if not (initial >= 2 and step >= 1 and maximum >= initial):
        raise AuditError(f"seeds: need initial >= 2, step >= 1 and max >= initial; got "
                         f"initial={initial}, step={step}, max={maximum}")
    sizes = list(range(initial, maximum, step)) + [maximum]
    return sorted(set(sizes))


def information(n_a, n_b):
    """Statistical information of a difference of means, up to the variance: n_a n_b / (n_a + n_b)."""
    n_a, n_b = np.asarray(n_a, float), np.asarray(n_b, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n_a > 0) & (n_b > 0), n_a * n_b / (n_a + n_b), 0.0)


def spending(t, alpha: float, kind: str = "obf", gamma: float = HSD_GAMMA):
    """Cumulative one-sided alpha spent at information fraction ``t`` (Lan & DeMets 1983).

    ``obf``: 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t)) (O'Brien-Fleming-type, almost nothing early);
    ``pocock``: alpha log(1 + (e - 1) t) (Pocock-type, nearly constant boundaries);
    ``hsd``: alpha (1 - e^{-gamma t}) / (1 - e^{-gamma}) (Hwang, Shih & DeCani 1990), alpha t at
    gamma = 0; gamma = -4 is close to O'Brien-Fleming, gamma = 1 to Pocock, and a larger gamma
    spends more early.

    Args:
        t: scalar or array of fractions; values are clipped to [0, 1].
        alpha: total (one-sided) level, f(1) = alpha.
        gamma: the HSD parameter, in [-40, 40]; ignored by the other kinds.

    Returns:
        f(t), same shape as ``t``.
    """
    t = np.clip(np.asarray(t, float), 0.0, 1.0)
    if kind == "obf":
        with np.errstate(divide="ignore"):
            return np.where(t > 0, 2 * stats.norm.sf(stats.norm.isf(alpha / 2) / np.sqrt(t)), 0.0)
    if kind == "pocock":
        return alpha * np.log1p((math.e - 1) * t)
    if kind == "hsd":
        gamma = check_gamma(gamma)
        if abs(gamma) < 1e-9:  # the limit of the ratio below; expm1 keeps small gammas exact
            return alpha * t
        return alpha * np.expm1(-gamma * t) / math.expm1(-gamma)
    raise AuditError(f"unknown spending function {kind!r}; known: {', '.join(SPENDING)}")


def check_gamma(gamma) -> float:
    """The HSD gamma as a float; AuditError naming ``seeds.gamma`` unless finite and |gamma| <= 40."""
    try:
        value = float(gamma)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and abs(value) <= _GAMMA_MAX):
        raise AuditError(f"seeds.gamma must be a number in [-{_GAMMA_MAX:g}, {_GAMMA_MAX:g}], got {gamma!r}")
    return value


def _simpson(lo: float, hi: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.linspace(lo, hi, n)
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return x, w * (hi - lo) / (n - 1) / 3


class _Process:
    """The sub-density of the score S_k on the continuation region, stage after stage.

    ``points`` and ``mass`` (density x Simpson weight) start as a point mass at S_0 = 0.
    """

    def __init__(self, drift: float = 0.0, min_sd: float = 1.0):
        self.drift, self.t = drift, 0.0
        self.points, self.mass = np.zeros(1), np.ones(1)
        self.min_sd = min_sd

    def crossing(self, t: float, c: float, sides: int) -> float:
        """P(continue so far, then |Z| >= c (two-sided) or Z >= c (one-sided) at fraction t)."""
        dt = t - self.t
        mean = self.points + self.drift * dt
        b = c * math.sqrt(t)
        p = stats.norm.sf((b - mean) / math.sqrt(dt))
        if sides == 2:
            p = p + stats.norm.cdf((-b - mean) / math.sqrt(dt))
        return float(np.dot(self.mass, p))

    def advance(self, t: float, c: float, sides: int) -> None:
        """Condition on not crossing c at fraction t and move the process there."""
        dt = t - self.t
        sd, b = math.sqrt(dt), min(c, _C_MAX) * math.sqrt(t)
        lo = -b if sides == 2 else self.drift * t - (_C_MAX - 2) * math.sqrt(t)
        n = max(_NPTS, int(math.ceil((b - lo) / (self.min_sd / 12))) | 1)
        x, w = _simpson(lo, b, n)
        kernel = stats.norm.pdf((x[:, None] - self.points[None, :] - self.drift * dt) / sd) / sd
        self.points, self.mass, self.t = x, w * (kernel @ self.mass), t


def check_fractions(fractions) -> np.ndarray:
    """Information fractions as a float array, checked positive and strictly increasing."""
    t = np.asarray(fractions, float).reshape(-1)
    if t.size == 0 or not np.all(np.isfinite(t)) or t[0] <= 0 or np.any(np.diff(t) <= 0):
        raise AuditError(f"information fractions must be positive and increasing, got {t.tolist()}")
    return t


def _min_sd(t: np.ndarray) -> float:
    return float(np.sqrt(np.diff(np.concatenate([[0.0], t]))).min())


def crossing_probabilities(bounds, fractions, sides: int = 2, drift: float = 0.0) -> np.ndarray:
    """P(the first crossing is at stage k), k = 1..K, for given z boundaries.

    Args:
        bounds: shape (K,), z boundaries c_k (np.inf: no crossing possible at that stage).
        fractions: shape (K,), increasing information fractions t_k in (0, 1] (may exceed 1
            when the information was larger than planned).
        sides: 2 for |Z_k| >= c_k, 1 for Z_k >= c_k.
        drift: theta, with Z_k ~ N(theta sqrt(t_k), 1); 0 is the null.

    Returns:
        shape (K,) probabilities; their sum is the overall crossing probability.
    """
    t = check_fractions(fractions)
    c = np.asarray(bounds, float).reshape(-1)
    proc, out = _Process(drift, _min_sd(t)), np.zeros(len(t))
    for k, (tk, ck) in enumerate(zip(t, c)):
        out[k] = 0.0 if ck >= _C_MAX else proc.crossing(tk, ck, sides)
        if k < len(t) - 1:
            proc.advance(tk, ck, sides)
    return out


@functools.lru_cache(maxsize=4096)
def _boundaries(t: tuple, alpha: float, kind: str, sides: int, final: bool, gamma: float) -> tuple:
    t_arr = np.asarray(t)
    spend_t = t_arr.copy()
    if final:
        spend_t[-1] = max(spend_t[-1], 1.0)  # the final analysis spends whatever is left
    # one-sided spending at alpha / sides on each side
    cumulative = sides * spending(spend_t, alpha / sides, kind, gamma)
    proc, out, spent = _Process(0.0, _min_sd(t_arr)), [], 0.0
    for k, tk in enumerate(t):
        target = cumulative[k] - spent
        if target <= 1e-15:
            ck = math.inf
        else:
            f = lambda c: proc.crossing(tk, c, sides) - target  # noqa: E731
            ck = 0.0 if f(1e-9) <= 0 else optimize.brentq(f, 1e-9, _C_MAX, xtol=1e-10)
        out.append(ck)
        spent += 0.0 if ck >= _C_MAX else proc.crossing(tk, ck, sides)
        if k < len(t) - 1:
            proc.advance(tk, ck, sides)
    return tuple(out)


def boundaries(fractions, alpha: float = 0.05, kind: str = "obf", sides: int = 2,
               final: bool = True, gamma: float = HSD_GAMMA) -> np.ndarray:
    """z boundaries of a Lan-DeMets spending design at the observed information fractions.

    H0: equal means. A two-sided design (``sides=2``) crosses at stage k when |Z_k| >= c_k and
    has total level ``alpha`` (alpha/2 spent per side); a one-sided design (``sides=1``, used
    for each half of TOST) crosses when Z_k >= c_k and has level ``alpha``.

    Args:
        fractions: shape (K,), information fractions of the looks so far (increasing).
        alpha: total level. kind: ``obf`` (default), ``pocock`` or ``hsd`` (with ``gamma``).
        final: the last look is the final analysis and spends all of alpha (f(1)) even if its
            information fraction fell short of 1 (failed runs).

    Returns:
        shape (K,) boundaries; np.inf where nothing is spent (the look cannot reject).
    """
    if not 0 < alpha < 1:
        raise AuditError(f"alpha must be in (0, 1), got {alpha}")
    if sides not in (1, 2):
        raise AuditError(f"sides must be 1 or 2, got {sides}")
    t = tuple(float(x) for x in check_fractions(fractions))
    gamma = check_gamma(gamma) if kind == "hsd" else 0.0  # one cache entry per obf/pocock design
    return np.asarray(_boundaries(t, float(alpha), kind, sides, bool(final), gamma))


def nominal_levels(bounds, sides: int = 2) -> np.ndarray:
    """The p-value below which each look rejects: sides x (1 - Phi(c_k)); 0 where c_k = inf."""
    return sides * stats.norm.sf(np.asarray(bounds, float))


def classical_constant(looks: int, alpha: float = 0.05, shape: str = "pocock") -> float:
    """Constant C of the classical equally spaced two-sided designs (Jennison & Turnbull 2000,
    Tables 2.1 and 2.3): Pocock c_k = C; O'Brien-Fleming c_k = C sqrt(K / k).

    Used to verify the integration against published tables, not by the audit itself.
    """
    t = np.arange(1, looks + 1) / looks
    scale = np.ones(looks) if shape == "pocock" else np.sqrt(looks / np.arange(1, looks + 1))
    return float(optimize.brentq(lambda c: crossing_probabilities(c * scale, t).sum() - alpha, 1.0, 6.0,
                                 xtol=1e-10))


def z_from_p(p, sides: int = 2):
    """The z-scale value with the same p: Phi^-1(1 - p / sides) (Welch's t mapped by its p)."""
    return stats.norm.isf(np.asarray(p, float) / sides)
