"""Word-similarity tables: the wins matrix and paired-bootstrap differences in Spearman rho.

``wordsim_wins.csv`` (from the runs table's ``wordsim_<benchmark>`` columns): for every ordered
head pair (i, j) in a corpus, the number of benchmarks where head i's mean rho over seeds
exceeds head j's (LK-paper Fig. 4), plus losses and ties.

``wordsim_diffs.csv`` (from the per-pair table): for every unordered head pair and benchmark,
rho_a - rho_b, where rho_h is head h's mean over seeds of Spearman(gold, cosine). Two heads
scored against the same human ratings give dependent correlations, so the CI comes from a
paired bootstrap: each resample draws the word pairs once (shared by every head, which keeps
the dependence) and, independently per head, the seeds. Independent-sample tests would be wrong.
"""

from __future__ import annotations

import math
import warnings
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from audit.stats.io import Settings
from audit.stats.decision import Gate, Rule, Verdict, decides, record
from audit.stats.multiplicity import METHOD, adjust, step_alphas, step_text
from audit.stats.resample import chunk_sizes, percentile_ci

PREFIX = "wordsim_"
WINS_COLUMNS = ["corpus", "head_i", "head_j", "wins", "losses", "ties", "n_benchmarks",
                "n_seeds_i", "n_seeds_j", "n_failed_i", "n_failed_j", "statistic", "note"]
DIFF_COLUMNS = [
    "family", "family_size", "family_dropped", "adj_method", "corpus", "benchmark", "head_a",
    "head_b", "n_seeds_a", "n_seeds_b", "n_failed_a", "n_failed_b", "n_pairs", "n_pairs_dropped",
    "rho_a", "rho_b", "diff", "boot_se", "diff_ci_low", "diff_ci_high", "ci_level", "ci_how", "pct_ci_low",
    "pct_ci_high", "pct_ci_level", "test", "sidedness", "boot_p", "p_adj", "ci_method", "bootstrap_seed",
    "bootstrap_resamples", "alpha", "min_seeds", "verdict", "reason", "guard",
]


def _heads(frame: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(frame["head"]))  # order of first appearance


