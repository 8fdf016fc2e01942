"""The correlations table: a rank measure against perplexity across runs, head means, families.

Config (``correlations:`` of a study config, a list; checked against ``$defs/correlation`` of
``configs/schema.yaml``)::

    correlations:
      - name: press-rank-vs-test-ppl  # required, unique; claims refer to it
        x: press_rank                 # required, runs-table column
        y: test_ppl                   # required, runs-table column
        heads: [softmax, "gss_*"]     # optional, shell-style patterns; default every head
        corpora: [ptb]                # optional; default every corpus
        families:                     # optional head -> family grouping for the partial
          softmax-like: [softmax, sigsoftmax, gss, plif]   # correlation; a head not listed
          mixture: [mos, moc]                             # belongs to its name's prefix
                                                          # before the first "_"
        windows:                      # optional exclusion rules, reported as post hoc rows
          - {column: test_ppl, corpus: ptb, min: 56.6, max: 57.6}   # corpus optional
          - {column: test_ppl, width_from_min: 1.0}   # [lowest value, lowest + width]

Each (name, corpus) gives rows at three levels: ``runs`` (one point per ok run),
``head_means`` (one point per head: its mean x and mean y) and ``partial_family`` (runs, with
head family partialled out: both variables centred within family, so only within-family
covariation counts). Windows add the same three levels restricted to the runs inside every
applicable window, marked ``post_hoc = True`` next to the unrestricted rows.
"""

from __future__ import annotations

import fnmatch
import math

import numpy as np
import pandas as pd
from scipy import stats

from audit.config import check_section
from audit.stats.io import Settings, require_metric
from audit.stats.resample import exact_permutation_p, n_orderings, permutation_p, rowwise_corr

COLUMNS = [
    "name", "corpus", "x", "y", "level", "restriction", "post_hoc", "n", "n_heads",
    "n_families", "n_excluded", "n_outside_window", "controls", "pearson_r",
    "pearson_ci_low", "pearson_ci_high", "pearson_p", "pearson_perm_p", "pearson_z_p", "spearman_rho",
    "spearman_ci_low", "spearman_ci_high", "spearman_p", "spearman_perm_p", "spearman_z_p", "ci_level",
    "ci_method", "p_method", "perm_method", "permutation_resamples", "permutation_seed", "note",
]
LEVELS = ("runs", "head_means", "partial_family")
# Up to this many points the Spearman p is exact (all orderings enumerated, 9! = 362,880): the
# t approximation is anti-conservative there (n = 5, rho = 0.9: t gives 0.037, exact 0.083).
# R's cor.test is exact up to the same n (AS 89 with full enumeration for n <= 9).
SPEARMAN_EXACT_MAX_N = 9


def fisher_ci(r: float, n: int, level: float, n_controls: int = 0, spearman: bool = False):
    """Fisher-z confidence interval of a (partial) correlation.

    SE of z is 1 / sqrt(n - 3 - n_controls) for Pearson; for Spearman the Fieller et al.
    (1957) variance 1.06 / (n - 3 - n_controls).

    Returns:
        (low, high), NaN when n - 3 - n_controls < 1 or r is undefined.
    """
    dof = n - 3 - n_controls
    if dof < 1 or not np.isfinite(r):
        return math.nan, math.nan
    se = math.sqrt((1.06 if spearman else 1.0) / dof)
    z = math.atanh(min(max(r, -1 + 1e-15), 1 - 1e-15))
    crit = stats.norm.ppf(0.5 + level / 2)
    return math.tanh(z - crit * se), math.tanh(z + crit * se)


def fisher_p(r: float, n: int, n_controls: int = 0, spearman: bool = False) -> float:
    """Two-sided p of the Fisher z test of rho = 0: 2 P(Z > |atanh(r)| / se), se of ``fisher_ci``.

    The test ``fisher_ci`` inverts: p < 1 - level exactly when that interval excludes 0, so a
    correlation claim decided on the interval prints the p it follows from (issue 53: a claim had
    been decided by the permutation p and shown with this interval). NaN where the interval is.
    """
    dof = n - 3 - n_controls
    if dof < 1 or not np.isfinite(r):
        return math.nan
    z = math.atanh(min(max(r, -1 + 1e-15), 1 - 1e-15))
    return float(2 * stats.norm.sf(abs(z) / math.sqrt((1.06 if spearman else 1.0) / dof)))


def partial_p(r: float, n: int, n_controls: int) -> float:
    """Two-sided p of a partial correlation: t = r sqrt(df / (1 - r^2)), df = n - 2 - n_controls.

    Equals the p-value of x's coefficient in OLS y ~ x + controls (H0: partial rho = 0).
    """
    df = n - 2 - n_controls
    if df < 1 or not np.isfinite(r):
        return math.nan
    if abs(r) >= 1:
        return 0.0
    t = r * math.sqrt(df / (1 - r * r))
    return float(2 * stats.t.sf(abs(t), df))


