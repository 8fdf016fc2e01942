"""Unargmaxable tokens of a linear output layer (Grivas, Bogoychev & Lopez, ACL 2022).

Token c of logits l = W x + b (W: V x d, b: V) is *argmaxable* when some input x the body can
produce makes c the strict argmax: l_c(x) > l_j(x) for all j != c. The test runs over an input
*box* [lo_1, hi_1] x ... x [lo_d, hi_d] (``Box``) that contains every input the body can
produce: a superset, so "unargmaxable over the box" is sound (no reachable input makes c the
argmax), while "argmaxable" is relative to the box (the witness lies in the box; the body may
never produce it). For the AWD-LSTM body the head sees the last LSTM layer's output
o * tanh(cell), in (-1, 1)^d; at evaluation the locked dropout is off, so the box is [-1, 1]^d
(the body's ``output_box`` 1.0: a half-width). The Transformer body ends in a LayerNorm,
y = gamma z + beta with z zero-mean and ||z||^2 <= d, so |z_i| <= sqrt(d - 1) and its box is
per coordinate, beta_i -/+ |gamma_i| sqrt(d - 1) (``audit.model.bodies.transformer``).
The heads sigsoftmax, GSS and PLIF apply a strictly increasing element-wise
map f to l before the softmax (f' > 0: GSS f' = k - (k - 1) sigmoid(l - c) lies between 1 and k;
sigsoftmax is GSS(0, 2); PLIF slopes are softplus(w) > 0), and an increasing map keeps the
argmax, so the same test applies to them. Mixtures (MoS, Mixtape) have no exact test: a witness
search gives a lower bound on their argmaxable tokens (``audit.evaluate.argmax_search``).

Tiers, cheapest first; every token leaves at the first tier that settles it (m and r are the
box's centre and half-widths; for [-a, a]^d, m = 0 and r = a):

1. ``witness``: x = clip(m + s w_c) to the box for a few scales s (s = 100 reaches the corner
   m + r sign(w_c) where |w_c| is not tiny), and seeded random points m + r u near them. A
   candidate x certifies c when c is the strict argmax at x by more than ``MARGIN``.
2. ``dominated``: a proof of the opposite, cheap: c is unargmaxable when one rival j alone has
   l_j >= l_c on the whole box, i.e. b_j - b_c + min over the box of (w_j - w_c) x >= 0, where
   the minimum is sum_i min((w_j - w_c)_i lo_i, (w_j - w_c)_i hi_i) = (w_j - w_c) m
   - |w_j - w_c| r (for [-a, a]^d: -a ||w_j - w_c||_1).
3. ``braid``: the authors' braid reflection. From x = clip(m + w_c) reflect x across the
   hyperplane (w_c - w_j) x + b_c - b_j = 0 of the current argmax j (then clip to the box), up to
   ``patience`` steps. Any x it finds is checked like a witness, so it never certifies wrongly;
   it only fails to find one.
4. ``lp``: the exact Chebyshev-ball linear programme, solved with SciPy's HiGHS:
   maximise r subject to (w_j - w_c) x + ||w_j - w_c|| r <= b_c - b_j for all j != c,
   lo_i <= x_i <= hi_i, 0 <= r <= 1. c is argmaxable iff the programme is feasible with
   r* > ``LP_TOL`` (a ball of radius r* around x* lies in c's argmax region before the box
   clips it). A row with w_j == w_c and b_j >= b_c makes c never a strict argmax. At most
   ``lp_budget`` tokens get the LP; the rest are reported ``unresolved``, never counted as
   either. The LP is solved by constraint generation: first on the ``LP_ROWS`` rivals closest
   to beating c at clip(m + w_c), then again with up to ``LP_ROWS`` more of the rows its
   solution violates, until it violates none. Dropping rows can only raise r*, so a first
   solution that meets every row is the whole LP's, an infeasible subset proves the whole
   infeasible, and a subset's r* <= ``LP_TOL`` proves c unargmaxable at once: the same verdicts
   and, for an argmaxable token, the same r* (to 1e-12 on a trained default-size softmax) in
   about a fifth of the CPU time of one LP over all V - 1 rows, which HiGHS spends mostly on
   rows that never bind.

Bounds (issue 49: a token's constraint generation once re-solved the same LP for ever). The
witness tier tries ``len(SCALES)`` + ``variants`` points per token, the dominated tier one pass
over the V - 1 rivals, the braid tier ``patience`` reflections; the LP of one token stops at the
first of: its working set stops growing (HiGHS returned a point that breaks only rows already in
the set, by more than the absolute tolerance: easy on [-100, 100]^d, and re-solving gives the
same point), ``LP_ROUNDS`` solves, ``LP_SECONDS`` wall seconds (its set-up, its solves and the
work between them; each solve's HiGHS ``time_limit`` is what the token has left), or a HiGHS
time or iteration limit. A token stopped so is *unresolved*, like those past ``lp_budget``
(``ArgmaxResult.lp_unresolved`` counts it), unless the last point already makes c the strict
argmax by > ``MARGIN`` (a witness, as in tier 1: argmaxable). So one LP token takes at most
``LP_SECONDS`` plus the one round that may start just before the deadline (SciPy's set-up of at
most ``LP_ROWS`` x ``LP_ROUNDS`` rows, one residual product A x over V - 1 rows), and the check
at most ``lp_budget`` such tokens per box (``audit.plan.argmaxcost.argmax_lp_seconds`` plans
exactly that). Only a token that reaches the time bound can depend on the machine's speed; the
others' results are deterministic.

A box given as a half-width a (a float) runs the formulas of [-a, a]^d as written for it, so its
results are those the scalar test always gave; a per-coordinate box (lo, hi) runs the general
ones, which agree with them on lo = -a, hi = a (tests/evaluate/test_argmax.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linprog

from audit.errors import AuditError
from audit.evaluate.argmax_box import Box

# the authors' box: Grivas et al. 2022 ran their LP with x in [-100, 100]^d whatever the model
# (debate-since-2021.md, section 1). A larger box can only make more tokens argmaxable, so a
# count over the body's box (far smaller: [-1, 1]^d for the AWD-LSTM) is not theirs; their claim
# is judged on this box (``unargmaxable_box100``), the body's count shown beside it as ours
AUTHORS_BOX = 100.0
MARGIN = 1e-9                     # a witness must beat every other logit by more than this
LP_TOL = 1e-7                     # r* above this: argmaxable (HiGHS tolerances are set to 1e-9)
SCALES = (1.0, 10.0, 100.0)       # x = clip(m + s w_c): s = 100 reaches the corner of w_c's signs
CHUNK = 256                       # tokens per block in the witness and braid tiers
LP_ROWS = 64                      # rows of the LP's first working set, and most added per round
# a token's LP bounds (module docstring), far above what a token needs: 20 planted tokens at
# V = 10,000, d = 400 (`bench argmax`'s layer, one thread) took at most 6 solves and 0.27 CPU-s
# over the authors' box, 3 solves over [-1, 1]^d; audit/plan/argmaxcost.py plans these figures
LP_ROUNDS = 100                   # solves per token at most
LP_SECONDS = 10.0                 # wall seconds per token: set-up, all its solves, the work between
UNRESOLVED = float("nan")         # chebyshev_lp's value when a bound stopped it: neither verdict
_HIGHS = {"primal_feasibility_tolerance": 1e-9, "dual_feasibility_tolerance": 1e-9}


@dataclass
class ArgmaxResult:
    """Outcome of ``check``: the tokens settled per tier and the CPU seconds each tier took (this
    process's ``time.process_time``: the budget is in CPU time, which a busy machine's wall
    clock overstates).

    ``unargmaxable`` are the token ids proved unargmaxable (by the dominated tier or the LP);
    ``unresolved`` those neither proved argmaxable nor unargmaxable: past the LP budget, or
    stopped by a bound of their LP (``lp_unresolved`` of them; module docstring).
    """

    witness: int
    braid: int
    lp_argmaxable: int
    dominated: int
    lp_unargmaxable: int
    unargmaxable: np.ndarray
    unresolved: np.ndarray
    seconds: dict = field(default_factory=dict)
    lp_unresolved: int = 0

    def summary(self) -> dict:
        """eval.json fields (runs-table columns, docs/runs-table.md); ``argmax_lp_unresolved``,
        the tokens a bound of their LP stopped, are among ``argmax_unresolved`` (eval.json only:
        not a runs-table column)."""
        return {"unargmaxable": int(self.unargmaxable.size), "argmax_unresolved": int(self.unresolved.size),
                "argmax_lp_unresolved": self.lp_unresolved,
                "argmax_argmaxable": self.witness + self.braid + self.lp_argmaxable,
                "argmax_witness_tokens": self.witness, "argmax_braid_tokens": self.braid,
                "argmax_dominated_tokens": self.dominated,
                "argmax_lp_tokens": self.lp_argmaxable + self.lp_unargmaxable,
                "argmax_seconds": float(sum(self.seconds.values())),
                **{f"argmax_seconds_{tier}": float(s) for tier, s in self.seconds.items()}}


def _certified(x: np.ndarray, tokens: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Which tokens[i] are the strict argmax (by > MARGIN) at x[i]; x: (n, d), tokens: (n,)."""
    logits = x @ W.T + b
    own = logits[np.arange(len(tokens)), tokens]
    logits[np.arange(len(tokens)), tokens] = -np.inf
    return own - logits.max(axis=1) > MARGIN


