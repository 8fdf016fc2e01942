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

Then the witness search of the heads without an exact test (``audit.evaluate.argmax_search``) on
PTB paper size's MoS (``--experts`` 15, decoder d = ``--mixture-dim`` 280 on the same kind of
seeded W and b, input d' = ``--mixture-input`` 620 in [-1, 1]^d', the latent layer at PyTorch's
init), with ``--search-planted`` tokens planted as above: l_c is the mean of three words' logits
in every expert, so exp(l_c) <= their mean (convexity), p_c <= the mean of their p in every
component and in the mixture, and no input makes c the argmax. The search never certifies them
(checked) and runs every step on them: their CPU seconds per token are the worst case, which
bounds a whole head's cost and gives the token budget (``evaluate.argmax.search_tokens``) within
``--minutes``. A random sample of the other tokens shows the common case (random rows are easy).
Run single-threaded (OMP_NUM_THREADS=1): CPU seconds of one core.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from audit.config import check_section
from audit.evaluate import argmax, argmax_search


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


def mixture_head(W: np.ndarray, b: np.ndarray, experts: int, d_in: int, seed: int):
    """A MoS head (eval mode) with decoder W (V, d), bias b and a seeded latent layer d_in -> K d."""
    import torch

    from audit.bench import picks
    from audit.model.heads import HeadSpec, build_head

    torch.manual_seed(seed)
    embedding = torch.nn.Embedding(*W.shape)
    embedding.weight.data = torch.from_numpy(W).float()
    options = {"experts": experts, "dropoutl": 0.0}
    head = build_head(picks.latent_mixture(), HeadSpec(d_in=d_in, embedding=embedding, options=options))
    head.bias.data = torch.from_numpy(b).float()
    return head.eval()


def search_report(args) -> bool:
    """Print the witness search's cost on a paper-size MoS head (module docstring); whether it
    certified none of the planted tokens."""
    options = check_section("evaluate", {}, "evaluate options")["argmax"]
    W, b, planted = layer(args.vocab, args.mixture_dim, args.scale, args.search_planted, args.seed)
    head = mixture_head(W, b, args.experts, args.mixture_input, args.seed)
    rest = np.setdiff1d(np.arange(args.vocab), planted)
    sample = np.random.default_rng(args.seed).choice(rest, size=min(args.search_sample, rest.size), replace=False)
    easy = argmax_search.search(head, 1.0, args.mixture_input, steps=args.search_steps, seed=args.seed, tokens=sample)
    hard = argmax_search.search(head, 1.0, args.mixture_input, steps=args.search_steps, seed=args.seed, tokens=planted)
    worst = hard.seconds / max(1, planted.size)
    print(f"\nwitness search: MoS, V = {args.vocab}, {args.experts} experts, d = {args.mixture_dim}, "
          f"d' = {args.mixture_input}, box [-1, 1]^d', {args.search_steps} steps; "
          f"{planted.size} planted unargmaxable tokens (w_c, b_c the mean of three others': p_c <= their max)")
    print("| tokens | searched | certified | CPU seconds | per token |\n|---|---|---|---|---|")
    print(f"| random sample | {sample.size} | {easy.argmaxable.size} | {easy.seconds:.1f} | "
          f"{easy.seconds / max(1, sample.size):.3f} |")
    print(f"| planted (every step runs: the worst case) | {planted.size} | {hard.argmaxable.size} | "
          f"{hard.seconds:.1f} | {worst:.3f} |")
    default = options["search_tokens"]
    default = args.vocab if default == "all" else min(args.vocab, default)
    print(f"worst case: all {args.vocab} tokens {worst * args.vocab / 60:.1f} CPU-minutes; the default "
          f"search_tokens = {options['search_tokens']}: {worst * default / 60:.1f} CPU-minutes; within "
          f"{args.minutes:g} minutes: {int(60 * args.minutes // worst) if worst else args.vocab} tokens "
          f"(evaluate.argmax.search_tokens)")
    wrong = int(np.isin(planted, hard.argmaxable).sum())
    print(f"planted tokens certified (must be 0): {wrong}")
    return wrong == 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit bench argmax", description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=400)
    parser.add_argument("--scale", type=float, default=0.1, help="std of W's entries")
    parser.add_argument("--planted", type=int, default=10, help="tokens made unargmaxable (inside the hull)")
    parser.add_argument("--minutes", type=float, default=10.0, help="CPU budget of the whole check")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--experts", type=int, default=15, help="witness search: MoS experts K")
    parser.add_argument("--mixture-dim", type=int, default=280, help="witness search: MoS decoder size d")
    parser.add_argument("--mixture-input", type=int, default=620, help="witness search: MoS input size d'")
    parser.add_argument("--search-steps", type=int, default=None, help="default: evaluate.argmax.search_steps")
    parser.add_argument("--search-sample", type=int, default=100, help="random tokens the timed search runs on")
    parser.add_argument("--search-planted", type=int, default=50, help="witness search: planted unargmaxable tokens")
    parser.add_argument("--no-search", action="store_true", help="the exact tiers only")
    parser.add_argument("--box", type=float, default=1.0,
                        help="half-width a of the input box [-a, a]^d (1: the AWD-LSTM's; 100: Grivas et al.'s, "
                             "the evaluation's second pass over the exact heads)")
    args = parser.parse_args(argv)
    if args.search_steps is None:
        args.search_steps = check_section("evaluate", {}, "evaluate options")["argmax"]["search_steps"]
    W, b, planted = layer(args.vocab, args.dim, args.scale, args.planted, args.seed)
    wall = time.perf_counter()
    result = argmax.check(W, b, box=args.box, lp_budget=None)
    wall = time.perf_counter() - wall
    settled = {"witness": result.witness, "dominated": result.dominated, "braid": result.braid,
               "lp": result.lp_argmaxable + result.lp_unargmaxable}
    print(f"V = {args.vocab}, d = {args.dim}, W ~ N(0, {args.scale}^2), b = log Zipf(1), "
          f"{args.planted} planted unargmaxable tokens, box [-{args.box:g}, {args.box:g}]^d")
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
        print(f"CPU seconds per LP: {per_lp:.2f}; cheap tiers: {cheap:.1f} s; LP budget within "
              f"{args.minutes:g} minutes: {budget} tokens (evaluate.argmax.lp_budget)")
    sound = True if args.no_search else search_report(args)
    return 0 if found and sound else 1
