"""Witness search: a certified lower bound on the argmaxable tokens of any head (issue 24).

Mixtures of softmaxes (MoS, its uniform-gate ablation), Mixtape and an outside head without an
output layer read through ``from_logits`` have no exact test of argmaxability
(``audit.evaluate.argmax`` needs log-P to be a softmax of W x + b after an increasing map). For
them the search looks for witnesses: for every token c, an input x in the body's box
(``audit.evaluate.argmax.Box``) at which c is the strict argmax of the head's log-probs. It reads
the head through its forward alone, (T, B, d_in) -> (T, B, V), as the evaluation runs it: MoS's
prior and Mixtape's gates (which read x and, for frequent words, the word's own gate embedding)
are computed as they are, not approximated.

Per token c, batched over tokens:

1. Seeded starts: the box's centre m; the corner m + r sign(grad f_c(m)) (r: half-widths);
   clip(m + s w_c) for the exact test's scales s when the head's output layer reads x directly
   (``output_layer()`` with d_in columns); ``RANDOM_STARTS`` points drawn uniformly in the box by
   the seeded Generator. Every start climbs (step 2) for ``PROBE`` steps; then each token keeps
   the one with the largest margin log p_c - max_{j != c} log p_j (a mixture's log p_c has
   several local maxima: keeping the best start after one step, the search missed argmaxable
   tokens that a dense grid finds on 2 of 12 tiny MoS heads, after 3 steps on 1, after 5 on none;
   tests/evaluate/test_argmax_search.py).
2. ``steps`` steps of projected gradient ascent (Adam's update, per coordinate scale-free, then
   clipped to the box) on a smoothed margin, f_c(x) = log p_c - tau logsumexp_{j != c}(log p_j /
   tau) with tau = ``TEMPERATURE``, the step STEP r (1 - k / steps). The margin, not log p_c
   itself as the issue first put it: the largest p_c can lie where another token is likelier
   (a rare token is often the argmax only where every token is unlikely). On a trained
   default-size softmax (where the exact test knows the answer: 1,596 of 2,000 tokens
   argmaxable) this search certified 378 tokens ascending log p_c, 1,465 ascending the margin
   (docs/benchmarks.md).
   For a softmax f_c = l_c - tau logsumexp_{j != c}(l_j / tau) is concave in x.
3. A token leaves as soon as c is the argmax in float32 at the current x and a float64 re-check
   agrees: x clipped to the box in float64, a float64 copy of the head run on it, and c beating
   every other log-prob by more than ``argmax.MARGIN``. Only that counts: the tokens it does not
   certify are *unresolved*, never unargmaxable (the search proves nothing about them).

Tokens are searched in id order (ids run in descending training frequency), at most ``budget``
of them; the rest are unresolved. The search runs on the CPU on float32 and float64 copies of the
head (a GPU job's head is copied off the device) and is timed in CPU seconds
(``time.process_time``), like the exact tiers.

Bounded (issue 49): ``steps`` + 1 ascent turns per block of tokens (fewer when every token of the
block is certified), ``budget`` tokens (``evaluate.argmax.search_tokens``) in blocks of
``BLOCK_ENTRIES`` / (V x walkers): no turn waits on convergence, and a token the turns do not
certify is unresolved (``audit.plan.argmaxcost.argmax_search_seconds`` plans every turn).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import numpy as np
import torch

from audit.errors import AuditError
from audit.evaluate.argmax import MARGIN, SCALES, Box

RANDOM_STARTS = 4       # uniform points in the box per token, besides the informed starts
STEP = 1.0              # the first ascent step, as a share of each half-width; decays linearly to 0
TEMPERATURE = 0.1       # of the smoothed margin (0.03-0.05 gave +1%, at 2-4x the time: denormal exps)
BETAS = (0.9, 0.999)    # Adam's moment decays
PROBE = 5               # steps every start climbs before each token keeps its best one (>= 1)
BLOCK_ENTRIES = 2**20   # walkers x V per block: a block's (n, V) log-probs stay a few MB


@dataclass
class SearchResult:
    """Outcome of ``search``: token ids certified argmaxable with their witnesses, those left
    unresolved (searched without a witness, or beyond the token budget), how many were searched,
    the steps per token and the CPU seconds."""

    argmaxable: np.ndarray
    witnesses: np.ndarray       # (len(argmaxable), d): the float64 point in the box that certified each
    unresolved: np.ndarray
    searched: int
    steps: int
    seconds: float

    def summary(self) -> dict:
        """eval.json fields (runs-table columns, docs/runs-table.md): ``unargmaxable`` None, as
        the search proves no token unargmaxable."""
        n, m = int(self.argmaxable.size), int(self.unresolved.size)
        beyond = n + m - self.searched
        note = f"lower bound from a witness search: at least {n} argmaxable, {m} unresolved"
        if beyond:
            note += f" ({beyond} of them beyond the evaluate.argmax.search_tokens budget of {self.searched})"
        return {"unargmaxable": None, "argmax_argmaxable": n, "argmax_unresolved": m,
                "argmax_search_tokens": n, "argmax_searched_tokens": self.searched, "argmax_search_steps": self.steps,
                "argmax_seconds": float(self.seconds), "argmax_seconds_search": float(self.seconds),
                "argmax_note": note}


def _twin(head: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A CPU copy of ``head`` in ``dtype``, in eval mode, with frozen parameters."""
    twin = copy.deepcopy(head).to(device="cpu", dtype=dtype).eval()
    for p in twin.parameters():
        p.requires_grad_(False)
    return twin