def center_within(values: np.ndarray, strata: np.ndarray) -> np.ndarray:
    """Subtract each stratum's mean; shape (n,) -> (n,)."""
    out = values.astype(float).copy()
    for label in np.unique(strata):
        m = strata == label
        out[m] -= out[m].mean()
    return out


def correlate(x: np.ndarray, y: np.ndarray, settings: Settings, strata: np.ndarray | None = None) -> dict:
    """Pearson and Spearman with Fisher CIs, analytic and permutation p-values.

    With ``strata`` the correlations are partial (strata as dummy covariates): both variables
    (ranks over all points, for Spearman) are centred within strata and permutations stay
    within strata. H0 in every test: no (partial) association; all p-values two-sided.
    ``pearson_p`` is the t-test (df = n - 2 - k); ``spearman_p`` too for n > 9, and for
    n <= ``SPEARMAN_EXACT_MAX_N`` the exact permutation p of rho (within strata for a partial).

    Args:
        x, y: shape (n,), finite.
        strata: optional shape (n,) family labels.

    Returns:
        dict of the statistical columns (NaN where undefined) and a ``note``.
    """
    n, level = len(x), 1 - settings.alpha
    k = len(np.unique(strata)) - 1 if strata is not None else 0
    out = {f"{m}_{s}": math.nan for m in ("pearson", "spearman")
           for s in ("ci_low", "ci_high", "p", "perm_p", "z_p")}
    out.update(pearson_r=math.nan, spearman_rho=math.nan, note="")
    if n - 2 - k < 1:
        out["note"] = f"too few points: n={n} with {k} family controls"
        return out
    for method, xs, ys in (("pearson", x, y), ("spearman", stats.rankdata(x), stats.rankdata(y))):
        # tested before centring: centring a variable that is constant within every stratum
        # leaves rounding noise (1e-16), not zeros, and a correlation of noise would be reported
        if _constant(xs, strata) or _constant(ys, strata):
            out["note"] = ("constant variable: correlation undefined" if strata is None else
                           "variable constant within every family: partial correlation undefined")
            continue
        if strata is not None:
            xs, ys = center_within(xs, strata), center_within(ys, strata)
        r = float(rowwise_corr(xs, ys[None, :])[0])
        key = "pearson_r" if method == "pearson" else "spearman_rho"
        out[key] = r
        exact = method == "spearman" and n <= SPEARMAN_EXACT_MAX_N
        if exact:
            out[f"{method}_p"] = exact_permutation_p(xs, ys, rowwise_corr, strata)
        elif strata is None:
            fn = stats.pearsonr if method == "pearson" else stats.spearmanr
            out[f"{method}_p"] = float(fn(x, y)[1])
        else:
            out[f"{method}_p"] = partial_p(r, n, k)
        out[f"{method}_ci_low"], out[f"{method}_ci_high"] = fisher_ci(r, n, level, k, method == "spearman")
        out[f"{method}_z_p"] = fisher_p(r, n, k, method == "spearman")
        if exact and n_orderings(strata, n) <= settings.bootstrap_resamples:
            out[f"{method}_perm_p"] = out[f"{method}_p"]   # the same enumeration; no need to repeat it
        else:
            rng = np.random.default_rng(settings.bootstrap_seed)
            out[f"{method}_perm_p"] = permutation_p(xs, ys, rowwise_corr, settings.bootstrap_resamples, rng, strata)
    return out


def _constant(values: np.ndarray, strata: np.ndarray | None) -> bool:
    if strata is None:
        return bool(np.ptp(values) == 0)
    return all(np.ptp(values[strata == label]) == 0 for label in np.unique(strata))


def p_method(level: str, n: int) -> str:
    """How ``pearson_p`` and ``spearman_p`` of a row with n points were computed."""
    spearman = ("exact permutation (all orderings)" if n <= SPEARMAN_EXACT_MAX_N
                else "t approximation, df = n - 2")
    if level == "partial_family":
        spearman = ("exact permutation within families" if n <= SPEARMAN_EXACT_MAX_N
                    else "partial t-test on ranks, df = n - 2 - (families - 1)")
        return f"pearson: partial-correlation t-test, df = n - 2 - (families - 1); spearman: {spearman}"
    return f"pearson: t-test, df = n - 2; spearman: {spearman}"


def family_of(head: str, families: dict | None) -> str:
    """A head's family: the first ``families`` entry listing it (names or shell patterns), else
    its name before the first underscore."""
    for fam, heads in (families or {}).items():
        if any(fnmatch.fnmatchcase(head, str(pattern)) for pattern in heads):  # names or patterns
            return str(fam)
    return head.split("_", 1)[0]


