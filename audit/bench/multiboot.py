"""Null rejection rates of the multi-bootstrap's p-value candidates, by simulation.

``python -m audit bench multiboot [--sims 300 --resamples 500 --sentences 200 --seed 0 --alpha 0.05]``

Each simulated comparison has two arms of n runs drawn from one distribution (H0 true), scored on
S shared test sentences. A run's summed NLL on sentence s is ``tokens_s (mu + c_s + u_run +
v_arm,s + e_run,s)``: ``c_s`` the sentence's difficulty, common to both arms (sd 0.5, cancels in
the paired difference); ``u_run`` the seed's effect; ``v_arm,s`` the arm's own deviation on that
sentence, shared by its runs (what makes this test set's difference differ from the language's);
``e_run,s`` run-by-sentence noise (sd 0.05). Two regimes: ``seed`` (sd u 0.02, sd v 0.002: seeds
carry >90 % of the variance of the difference) and ``sentence`` (sd u 0.002, sd v 0.3: sentences
carry >99 %). Tokens per sentence are uniform on 5..39.

Methods, each two-sided at ``alpha``, on the same simulated data:
  ``percentile (old)``: the joint seed-and-sentence bootstrap, p = 2 (1 + smaller tail count) / (R + 1)
  (``audit.stats.multiboot`` before issue 33);
  ``boot SE, t(Welch df)``: the observed difference over the SD of the same joint bootstrap,
  referred to t with the Welch-Satterthwaite df of the runs' test perplexities;
  ``seed+sentence t``: ``audit.stats.multiboot.multibootstrap`` (Welch's unbiased seed variance
  plus the sentence-bootstrap variance, Satterthwaite df) -- the chosen one;
  ``welch``: Welch's t on the runs' test perplexities (seeds only; blind to sentences).

Prints a Markdown table: per regime and seeds per arm, each method's rejection rate with its
Monte-Carlo SE sqrt(r (1 - r) / sims); a rate is *within* when it is <= alpha + 2 SE0, SE0 =
sqrt(alpha (1 - alpha) / sims) the MC SE of a rate equal to alpha (0.0126 at 300 sims).
Every cell's Generator is ``default_rng([seed, n, regime])``: reproducible cell by cell.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from audit.stats import multiboot, tests
from audit.stats.io import Settings

SEEDS_PER_ARM = (2, 3, 5, 10)
REGIMES = {"seed": (0.02, 0.002), "sentence": (0.002, 0.3)}   # (sd of u_run, sd of v_arm,s)
METHODS = ("percentile (old)", "boot SE, t(Welch df)", "seed+sentence t", "welch")
MU, SD_DIFFICULTY, SD_NOISE = 4.0, 0.5, 0.05


def simulate_null(n: int, n_sentences: int, regime: str, rng: np.random.Generator):
    """One null comparison: (nll_a (n, S), nll_b (n, S), tokens (S,)), both arms one distribution."""
    sd_seed, sd_arm = REGIMES[regime]
    tokens = rng.integers(5, 40, n_sentences).astype(float)
    difficulty = rng.normal(0, SD_DIFFICULTY, n_sentences)
    arms = []
    for _ in range(2):
        per_token = (MU + difficulty + rng.normal(0, sd_arm, n_sentences)
                     + rng.normal(0, sd_seed, (n, 1)) + rng.normal(0, SD_NOISE, (n, n_sentences)))
        arms.append(per_token * tokens)
    return arms[0], arms[1], tokens


def percentile_p(samples: np.ndarray) -> float:
    """The old p: ``min(1, 2 (1 + min(#{T* <= 0}, #{T* >= 0})) / (R + 1))``."""
    below, above = int(np.sum(samples <= 0)), int(np.sum(samples >= 0))
    return min(1.0, 2 * (1 + min(below, above)) / (len(samples) + 1))


def pvalues(nll_a: np.ndarray, nll_b: np.ndarray, tokens: np.ndarray, resamples: int,
            rng: np.random.Generator) -> dict:
    """Each of ``METHODS``' two-sided p on one comparison (NaN where undefined)."""
    from scipy import stats

    ones = np.ones((1, len(tokens)))
    ppl_a, ppl_b = multiboot.corpus_ppl(nll_a, tokens, ones)[0], multiboot.corpus_ppl(nll_b, tokens, ones)[0]
    joint = multiboot.resample(nll_a, nll_b, tokens, resamples, rng)
    welch = tests.welch(ppl_a, ppl_b)
    sd = float(np.std(joint))
    boot_t = (2 * stats.t.sf(abs(ppl_a.mean() - ppl_b.mean()) / sd, welch["df"])
              if sd > 0 and np.isfinite(welch["df"]) else math.nan)
    chosen = multiboot.multibootstrap(nll_a, nll_b, tokens, Settings(bootstrap_resamples=resamples,
                                                                     bootstrap_seed=int(rng.integers(2**31))))
    return {"percentile (old)": percentile_p(joint), "boot SE, t(Welch df)": float(boot_t),
            "seed+sentence t": chosen["mb_p"], "welch": welch["p"]}


def rejection_rates(n: int, regime: str, sims: int, resamples: int, n_sentences: int, seed: int,
                    alpha: float, methods=METHODS) -> dict:
    """Share of ``sims`` null comparisons each method rejects at ``alpha`` (an undefined p does
    not reject; counted in ``undefined``)."""
    rng = np.random.default_rng([seed, n, list(REGIMES).index(regime)])
    hits, undefined = dict.fromkeys(methods, 0), dict.fromkeys(methods, 0)
    for _ in range(sims):
        ps = pvalues(*simulate_null(n, n_sentences, regime, rng), resamples, rng)
        for m in methods:
            hits[m] += bool(ps[m] < alpha)
            undefined[m] += not np.isfinite(ps[m])
    return {m: hits[m] / sims for m in methods} | {"undefined": undefined}


def table(sims: int, resamples: int, n_sentences: int, seed: int, alpha: float) -> str:
    """The Markdown table of every regime x seeds-per-arm cell."""
    se0 = math.sqrt(alpha * (1 - alpha) / sims)
    lines = [f"| regime | seeds per arm | {' | '.join(METHODS)} |", "|---" * (2 + len(METHODS)) + "|"]
    for regime in REGIMES:
        for n in SEEDS_PER_ARM:
            rates = rejection_rates(n, regime, sims, resamples, n_sentences, seed, alpha)
            cells = [f"{rates[m]:.3f} ± {math.sqrt(rates[m] * (1 - rates[m]) / sims):.3f}"
                     + ("" if rates[m] <= alpha + 2 * se0 else " **over**") for m in METHODS]
            lines.append(f"| {regime} | {n} | {' | '.join(cells)} |")
    lines.append(f"\nH0 true in every cell; alpha = {alpha:g}; {sims} sims per cell, R = {resamples}, "
                 f"S = {n_sentences}; **over**: rate > alpha + 2 SE0 = {alpha + 2 * se0:.3f}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit bench multiboot", description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=300, help="null comparisons per cell")
    parser.add_argument("--resamples", type=int, default=500, help="bootstrap resamples R per comparison")
    parser.add_argument("--sentences", type=int, default=200, help="test sentences S")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alpha", type=float, default=0.05)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print(table(args.sims, args.resamples, args.sentences, args.seed, args.alpha))
    print(f"\n{time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0