def _log_probs(head: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """(n, d) inputs -> (n, V) log-probs: one position of n streams, (1, n, d) -> (1, n, V)."""
    return head(x.unsqueeze(0)).squeeze(0)


def _margin(logp: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log p_c - max_{j != c} log p_j for each row's token c; logp (n, V), tokens (n,)."""
    own = logp.gather(1, tokens[:, None]).squeeze(1)
    return own - logp.scatter(1, tokens[:, None], float("-inf")).max(dim=1).values


def _ascent(head: torch.nn.Module, x: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(margin (n,), grad_x f_c (n, d)) at x for each row's token c: the hard margin
    log p_c - max_{j != c} log p_j and the gradient of the smoothed one (module docstring)."""
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        logp = _log_probs(head, x)
        own = logp.gather(1, tokens[:, None]).squeeze(1)
        others = logp.scatter(1, tokens[:, None], float("-inf"))
        smooth = own - TEMPERATURE * torch.logsumexp(others / TEMPERATURE, dim=1)
        grad, = torch.autograd.grad(smooth.sum(), x)
    return _margin(logp.detach(), tokens), grad


def certify(head64: torch.nn.Module, box: Box, x: torch.Tensor, tokens: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(ok (n,), x64 (n, d)): token c is the strict argmax (by > MARGIN) of the float64 head at
    x64, x clipped to the box in float64 (a float32 x can sit outside a bound that float32 rounds
    outward)."""
    x64 = box.clip(x.detach().double().numpy())
    with torch.no_grad():
        return (_margin(_log_probs(head64, torch.from_numpy(x64)), tokens) > MARGIN).numpy(), x64


def _block(heads, box: Box, tokens: np.ndarray, steps: int, rng: np.random.Generator,
           rows) -> tuple[np.ndarray, np.ndarray]:
    """(done (n,), witnesses (n, d)) for n = len(tokens): certified argmaxable by the search
    (module docstring), and the float64 point that certified each (NaN rows where none)."""
    head32, head64 = heads
    lo, hi = (torch.from_numpy(v).float() for v in (box.lo, box.hi))
    radius = (hi - lo) / 2
    t = torch.from_numpy(tokens)
    n, d = len(tokens), lo.numel()
    centre = ((lo + hi) / 2).expand(n, d)
    _, grad = _ascent(head32, centre, t)
    starts = [centre, torch.clamp(centre + radius * torch.sign(grad), lo, hi)]
    if rows is not None:
        starts += [torch.clamp(centre + s * rows[t], lo, hi) for s in SCALES]
    starts += [torch.from_numpy(rng.uniform(box.lo, box.hi, size=(n, d))).float() for _ in range(RANDOM_STARTS)]
    # walkers: every start climbs for the first PROBE steps, then only each token's best one
    x = torch.cat(starts).clone()
    owner = torch.arange(n).repeat(len(starts))
    done, witnesses = np.zeros(n, dtype=bool), np.full((n, d), np.nan)
    first, second = torch.zeros_like(x), torch.zeros_like(x)     # Adam's moments, per walker
    margin = torch.zeros(len(x))
    for k in range(steps + 1):
        if 0 < k == min(PROBE, steps) and len(x) > n:            # keep each token's best walker
            best = torch.full((n,), -1, dtype=torch.long)
            order = torch.argsort(margin, stable=True)           # ascending: the last write wins
            best[owner[order]] = order
            keep = best[best >= 0]
            x, owner, first, second, margin = x[keep], owner[keep], first[keep], second[keep], margin[keep]
        active = torch.from_numpy(np.flatnonzero(~done[owner.numpy()]))
        if active.numel() == 0:
            break
        m, grad = _ascent(head32, x[active], t[owner[active]])
        margin[active] = m
        hit = active[m > 0]             # the argmax in float32: worth the float64 re-check
        if hit.numel():
            ok, x64 = certify(head64, box, x[hit], t[owner[hit]])
            mine = owner[hit].numpy()[ok]
            done[mine], witnesses[mine] = True, x64[ok]
        if k < steps:
            first[active] = BETAS[0] * first[active] + (1 - BETAS[0]) * grad
            second[active] = BETAS[1] * second[active] + (1 - BETAS[1]) * grad**2
            update = (first[active] / (1 - BETAS[0] ** (k + 1))) / \
                ((second[active] / (1 - BETAS[1] ** (k + 1))).sqrt() + 1e-12)
            eta = STEP * (1.0 - k / steps)
            x[active] = torch.clamp(x[active] + eta * radius * update, lo, hi)
    return done, witnesses


def search(head: torch.nn.Module, box, d_in: int, steps: int = 100, budget: int | None = None,
           seed: int = 0, tokens: np.ndarray | None = None) -> SearchResult:
    """Witness search over every token of ``head`` (module docstring).

    Args:
        head: maps (T, B, d_in) to log-probs (T, B, V); copied, never changed.
        box: the box of the head's inputs (``Box.of``: a half-width or per-coordinate (lo, hi)).
        d_in: the size of the head's input (the body's ``d_out``).
        steps: ascent steps per token after the starts.
        budget: at most this many tokens are searched, in id order (None: all); the rest unresolved.
        seed: seed of the random starts' Generator.
        tokens: search these token ids instead (the benchmark's sample); ``budget`` then unused.

    Returns:
        ``SearchResult``: certified token ids and their witnesses, unresolved token ids, tokens
        searched, CPU seconds.
    """
    if steps < 0 or (budget is not None and budget < 0):
        raise AuditError(f"argmax search: steps and budget must be >= 0, got {steps} and {budget}")
    box = Box.of(box, d_in)
    start = time.process_time()
    head32 = _twin(head, torch.float32)
    heads = (head32, _twin(head32, torch.float64))     # the second copy from the CPU one: one transfer
    with torch.no_grad():
        vocab = _log_probs(heads[0], torch.from_numpy(box.centre).float()[None]).shape[-1]
    layer = head32.output_layer() if hasattr(head32, "output_layer") else None
    rows = None
    if layer is not None and layer[0].shape[-1] == d_in:   # the output layer reads x itself
        rows = layer[0].detach()
    rng = np.random.default_rng(seed)
    everyone = np.arange(vocab)
    searched = everyone[: vocab if budget is None else min(budget, vocab)] if tokens is None \
        else np.unique(np.asarray(tokens, dtype=np.int64))
    if searched.size and not 0 <= searched[0] <= searched[-1] < vocab:
        raise AuditError(f"argmax search: token ids must lie in [0, {vocab}), got {searched[0]}..{searched[-1]}")
    walkers = 2 + (0 if rows is None else len(SCALES)) + RANDOM_STARTS      # starts per token
    block = max(1, BLOCK_ENTRIES // (vocab * walkers))
    parts = [_block(heads, box, searched[i:i + block], steps, rng, rows) for i in range(0, searched.size, block)]
    done = np.concatenate([p[0] for p in parts] or [np.zeros(0, dtype=bool)])
    witnesses = np.concatenate([p[1] for p in parts] or [np.zeros((0, d_in))])[done]
    found = searched[done]
    return SearchResult(argmaxable=found, witnesses=witnesses, unresolved=np.setdiff1d(everyone, found),
                        searched=int(searched.size), steps=steps, seconds=time.process_time() - start)