def witness_tier(W, b, tokens, box, rng: np.random.Generator, variants: int = 4) -> np.ndarray:
    """Boolean (len(tokens),): certified by a cheap witness x = clip(m + s w_c) or a seeded variant.
    Bounded: ``len(SCALES)`` + ``variants`` candidate points, one (n, V) logit block each."""
    box = Box.of(box, W.shape[1])
    centre, radius = box.centre, box.radius
    done = np.zeros(len(tokens), dtype=bool)
    base = W[tokens]
    candidates = [box.clip(centre + s * base) for s in SCALES]
    # seeded variants: the unit direction jittered, then scaled to the box's half-widths
    for _ in range(variants):
        jitter = base + rng.normal(scale=np.abs(base).mean() + 1e-12, size=base.shape)
        candidates.append(box.clip(centre + jitter * radius / (np.abs(jitter).max(axis=1, keepdims=True) + 1e-300)))
    for x in candidates:
        todo = ~done
        if not todo.any():
            break
        done[todo] = _certified(x[todo], tokens[todo], W, b)
    return done


def dominated_tier(W, b, tokens, box) -> np.ndarray:
    """Boolean (len(tokens),): proved unargmaxable by one rival j alone, l_j >= l_c on the whole
    box, i.e. b_j - b_c + min over the box of (w_j - w_c) x >= 0 (module docstring). Bounded:
    one pass over the V rows per token, no iteration."""
    box = Box.of(box, W.shape[1])
    centre, radius = box.centre, box.radius
    out = np.zeros(len(tokens), dtype=bool)
    for i, c in enumerate(tokens):
        diff = W - W[c]
        if box.half is not None:   # [-a, a]^d: min (w_j - w_c) x = -a ||w_j - w_c||_1
            slack = b - b[c] - box.half * np.abs(diff).sum(axis=1)
        else:                      # sum_i min(diff_i lo_i, diff_i hi_i)
            slack = b - b[c] + diff @ centre - np.abs(diff) @ radius
        slack[c] = -np.inf
        out[i] = slack.max() >= 0.0
    return out


