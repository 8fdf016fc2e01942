"""Error rates and seeds of the group-sequential design, by simulating whole studies.

``python -m audit bench sequential --sims N --seed S [--initial 5 --step 5 --max 30 ...]``;
``--compare`` compares candidate designs instead (``audit.bench.sequential_compare``).

Each scenario is one corpus of LK's softmax family: softmax plus SS, GSS, PLIF and MoS, each
head compared with softmax on test perplexity, the four comparisons one Holm family. Seeds of
arm h are drawn N(mean_h, sd_h) with the published 10-seed means and SDs (LK-SM Table 1;
``--effects table2`` uses LK-paper Table 2's 11-seed values; see shared/reference/protocol.md
section 6). The ``null`` scenario gives every head softmax's mean (keeping each head's SD, so
Welch's unequal variances are exercised). Every simulated study runs the same stop rules as
the workflow (``audit.stats.sequential.stopping.replay``).

Prints one CSV row per scenario and comparison:
  scenario, comparison, sims, reject_rate, mc_se, power, mean_seeds_per_arm, mean_stages,
  fixed_seeds_same_power, fixed10_power, seeds_study, seeds_study_fixed10, stops
``reject_rate`` is the family-wise rate (any comparison rejected) on ``family`` rows, else the
comparison's; ``power`` counts rejections in the true direction (blank under the null);
``fixed_seeds_same_power`` is the fewest seeds per arm with which the fixed design (Welch,
Holm over the family) reaches the same power on the same simulated seeds (common random
numbers); ``seeds_study`` is the mean number of runs of the whole study.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from audit.bench import sequential_compare
from audit.bench.sequential_sim import EFFECTS, HEADS, same_power, simulate
from audit.stats.sequential import boundaries as seq, stopping

COLUMNS = ["scenario", "comparison", "sims", "reject_rate", "mc_se", "power", "mean_seeds_per_arm",
           "mean_stages", "fixed_seeds_same_power", "fixed10_power", "seeds_study",
           "seeds_study_fixed10", "stops"]


def _fmt(x) -> str:
    if isinstance(x, str):
        return x
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return ""
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def rows(name: str, res: dict, sims: int, null: bool, arms: int) -> list[list]:
    """The CSV rows of one scenario: one per comparison, then the family."""
    out, seeds = res["out"], res["seeds"]
    table = []

    for i, head in enumerate(HEADS[1:]):
        rej = float(out["rejected"][:, i].mean())
        power = float(res["right"][:, i].mean())
        stops = ";".join(f"{stopping.DECISIONS[c]}={np.mean(out['decision'][:, i] == c):.3f}"
                         for c in range(1, len(stopping.DECISIONS)) if np.any(out["decision"][:, i] == c))
        table.append([name, f"{head}-vs-softmax", sims, rej, math.sqrt(rej * (1 - rej) / sims),
                      math.nan if null else power, float(seeds[:, i].mean()), float(out["stop"][:, i].mean() + 1),
                      "" if null else same_power(res, power, i), math.nan if null else float(res["fixed10"][i]),
                      "", "", stops])
    fwer = float(out["rejected"].any(-1).mean())
    table.append([name, "family", sims, fwer, math.sqrt(fwer * (1 - fwer) / sims),
                  math.nan if null else float(res["right"].all(-1).mean()), float(res["study"].mean() / arms),
                  float(out["stop"].max(-1).mean() + 1), "", "", float(res["study"].mean()), 10 * arms, ""])
    return table


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit bench sequential", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sims", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--initial", type=int, default=stopping.Design.initial)
    parser.add_argument("--step", type=int, default=stopping.Design.step)
    parser.add_argument("--max", type=int, default=stopping.Design.maximum)
    parser.add_argument("--spending", choices=list(seq.SPENDING), default=stopping.Design.spending)
    parser.add_argument("--gamma", type=float, default=stopping.Design.gamma,
                        help="Hwang-Shih-DeCani gamma (with --spending hsd)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--futility-power", type=float, default=0.1)
    parser.add_argument("--margin", type=float, default=math.nan, help="equivalence margin in ppl (default: none)")
    parser.add_argument("--effects", choices=sorted(EFFECTS), default="table1")
    parser.add_argument("--compare", action="store_true",
                        help="compare the candidate designs (audit/bench/sequential_compare.py) instead; "
                             "ignores the design flags but --alpha, --futility-power and --margin")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.compare:
        print(sequential_compare.main(args.sims, args.seed, args.effects, args.alpha, args.futility_power,
                                      args.margin))
        print(f"# {len(sequential_compare.CANDIDATES)} designs, effects {args.effects}, sims {args.sims}, "
              f"seed {args.seed}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
        return 0
    design = stopping.Design(args.initial, args.step, args.max, args.spending, args.alpha, args.futility_power,
                             args.gamma)
    rng = np.random.default_rng(args.seed)
    spending = f"hsd (gamma {design.gamma:g})" if design.spending == "hsd" else design.spending
    print(f"# design: seeds per arm {design.sizes}, {spending} spending, alpha {design.alpha}, "
          f"futility_power {design.futility_power}, margin {_fmt(args.margin) or 'none'}; "
          f"effects {args.effects}; sims {args.sims}, seed {args.seed}", file=sys.stderr)
    print(",".join(COLUMNS))
    for corpus, arms in EFFECTS[args.effects].items():
        means, sds = zip(*arms)
        for null in (True, False):
            mu = [means[0]] * len(means) if null else list(means)
            res = simulate(mu, sds, design, args.sims, rng, args.margin)
            name = f"{corpus}-{'null' if null else args.effects}"
            for row in rows(name, res, args.sims, null, len(means)):
                print(",".join(_fmt(v) for v in row))
    print(f"# {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0
