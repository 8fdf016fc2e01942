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

from audit.stats.sequential import boundaries as seq, stopping

HEADS = ("softmax", "ss", "gss", "plif", "mos")
# test perplexity mean, SD per head (order of HEADS): shared/reference/protocol.md section 6
EFFECTS = {
    "table1": {"ptb": ((57.08, 0.10), (57.03, 0.15), (57.02, 0.13), (56.81, 0.11), (54.88, 0.26)),
               "wt2": ((64.63, 0.09), (64.35, 0.18), (64.51, 0.13), (64.15, 0.17), (61.97, 0.43))},
    "table2": {"ptb": ((57.08, 0.09), (57.05, 0.15), (57.00, 0.14), (56.80, 0.11), (54.91, 0.26)),
               "wt2": ((64.63, 0.08), (64.35, 0.17), (64.50, 0.13), (64.16, 0.17), (61.96, 0.40))},
}
COLUMNS = ["scenario", "comparison", "sims", "reject_rate", "mc_se", "power", "mean_seeds_per_arm",
           "mean_stages", "fixed_seeds_same_power", "fixed10_power", "seeds_study",
           "seeds_study_fixed10", "stops"]


def prefix_stats(x: np.ndarray, sizes) -> tuple[np.ndarray, np.ndarray]:
    """Means and sample variances of the first n seeds, for each n in ``sizes``.

    Args: x (..., n_max). Returns: (mean, var), each (..., len(sizes)).
    """
    n = np.asarray(sizes)
    s1, s2 = np.cumsum(x, -1)[..., n - 1], np.cumsum(x * x, -1)[..., n - 1]
    mean = s1 / n
    return mean, np.maximum(s2 - n * mean * mean, 0.0) / (n - 1)


def looks(draws: np.ndarray, sizes, margin: float) -> dict:
    """Welch statistics of every head (arms 1..) against arm 0 after each stage size.

    Args: draws (N, arms, n_max). Returns: dict of (N, arms - 1, len(sizes)) arrays.
    """
    # centre on the baseline's mean first: perplexities ~57 with SDs ~0.1 would lose digits in
    # the sum-of-squares variance
    x = draws - draws[:, :1, :1]
    mean, var = prefix_stats(x, sizes)
    n = np.asarray(sizes, float)
    return stopping.welch_arrays(mean[:, 1:], var[:, 1:], n, mean[:, :1], var[:, :1], n, margin)


def fixed_power(draws, truth, alpha: float, n_values) -> np.ndarray:
    """Power per comparison of the fixed design (Welch, Holm within the family) with n seeds.

    Returns: (len(n_values), arms - 1), the rate of rejections in the true direction.
    """
    w = looks(draws, n_values, np.nan)
    m = draws.shape[1] - 1
    out = np.zeros((len(n_values), m))
    levels = alpha / np.arange(1, m + 1)
    for j in range(len(n_values)):
        p = w["p"][..., j]
        rejected = stopping.holm(p[..., None] < levels, np.isfinite(p))
        out[j] = (rejected & (np.sign(w["diff"][..., j]) == np.sign(truth))).mean(0)
    return out


def simulate(means, sds, design: stopping.Design, sims: int, rng: np.random.Generator,
             margin: float = np.nan, fixed_max: int = 60) -> dict:
    """Simulate ``sims`` studies of one family; returns per-comparison and study results."""
    means, sds = np.asarray(means, float), np.asarray(sds, float)
    sizes = design.sizes
    n_draw = max(design.maximum, fixed_max)
    draws = means[None, :, None] + sds[None, :, None] * rng.standard_normal((sims, len(means), n_draw))
    m = len(means) - 1
    w = looks(draws[..., : design.maximum], sizes, margin)
    t = np.asarray(sizes, float) / design.maximum
    eff = stopping.level_table(t, design, m, sides=2, final=True)
    eq = stopping.level_table(t, design, m, sides=1, final=True)
    out = stopping.replay(w["p"], w["p_tost"], w["diff"], w["se"], w["info"], eff, eq, design,
                          len(sizes) - 1, margin)
    truth = means[1:] - means[0]
    seeds = np.asarray(sizes)[out["stop"]]                      # (sims, m) seeds per arm at stop
    diff_at_stop = np.take_along_axis(w["diff"], out["stop"][..., None], -1)[..., 0]
    right = out["rejected"] & (np.sign(diff_at_stop) == np.sign(truth))
    study = seeds.sum(-1) + seeds.max(-1)                       # heads + the shared softmax arm
    n_values = np.arange(2, n_draw + 1)
    fixed = fixed_power(draws, truth, design.alpha, n_values)
    return dict(out=out, seeds=seeds, right=right, study=study, truth=truth, fixed=fixed,
                n_values=n_values, fixed10=fixed_power(draws[..., :10], truth, design.alpha, [10])[0])


def _fmt(x) -> str:
    if isinstance(x, str):
        return x
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return ""
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def same_power(res: dict, power: float, col: int):
    """The fewest seeds per arm with which the fixed design reaches ``power`` on comparison
    ``col`` (on the same simulated seeds); ``">60"`` (the most drawn) when none does."""
    reach = np.flatnonzero(res["fixed"][:, col] >= power)
    return int(res["n_values"][reach[0]]) if reach.size else f">{res['n_values'][-1]}"


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
        from audit.bench import sequential_compare

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