def braid_tier(W, b, tokens, box, patience: int = 100) -> np.ndarray:
    """Boolean (len(tokens),): certified by braid reflection within ``patience`` steps (the bound:
    a token still unsettled after them leaves for the next tier)."""
    box = Box.of(box, W.shape[1])
    x = box.clip(box.centre + W[tokens])
    done = np.zeros(len(tokens), dtype=bool)
    rows = np.arange(len(tokens))
    for _ in range(patience):
        todo = np.flatnonzero(~done)
        if todo.size == 0:
            break
        logits = x[todo] @ W.T + b
        own = logits[rows[: todo.size], tokens[todo]]
        logits[rows[: todo.size], tokens[todo]] = -np.inf
        j = logits.argmax(axis=1)
        won = own - logits[rows[: todo.size], j] > MARGIN
        done[todo[won]] = True
        lose = todo[~won]
        a = W[tokens[lose]] - W[j[~won]]                 # normal of the c-vs-j hyperplane
        beta = b[tokens[lose]] - b[j[~won]]
        norm2 = (a * a).sum(axis=1)
        step = np.where(norm2 > 0, (np.einsum("ij,ij->i", a, x[lose]) + beta) / np.where(norm2 > 0, norm2, 1), 0.0)
        x[lose] = box.clip(x[lose] - 2.0 * step[:, None] * a)
    return done