def wins_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Pairwise wins over benchmarks from per-seed rho columns of the runs table.

    Returns:
        One row per corpus and ordered head pair; empty (with columns) if the runs table has
        no ``wordsim_*`` column.
    """
    cols = [c for c in runs.columns if c.startswith(PREFIX)]
    rows = []
    for corpus in sorted(runs["corpus"].unique()) if cols else []:
        sel = runs[runs["corpus"] == corpus]
        ok = sel[sel["status"] == "ok"]
        means = ok.groupby("head", sort=False)[cols].mean()   # NaN rho of a run is skipped
        counts = ok.groupby("head", sort=False)[cols].count().min(axis=1)
        failed = sel[sel["status"] == "failed"].groupby("head").size()
        for hi in _heads(sel):
            for hj in _heads(sel):
                if hi == hj:
                    continue
                mi = means.loc[hi] if hi in means.index else pd.Series(np.nan, index=cols)
                mj = means.loc[hj] if hj in means.index else pd.Series(np.nan, index=cols)
                both = np.isfinite(mi.to_numpy()) & np.isfinite(mj.to_numpy())
                a, b = mi.to_numpy()[both], mj.to_numpy()[both]
                rows.append(dict(
                    corpus=corpus, head_i=hi, head_j=hj, wins=int((a > b).sum()),
                    losses=int((a < b).sum()), ties=int((a == b).sum()), n_benchmarks=int(both.sum()),
                    n_seeds_i=int(counts.get(hi, 0)), n_seeds_j=int(counts.get(hj, 0)),
                    n_failed_i=int(failed.get(hi, 0)), n_failed_j=int(failed.get(hj, 0)),
                    statistic="mean over seeds of Spearman rho",
                    note="" if both.sum() == len(cols) else f"{len(cols) - both.sum()} benchmarks lack a rho"))
    return pd.DataFrame(rows, columns=WINS_COLUMNS)


class WeightedRanker:
    """Average ranks of one value vector under bootstrap weights, without re-sorting.

    A bootstrap resample of P items is a count vector w (item j drawn w_j times). Sorting the
    values once, the average rank of item j inside the resample is (#drawn items below j's
    value) + (#drawn items tied with it + 1) / 2, a cumulative sum over the sorted weights.
    This is exactly what ``scipy.stats.rankdata`` gives on the expanded resample, at O(P)
    instead of O(P log P) per resample: the word-similarity bootstrap is dominated by ranking.
    """

    def __init__(self, values: np.ndarray):
        self.order = np.argsort(values, kind="stable")
        v = values[self.order]
        new = np.r_[True, v[1:] != v[:-1]]                      # first position of each tie group
        self.ties = not new.all()
        group = np.cumsum(new) - 1
        starts = np.flatnonzero(new)
        ends = np.r_[starts[1:], len(v)] - 1
        self.first, self.last = starts[group], ends[group]      # group bounds per sorted position

    def ranks_sorted(self, w_sorted: np.ndarray) -> np.ndarray:
        """Ranks in sorted order; w_sorted has shape (R, P) = weights[:, self.order]."""
        cs = np.cumsum(w_sorted, axis=1)
        if not self.ties:
            return cs - (w_sorted - 1) / 2
        below = cs[:, self.first] - w_sorted[:, self.first]
        return below + (cs[:, self.last] - below + 1) / 2


def resampled_spearman(gold: np.ndarray, cosine: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Spearman rho (average ranks for ties) of each seed on each resample of word pairs.

    Args:
        gold: shape (P,), human ratings.
        cosine: shape (S, P), one row per seed.
        weights: shape (R, P), how often each pair is drawn in each resample (rows sum to P).

    Returns:
        shape (R, S); rho is the weighted Pearson correlation of the two rank vectors, whose
        weighted mean is (P + 1) / 2 by construction.
    """
    mid = (weights.shape[1] + 1) / 2
    g = WeightedRanker(gold)
    dev_g = np.empty(weights.shape)
    dev_g[:, g.order] = g.ranks_sorted(weights[:, g.order]) - mid
    w_dev_g = weights * dev_g
    ss_g = (w_dev_g * dev_g).sum(axis=1)
    out = np.empty((weights.shape[0], cosine.shape[0]))
    for s, cos in enumerate(cosine):
        c = WeightedRanker(cos)
        w_sorted = np.take(weights, c.order, axis=1)            # np.take: faster than [:, order]
        dev_c = c.ranks_sorted(w_sorted)
        dev_c -= mid                                            # computed in cosine order
        num = np.einsum("ij,ij->i", np.take(w_dev_g, c.order, axis=1), dev_c)
        ss_c = np.einsum("ij,ij,ij->i", w_sorted, dev_c, dev_c)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[:, s] = num / np.sqrt(ss_g * ss_c)
    return out


def _matrix(frame: pd.DataFrame):
    """Common word pairs of every run of one corpus and benchmark: gold (P,), cos {head: (S, P)}."""
    frame = frame.drop_duplicates(["head", "seed", "word1", "word2"], keep="last")  # as a dict would
    wide = frame.pivot(index=["word1", "word2"], columns=["head", "seed"], values="cosine")
    common = wide.dropna()
    gold = frame.groupby(["word1", "word2"])["gold"].last().loc[common.index].to_numpy()
    cos = {h: common[h].to_numpy().T for h in _heads(frame)}
    return gold, cos, len(wide) - len(common)


def diffs_table(pairs: pd.DataFrame, settings: Settings, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Paired-bootstrap differences in mean Spearman rho for every head pair and benchmark.

    Args:
        pairs: the per-pair table (``io.load_pairs``).
        settings: alpha, resamples, seed, min_seeds.
        runs: optional runs table; its failed runs are excluded from ``pairs`` and counted.

    Returns:
        The table of ``DIFF_COLUMNS``. H0 per row: equal expected mean rho of the two heads;
        two-sided; ``boot_p`` = 2 (1 - Phi(|diff| / SE)), SE the SD of the bootstrap
        differences; the CI is the percentile interval of the same resamples.
    """
    failed = pd.Series(dtype=int)
    if runs is not None:
        bad = runs[runs["status"] == "failed"]
        failed = bad.groupby(["corpus", "head"]).size()
        drop = pairs.set_index(["corpus", "head", "seed"]).index.isin(bad.set_index(["corpus", "head", "seed"]).index)
        pairs = pairs[~drop]
    level, R = 1 - settings.alpha, settings.bootstrap_resamples
    rows = []
    for (corpus, bench), frame in pairs.groupby(["corpus", "benchmark"], sort=True):
        gold, cos, dropped = _matrix(frame)
        heads = list(cos)
        rng = np.random.default_rng(settings.bootstrap_seed)
        P = len(gold)
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.ConstantInputWarning)   # said in the reason instead
            seed_rho = {h: np.array([stats.spearmanr(gold, c).statistic for c in cos[h]]) if P >= 3
                        else np.full(cos[h].shape[0], math.nan) for h in heads}
        point = {h: float(np.mean(r)) if P >= 3 else math.nan for h, r in seed_rho.items()}
        boot = {h: np.empty(R) for h in heads}
        if P >= 3:
            start = 0
            for r in chunk_sizes(R, P * 4):
                idx = rng.integers(0, P, size=(r, P))                    # pairs, shared by heads
                weights = np.bincount((idx + P * np.arange(r)[:, None]).ravel(),
                                      minlength=r * P).reshape(r, P).astype(float)
                for h in heads:
                    rho = resampled_spearman(gold, cos[h], weights)       # (r, S)
                    pick = rng.integers(0, rho.shape[1], size=rho.shape)  # seeds, per head
                    boot[h][start:start + r] = np.take_along_axis(rho, pick, 1).mean(axis=1)
                start += r
        for ha, hb in combinations(heads, 2):
            d = boot[ha] - boot[hb] if P >= 3 else np.full(R, np.nan)
            low, high = percentile_ci(d, level)
            # p from z = diff / bootstrap SE: a percentile-count p cannot go below 2 / (R + 1),
            # which a Holm family of 13 benchmarks x all head pairs would never let pass
            finite = d[np.isfinite(d)]
            se = finite.std(ddof=1) if len(finite) > 1 else math.nan
            p = float(2 * stats.norm.sf(abs(point[ha] - point[hb]) / se)) if se > 0 else math.nan
            undefined = ""
            if P >= 3 and not np.isfinite(p):   # said as such, never read as "not significant"
                flat = [f"{h} in {int(np.isnan(seed_rho[h]).sum())} of {len(seed_rho[h])} seed(s)"
                        for h in (ha, hb) if np.isnan(seed_rho[h]).any()]
                undefined = Gate.UNDEFINED.because(
                    "Spearman rho has no value for " + " and ".join(flat)
                    + " (constant cosines or gold ratings over the common word pairs)" if flat else
                    "the bootstrap differences have no spread (SE = 0), so no z-test")
            rows.append(dict(
                family=f"wordsim-diffs[corpus={corpus}]", corpus=corpus, benchmark=bench,
                head_a=ha, head_b=hb, n_seeds_a=cos[ha].shape[0], n_seeds_b=cos[hb].shape[0],
                n_failed_a=int(failed.get((corpus, ha), 0)), n_failed_b=int(failed.get((corpus, hb), 0)),
                n_pairs=P, n_pairs_dropped=dropped, rho_a=point[ha], rho_b=point[hb],
                diff=point[ha] - point[hb], boot_se=se, pct_ci_low=low, pct_ci_high=high, pct_ci_level=level,
                test="paired bootstrap over word pairs (shared) and seeds (per head); z = diff / bootstrap SE",
                sidedness="two-sided", boot_p=p,
                ci_method="normal: diff +- z SE (the interval the z test inverts); pct_ci: percentile bootstrap, descriptive",
                bootstrap_seed=settings.bootstrap_seed, bootstrap_resamples=R,
                alpha=settings.alpha, min_seeds=settings.min_seeds, undefined=undefined))
    if not rows:
        return pd.DataFrame(columns=DIFF_COLUMNS)
    df = pd.DataFrame(rows)
    eligible = (df[["n_seeds_a", "n_seeds_b"]].min(axis=1) >= settings.min_seeds) & (df["n_pairs"] >= 3)
    df["p_adj"], df["family_size"], df["family_dropped"] = np.nan, 0, 0
    df["ci_level"], df["ci_how"] = 1 - settings.alpha, f"1 - alpha = {1 - settings.alpha:.4g} (no test: no adjustment)"
    for _, idx in df.groupby("family").groups.items():
        p = df.loc[idx, "boot_p"].where(eligible.loc[idx])
        adj, size, dropped = adjust(p)
        df.loc[idx, "p_adj"], df.loc[idx, "family_size"], df.loc[idx, "family_dropped"] = adj, size, dropped
        steps = step_alphas(p, settings.alpha)
        tested = np.isfinite(steps)
        df.loc[idx[tested], "ci_level"] = 1 - steps[tested]
        df.loc[idx[tested], "ci_how"] = [step_text(a, settings.alpha, size) for a in steps[tested]]
    # the interval the z test inverts, at each test's Holm step level: it excludes 0 exactly when
    # p_adj < alpha (issue 53: the verdict had been printed beside the percentile interval)
    half = stats.norm.ppf(1 - (1 - df["ci_level"].astype(float)) / 2) * df["boot_se"].astype(float)
    df["diff_ci_low"], df["diff_ci_high"] = df["diff"] - half, df["diff"] + half
    df["adj_method"] = METHOD
    df["guard"] = ""   # audit.stats.guard fills it for a row drawn from an arm it flags
    df["verdict"], df["reason"] = zip(*[_verdict(r, settings) for r in df.to_dict("records")])
    for row in df.to_dict("records"):   # each row's record: raises if its verdict and interval disagree
        record(row, "diff_ci_low", "diff_ci_high", "ci_level", Rule.EXCLUDES, math.nan,
               Verdict.INCONCLUSIVE if row["verdict"] == Verdict.INCONCLUSIVE else Verdict.A_BETTER)
    return df[DIFF_COLUMNS]


def _verdict(row: dict, settings: Settings) -> tuple[str, str]:
    if row["n_pairs"] < 3:
        return Verdict.INCONCLUSIVE, f"too few word pairs: {row['n_pairs']} found in every run"
    if min(row["n_seeds_a"], row["n_seeds_b"]) < settings.min_seeds:
        return Verdict.INCONCLUSIVE, Gate.TOO_FEW_SEEDS.because(
            f"n_seeds_a={row['n_seeds_a']}, n_seeds_b={row['n_seeds_b']} < min_seeds={settings.min_seeds}")
    if row["undefined"]:
        return Verdict.INCONCLUSIVE, row["undefined"]
    if decides(Rule.EXCLUDES, row["diff_ci_low"], row["diff_ci_high"]):   # p_adj < alpha, on the interval
        return (Verdict.A_BETTER if row["diff"] > 0 else Verdict.B_BETTER), (f"bootstrap p_adj={row['p_adj']:.3g} < "
                                                                 f"{settings.alpha:g} (its {row['ci_level']:.4g} "
                                                                 f"interval excludes 0)")
    return Verdict.INCONCLUSIVE, (f"not significant (bootstrap p_adj={row['p_adj']:.3g}); no equivalence "
                            "margin for rho, so this is not evidence of equal similarity")