def _windows(spec_windows: list[dict], corpus: str) -> list[dict]:
    """The windows (checked by the schema's ``correlation_window``) that apply to ``corpus``."""
    return [w for w in spec_windows if w.get("corpus", corpus) == corpus]


def _bound(value) -> str:
    return "-inf" if value == -np.inf else "inf" if value == np.inf else f"{value:.6g}"


def spec_rows(runs: pd.DataFrame, spec: dict, settings: Settings, source: str) -> list[dict]:
    """All rows of one ``correlations:`` entry, checked by ``check_section``."""
    for key in ("x", "y"):   # what a schema cannot say: the columns exist in the runs table
        require_metric(runs, spec[key], source, f"correlation {spec['name']!r}")
    x, y = spec["x"], spec["y"]
    rows = []
    for corpus in [str(c) for c in spec.get("corpora") or sorted(runs["corpus"].unique())]:
        sel = runs[runs["corpus"] == corpus]
        if spec.get("heads"):
            patterns = [str(h) for h in spec["heads"]]
            sel = sel[[any(fnmatch.fnmatchcase(str(h), p) for p in patterns) for h in sel["head"]]]
        usable = (sel["status"] == "ok") & np.isfinite(sel[x]) & np.isfinite(sel[y])
        base = dict(name=spec["name"], corpus=corpus, x=x, y=y, n_excluded=int((~usable).sum()))
        sel = sel[usable]
        windows = _windows(spec["windows"], corpus)
        variants = [("none", False, sel, 0)]
        if windows:
            inside, texts = np.ones(len(sel), bool), []
            for w in windows:
                col = w["column"]
                require_metric(runs, col, source, f"correlation {spec['name']!r} window")
                low, high = w.get("min", -np.inf), w.get("max", np.inf)
                if "width_from_min" in w:  # chosen relative to the best run, so post hoc by construction
                    low = float(sel[col].min()) if len(sel) else np.nan
                    high = low + float(w["width_from_min"])
                inside &= (sel[col] >= low).to_numpy() & (sel[col] <= high).to_numpy()
                texts.append(f"{col} in [{_bound(low)}, {_bound(high)}]"
                             + (f" (lowest + {w['width_from_min']})" if "width_from_min" in w else ""))
            text = "; ".join(texts)
            variants.append((text, True, sel[inside], int((~inside).sum())))
        for restriction, post_hoc, data, outside in variants:
            for level in LEVELS:
                rows.append({**base, **_level_row(data, x, y, level, spec.get("families"), settings),
                             "restriction": restriction, "post_hoc": post_hoc, "n_outside_window": outside})
    return rows


def _level_row(data: pd.DataFrame, x: str, y: str, level: str, families, settings: Settings) -> dict:
    fam = np.array([family_of(h, families) for h in data["head"]], dtype=object)
    row = dict(level=level, n_heads=int(data["head"].nunique()), n_families=len(set(fam)),
               ci_level=1 - settings.alpha, ci_method="fisher-z",
               perm_method="permutation of y, two-sided P(|r*| >= |r|); exact enumeration if "
                           "n! <= resamples, else monte-carlo (1 + hits) / (1 + resamples)",
               permutation_resamples=settings.bootstrap_resamples,
               permutation_seed=settings.bootstrap_seed, controls="")
    if level == "head_means":
        means = data.groupby("head", sort=True)[[x, y]].mean()
        xs, ys, strata = means[x].to_numpy(), means[y].to_numpy(), None
    elif level == "runs":
        xs, ys, strata = data[x].to_numpy(), data[y].to_numpy(), None
    else:
        xs, ys, strata = data[x].to_numpy(), data[y].to_numpy(), fam
        row["controls"] = f"head family ({', '.join(sorted(set(fam)))})"
        row["perm_method"] = ("permutation of y within families (x fixed; both centred within family), "
                              "two-sided P(|r*| >= |r|); exact enumeration if the product of the "
                              "families' n! <= resamples, else monte-carlo (1 + hits) / (1 + resamples)")
    row["n"] = len(xs)
    row["p_method"] = p_method(level, len(xs))
    row.update(correlate(np.asarray(xs, float), np.asarray(ys, float), settings, strata))
    return row


def correlations_table(runs: pd.DataFrame, config: dict, settings: Settings,
                       source: str = "config") -> pd.DataFrame:
    """The full correlations table for the ``correlations:`` section of ``config``.

    Raises:
        AuditError: a section the schema rejects, a name declared twice, a missing column.
    """
    specs = check_section("correlations", config.get("correlations"), source)
    rows = [r for spec in specs for r in spec_rows(runs, spec, settings, source)]
    return pd.DataFrame(rows, columns=COLUMNS)