def chebyshev_lp(W: np.ndarray, b: np.ndarray, c: int, box, rounds: int | None = None,
                 seconds: float | None = None) -> float:
    """r* of the Chebyshev-ball LP for token c (see the module docstring): -1.0 if infeasible, a
    subset's r <= ``LP_TOL`` as soon as one proves c unargmaxable, ``UNRESOLVED`` (NaN: neither
    > nor <= ``LP_TOL``) when a bound stopped it first.

    Args:
        W: (V, d) output matrix; b: (V,) bias; c: token id; box: the input box (``Box.of``: a
            half-width, or per-coordinate (lo, hi)).
        rounds: at most this many solves (default ``LP_ROUNDS``).
        seconds: wall seconds for the whole LP, set-up and solves (default ``LP_SECONDS``;
            HiGHS's ``time_limit`` of each solve is what is left).

    Bounded: at most ``rounds`` solves, each adding at least one row it did not have, so the
    working set never exceeds ``LP_ROWS`` x ``rounds`` rows. Where a bound stops it but its last
    point makes c the strict argmax by > ``MARGIN``, that point is a witness and the subset's
    r (>= r*, > ``LP_TOL``) is returned.
    """
    rounds = LP_ROUNDS if rounds is None else rounds
    deadline = time.monotonic() + (LP_SECONDS if seconds is None else seconds)
    box = Box.of(box, W.shape[1])
    diff = np.delete(W, c, axis=0) - W[c]
    rhs = b[c] - np.delete(b, c)
    norms = np.linalg.norm(diff, axis=1)
    same = norms == 0.0
    if np.any(rhs[same] <= 0.0):      # a duplicate row with at least c's bias always ties or wins
        return -1.0
    d = W.shape[1]
    A, rhs = np.hstack([diff[~same], norms[~same, None]]), rhs[~same]
    cost = np.zeros(d + 1)
    cost[-1] = -1.0                   # maximise r
    bounds = list(zip(box.lo, box.hi)) + [(0.0, 1.0)]
    # constraint generation (module docstring): the rivals nearest to beating c at clip(m + w_c)
    slack = rhs - A[:, :d] @ box.clip(box.centre + W[c])
    work = np.argsort(slack, kind="stable")[:LP_ROWS]
    x = None
    for _ in range(rounds):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        res = linprog(cost, A_ub=A[work], b_ub=rhs[work], bounds=bounds, method="highs",
                      options={**_HIGHS, "time_limit": left})
        if res.status == 2:
            return -1.0
        if res.status == 1:           # HiGHS's time (or iteration) limit: no optimum to build on
            break
        if res.status != 0:
            raise AuditError(f"argmax LP for token {c}: HiGHS status {res.status} ({res.message})")
        x = res.x
        if x[-1] <= LP_TOL:           # the subset's r bounds the whole LP's from above
            return float(x[-1])
        excess = A @ x - rhs
        broken = np.flatnonzero(excess > _HIGHS["primal_feasibility_tolerance"])
        if broken.size == 0:
            return float(x[-1])
        # only rows not yet in the set: one HiGHS held and then broke would be solved again as is
        fresh = broken[~np.isin(broken, work)]
        if fresh.size == 0:
            break
        work = np.union1d(work, fresh[np.argsort(-excess[fresh], kind="stable")[:LP_ROWS]])
    if x is not None and _certified(x[None, :d], np.array([c]), W, b)[0]:
        return float(x[-1])
    return UNRESOLVED


