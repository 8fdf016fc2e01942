"""Benchmark ``python -m audit bench argmax``: the cost of each argmax tier at PTB paper size.

The layer (V = 10,000 words, d = 400 by default) is drawn from a seeded Generator to look like a
trained softmax head, as no paper-size trained model is at hand:

- W: entries N(0, scale^2), scale 0.1 by default (the tied embedding's U(-0.1, 0.1) init has std
  0.058; training spreads it);
- b: the log of a Zipf(1) unigram over the V ranks (a trained softmax's bias tracks the
  log-frequency of its word), which spans log V = 9.2 nats;
- ``planted`` tokens made unargmaxable on purpose: w_c the mean of three other rows and b_c the
  mean of their biases, so l_c(x) <= max of theirs everywhere. No single rival dominates c and no
  witness exists, so only the LP can prove them: the bench times the LP on exactly the tokens
  it exists for. At this size random rows are all argmaxable (the witness margin ~ 240 x scale
  beats the bias range), as Grivas et al. found for trained models.

Printed per tier: tokens settled and CPU seconds (``time.process_time``); then seconds per LP, the cheap tiers' total and
the LP budget that keeps the whole check within ``--minutes`` (10 CPU-minutes: issue 24).
Run single-threaded (OMP_NUM_THREADS=1): CPU seconds of one core.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from audit.evaluate import argmax


def layer(vocab: int, d: int, scale: float, planted: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(W (V, d), b (V,), planted token ids) as the module docstring says."""
    rng = np.random.default_rng(seed)
    W = rng.normal(scale=scale, size=(vocab, d))
    ranks = np.arange(1, vocab + 1)
    b = np.log(1.0 / ranks) - np.log(np.sum(1.0 / ranks))
    tokens = rng.choice(vocab, size=planted, replace=False)
    others = np.setdiff1d(np.arange(vocab), tokens)
    for c in tokens:
        parents = rng.choice(others, size=3, replace=False)
        W[c], b[c] = W[parents].mean(axis=0), b[parents].mean()
    return W, b, np.sort(tokens)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit bench argmax", description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=400)
    parser.add_argument("--scale", type=float, default=0.1, help="std of W's entries")
    parser.add_argument("--planted", type=int, default=10, help="tokens made unargmaxable (inside the hull)")
    parser.add_argument("--minutes", type=float, default=10.0, help="CPU budget of the whole check")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    W, b, planted = layer(args.vocab, args.dim, args.scale, args.planted, args.seed)
    wall = time.perf_counter()
    result = argmax.check(W, b, lp_budget=None)
    wall = time.perf_counter() - wall
    settled = {"witness": result.witness, "dominated": result.dominated, "braid": result.braid,
               "lp": result.lp_argmaxable + result.lp_unargmaxable}
    print(f"V = {args.vocab}, d = {args.dim}, W ~ N(0, {args.scale}^2), b = log Zipf(1), "
          f"{args.planted} planted unargmaxable tokens, box [-1, 1]^d")
    print("| tier | tokens settled | CPU seconds |\n|---|---|---|")
    for tier, n in settled.items():
        print(f"| {tier} | {n} | {result.seconds[tier]:.1f} |")
    print(f"| all | {sum(settled.values())} | {sum(result.seconds.values()):.1f} (wall {wall:.1f}) |")
    found = bool(np.isin(planted, result.unargmaxable).all())
    print(f"unargmaxable: {result.unargmaxable.size} (the planted ones among them: {'yes' if found else 'NO'}), "
          f"unresolved: {result.unresolved.size}")
    lps = settled["lp"]
    if lps:
        per_lp = result.seconds["lp"] / lps
        cheap = sum(s for tier, s in result.seconds.items() if tier != "lp")
        budget = max(0, int((60 * args.minutes - cheap) // per_lp))
        print(f"CPU seconds per LP: {per_lp:.1f}; cheap tiers: {cheap:.1f} s; LP budget within "
              f"{args.minutes:g} minutes: {budget} tokens (evaluate.argmax.lp_budget)")
    return 0 if found else 1