def _chunked(tier, W, b, tokens, *args) -> np.ndarray:
    """Run a tier over blocks of ``CHUNK`` tokens: its (n, V) logit blocks stay a few MB."""
    return np.concatenate([tier(W, b, tokens[i:i + CHUNK], *args) for i in range(0, len(tokens), CHUNK)]
                          or [np.zeros(0, dtype=bool)])


def check(W, b, box=1.0, seed: int = 0, patience: int = 100,
          lp_budget: int | None = None) -> ArgmaxResult:
    """Tiered argmaxability of every token of a linear layer over the input box.

    Args:
        W: (V, d) output matrix; b: (V,) bias or None (zeros).
        box: the input box (``Box.of``): a half-width a for [-a, a]^d, or per-coordinate
            bounds (lo, hi). Default 1.0, the unit box of a tanh-bounded input; the evaluation
            passes the body's ``output_box`` or the head's ``argmax_box``.
        seed: seed of the witness tier's Generator.
        patience: braid-reflection steps per token.
        lp_budget: at most this many LPs (None: no limit); the tokens beyond are unresolved,
            and so is a token whose LP a bound stopped (``chebyshev_lp``).

    Returns:
        ``ArgmaxResult`` with tokens settled per tier and CPU seconds per tier.

    Bounded: V tokens through the witness, dominated and braid tiers (fixed work each), then
    at most ``lp_budget`` LPs, each within ``chebyshev_lp``'s bounds.
    """
    W = np.asarray(W, dtype=np.float64)
    b = np.zeros(W.shape[0]) if b is None else np.asarray(b, dtype=np.float64)
    if W.ndim != 2 or b.shape != (W.shape[0],):
        raise AuditError(f"argmax check: W must be (V, d) and b (V,), got {W.shape} and {b.shape}")
    box = Box.of(box, W.shape[1])
    rng = np.random.default_rng(seed)
    tokens = np.arange(W.shape[0])
    seconds = {}
    start = time.process_time()
    ok = _chunked(witness_tier, W, b, tokens, box, rng)
    seconds["witness"] = time.process_time() - start
    witness, left = int(ok.sum()), tokens[~ok]
    start = time.process_time()
    beaten = dominated_tier(W, b, left, box)
    seconds["dominated"] = time.process_time() - start
    dominated, left = left[beaten], left[~beaten]
    start = time.process_time()
    ok = _chunked(braid_tier, W, b, left, box, patience)
    seconds["braid"] = time.process_time() - start
    braid, left = int(ok.sum()), left[~ok]
    budget = left.size if lp_budget is None else min(lp_budget, left.size)
    start = time.process_time()
    radii = np.array([chebyshev_lp(W, b, int(c), box) for c in left[:budget]])
    seconds["lp"] = time.process_time() - start
    lp_no = left[:budget][radii <= LP_TOL]
    stopped = left[:budget][np.isnan(radii)]      # a bound of their LP: neither verdict
    return ArgmaxResult(witness=witness, braid=braid, lp_argmaxable=int((radii > LP_TOL).sum()),
                        dominated=int(dominated.size), lp_unargmaxable=int(lp_no.size),
                        unargmaxable=np.sort(np.concatenate([dominated, lp_no])),
                        unresolved=np.sort(np.concatenate([stopped, left[budget:]])),
                        seconds=seconds, lp_unresolved=int(stopped.size))
