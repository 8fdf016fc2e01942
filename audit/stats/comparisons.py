"""The comparisons table: every declared head pair, per corpus and metric, with a verdict.

Config (``comparisons:`` of a study config, a list of families; checked against
``$defs/comparison_family`` of ``configs/schema.yaml``)::

    comparisons:
      - family: heads-vs-softmax      # required; Holm correction is applied within a family
        baseline: softmax             # head_b of every row ...
        against: [sigsoftmax, plif]   # ... and these are head_a (shell patterns allowed: "gss_*")
        # or instead of baseline/against: pairs: [[plif, plif_frozen], [mos, mos_uniform]]
        metrics: [test_ppl]           # required, runs-table columns
        lower_is_better: true         # bool or {metric: bool}; default true for *_ppl and
                                      # wall_seconds, false for ranks, wordsim_* and throughput
        equivalence_margin: 0.5       # number or {metric: number}, metric units; optional
        corpora: [ptb]                # optional; default every corpus in the runs table
        family_by: [corpus]           # optional; split the Holm family by corpus and/or metric

Decision rule per row (a = candidate, b = reference): Welch's two-sided test, Holm-adjusted
within the family, at ``alpha`` gives ``a_better`` / ``b_better``; otherwise TOST at the
margin (also Holm-adjusted) gives ``equivalent``, shown with the 1 - 2 alpha interval TOST
corresponds to (``tost_ci_low``, ``tost_ci_high``, ``tost_ci_level``: inside the margin whenever
the unadjusted TOST p is below alpha, so never an interval that crosses the margin beside
"equivalent"); otherwise ``inconclusive`` with the reason,
the power at the margin and the seeds needed. Arms with fewer than ``min_seeds`` usable runs
get no verdict and are left out of the family (counted in ``family_dropped``); so is a row whose
Welch test is undefined (both arms constant): ``inconclusive`` with a reason starting
``undefined:``, NaN in every column that divides by an SD, Holm over the defined tests only.
"""

from __future__ import annotations

import fnmatch
import math

import numpy as np
import pandas as pd

from audit.config import check_section
from audit.errors import AuditError
from audit.stats import aso, multiboot, power, tests
from audit.stats.decision import Gate, Rule, Verdict, comparison_records, decides
from audit.stats.families import adjust_family, as_columns, records
from audit.stats.gates import DROP_KINDS, drop_kind, eligible
from audit.stats.io import Settings, absent_later, arm, require_metric
from audit.stats.multiplicity import METHOD
from audit.stats.resample import bootstrap_two_sample, percentile_ci

COLUMNS = [
    "family", "family_size", "family_dropped", "family_note", "adj_method", "corpus", "metric",
    "lower_is_better", "head_a", "head_b", "n_a", "n_b", "n_failed_a", "n_failed_b",
    "n_missing_a", "n_missing_b", "mean_a", "mean_b", "sd_a", "sd_b", "diff", "diff_ci_low",
    "diff_ci_high", "ci_level", "ci_how", "test", "sidedness", "welch_t", "welch_df", "welch_p",
    "student_p", "rank_test", "rank_test_p", "p_adj", "hedges_g", "hedges_g_ci_low",
    "hedges_g_ci_high", "prob_superiority", "prob_superiority_ci_low",
    "prob_superiority_ci_high", "aso_eps_min", "aso_confidence", "ci_method", "bootstrap_seed",
    "bootstrap_resamples", "equivalence_margin", "tost_p", "tost_p_adj", "tost_ci_low", "tost_ci_high",
    "tost_ci_level", "tost_ci_how", "power", "seeds_needed", "power_target",
    "alpha", "min_seeds", "verdict", "reason", "guard",
]
# the study's comparisons.csv: the Welch row (``finalize``; also the published record's) and the
# multi-bootstrap over seeds and test sentences (``multiboot.attach``)
TABLE_COLUMNS = COLUMNS + multiboot.COLUMNS
_LOWER = ("_ppl", "wall_seconds")
_HIGHER = ("press_rank", "erank_", "entropy_rank", "wordsim_", "tokens_per_second", "gradient_share", "gradient_norm_share")


def default_lower_is_better(metric: str, where: str) -> bool:
    """Direction of "better" for the runs-table metrics whose direction is unambiguous."""
    if metric.endswith(_LOWER):
        return True
    if metric.startswith(_HIGHER):
        return False
    raise AuditError(f"{where}: set lower_is_better for metric {metric!r}")


def per_metric(value, metric: str, default):
    if isinstance(value, dict):
        return value.get(metric, default)
    return default if value is None else value


def compare(a: np.ndarray, b: np.ndarray, lower_is_better: bool, margin: float | None,
            settings: Settings) -> dict:
    """All statistics of one comparison, before multiplicity correction and verdict.

    Args:
        a: shape (n_a,) finite values of the candidate head. b: shape (n_b,), the reference.
        lower_is_better: orientation of P(A better than B).
        margin: equivalence margin in metric units, or None.
        settings: alpha, bootstrap and power settings.

    Returns:
        dict with the statistical columns of ``COLUMNS`` (NaN where undefined) and
        ``undefined``: why Welch's test is undefined, or ''.
    """
    level = 1 - settings.alpha
    n_a, n_b = len(a), len(b)
    margin = float(margin) if margin is not None else math.nan
    row = dict(n_a=n_a, n_b=n_b, ci_level=level, test="welch-t", sidedness="two-sided",
               rank_test=tests.RANK_TEST, ci_method="diff: welch-t; g, P(A>B): percentile bootstrap",
               bootstrap_seed=settings.bootstrap_seed, bootstrap_resamples=settings.bootstrap_resamples,
               equivalence_margin=margin, power_target=settings.power_target,
               alpha=settings.alpha, min_seeds=settings.min_seeds)
    row.update(mean_a=_mean(a), mean_b=_mean(b), sd_a=_sd(a), sd_b=_sd(b))
    row["diff"] = row["mean_a"] - row["mean_b"]
    row["undefined"] = tests.undefined_reason(a, b)
    w = tests.welch(a, b, level)
    row.update(diff_ci_low=w["ci_low"], diff_ci_high=w["ci_high"], welch_t=w["t"],
               welch_df=w["df"], welch_p=w["p"], student_p=tests.student_p(a, b),
               rank_test_p=tests.rank_test_p(a, b), tost_p=tests.tost_p(a, b, margin))
    for key in ("hedges_g", "prob_superiority"):
        row.update({key: math.nan, f"{key}_ci_low": math.nan, f"{key}_ci_high": math.nan})
    if n_a >= 2 and n_b >= 2:
        row["hedges_g"] = float(tests.hedges_g(a, b))
        row["prob_superiority"] = float(tests.prob_superiority(a, b, lower_is_better))
        # a fresh Generator per row: any single row is reproducible from the recorded seed
        rng = np.random.default_rng(settings.bootstrap_seed)

        def both(x, y):
            return np.stack([tests.hedges_g(x, y), tests.prob_superiority(x, y, lower_is_better)], 1)

        boot = bootstrap_two_sample(a, b, both, settings.bootstrap_resamples, rng)
        row["hedges_g_ci_low"], row["hedges_g_ci_high"] = percentile_ci(boot[:, 0], level)
        row["prob_superiority_ci_low"], row["prob_superiority_ci_high"] = percentile_ci(boot[:, 1], level)
    # almost stochastic order of "A better than B"; empty below min_seeds, where the bootstrap
    # cannot see the spread (deep-significance#16); its own Generator, so the intervals above
    # do not change with it
    row["aso_confidence"] = level
    row["aso_eps_min"] = (aso.eps_min(a, b, lower_is_better, level, settings.bootstrap_resamples,
                                      np.random.default_rng(settings.bootstrap_seed))
                          if min(n_a, n_b) >= settings.min_seeds else math.nan)
    row["power"] = power.welch_power(row["sd_a"], row["sd_b"], n_a, n_b, margin, settings.alpha)
    row["seeds_needed"] = power.seeds_needed(row["sd_a"], row["sd_b"], margin, settings.alpha,
                                             settings.power_target)
    return row


def _mean(x):
    return float(np.mean(x)) if len(x) else math.nan


def _sd(x):
    if len(x) < 2:
        return math.nan
    # exactly 0 for a constant arm (np.std can give rounding noise such as 1e-17 there)
    return 0.0 if tests.is_constant(x) else float(np.std(x, ddof=1))


def verdict(row: dict, settings: Settings) -> tuple[str, str]:
    """Verdict and reason of one row whose family was adjusted (``audit.stats.families``).

    Decided on the intervals the adjusted tests invert, so the verdict and the interval printed
    beside it cannot disagree (``audit.stats.decision``): the Welch interval at its Holm step's
    level excludes 0 exactly when ``p_adj`` < alpha, the TOST interval lies inside the margin
    exactly when ``tost_p_adj`` < alpha. Never reads a non-significant p as "no difference":
    only TOST can say ``equivalent``.
    """
    alpha = settings.alpha
    if row.get("not_run"):
        return Verdict.INCONCLUSIVE, row["not_run"]
    n_a, n_b = row["n_a"], row["n_b"]
    if min(n_a, n_b) < settings.min_seeds:
        failed = row["n_failed_a"] + row["n_failed_b"]
        short = f"n_a={n_a}, n_b={n_b} < min_seeds={settings.min_seeds}"
        if failed and min(n_a + row["n_failed_a"], n_b + row["n_failed_b"]) >= settings.min_seeds:
            return Verdict.INCONCLUSIVE, Gate.RUNS_FAILED.because(f"{failed} failed runs leave {short}")
        extra = f"; {failed} runs failed" if failed else ""
        return Verdict.INCONCLUSIVE, Gate.TOO_FEW_SEEDS.because(f"{short}{extra}")
    if not np.isfinite(row["p_adj"]):
        return Verdict.INCONCLUSIVE, row.get("undefined") or Gate.UNDEFINED.because("Welch's test could not be computed")
    p, tp = row["p_adj"], row["tost_p_adj"]
    margin = row["equivalence_margin"]
    differ = decides(Rule.EXCLUDES, row["diff_ci_low"], row["diff_ci_high"])
    inside = decides(Rule.INSIDE, row["tost_ci_low"], row["tost_ci_high"], margin=margin)
    where = f"its {row['ci_level']:.4g} interval {'excludes' if differ else 'holds'} 0"
    if differ:
        a_lower = row["diff"] < 0
        v = Verdict.A_BETTER if a_lower == bool(row["lower_is_better"]) else Verdict.B_BETTER
        extra = f"; but |diff| < margin {margin:g} (tost p_adj={tp:.3g})" if inside else ""
        return v, f"welch p_adj={p:.3g} < {alpha:g} ({where}){extra}"
    if inside:
        return Verdict.EQUIVALENT, (f"tost p_adj={tp:.3g} < {alpha:g}: |diff| < margin {margin:g} (its "
                              f"{row['tost_ci_level']:.4g} interval lies inside)")
    if not np.isfinite(margin):
        return Verdict.INCONCLUSIVE, (f"not significant (welch p_adj={p:.3g}; {where}) and no equivalence_margin "
                                "declared, so equivalence was not tested")
    power, need = row["power"], row["seeds_needed"]
    # never "power nan": both are defined whenever the Welch test is, except a need beyond the search
    need_text = f"{need:.0f} seeds per arm give" if np.isfinite(need) else "more than 10^7 seeds per arm needed for"
    tail = f"power {power:.2f} at margin {margin:g}; {need_text} {settings.power_target:g}"
    if power < settings.power_target:
        return Verdict.INCONCLUSIVE, f"underpowered: not significant (welch p_adj={p:.3g}), not equivalent (tost p_adj={tp:.3g}); {tail}"
    return Verdict.INCONCLUSIVE, f"no decision: not significant (welch p_adj={p:.3g}), not equivalent (tost p_adj={tp:.3g}); {tail}"


def family_note(reasons, n_multiboot: int = 0) -> str:
    """What a Holm family size counts: 'm = 2 defined Welch tests of 4 rows; dropped: 1 not run,
    1 too few seeds', from the ``reason`` of every row of the family; with ``n_multiboot``
    multi-bootstrap tests in the same family, 'm = 4 defined tests (2 Welch, 2 multi-bootstrap)
    of 2 rows'."""
    kinds = [drop_kind(r) for r in reasons]
    counts = {k: kinds.count(k) for k in DROP_KINDS if k in kinds}
    welch = kinds.count(None)
    text = (f"m = {welch + n_multiboot} defined tests ({welch} Welch, {n_multiboot} multi-bootstrap) "
            f"of {len(kinds)} rows" if n_multiboot else f"m = {welch} defined Welch tests of {len(kinds)} rows")
    return text + (f"; dropped: {', '.join(f'{n} {k}' for k, n in counts.items())}" if counts else "")


def finalize(rows: list[dict], settings: Settings) -> pd.DataFrame:
    """Holm-correct within each family label (``audit.stats.families``: p_adj, tost_p_adj and the
    intervals they decide on), then attach verdicts; returns the table."""
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    df = pd.DataFrame(rows)
    ok_rows = eligible(df, settings)
    df["p_adj"], df["tost_p_adj"] = np.nan, np.nan
    df["family_size"], df["family_dropped"] = 0, 0
    # a row without a test keeps compare's unadjusted 1 - alpha interval and has no TOST interval
    df["ci_how"] = f"1 - alpha = {1 - settings.alpha:.4g} (no test: no adjustment)"
    df["tost_ci_how"] = ""
    for column in ("tost_ci_low", "tost_ci_high", "tost_ci_level"):
        df[column] = np.nan
    cols, ok = as_columns(df), ok_rows.to_numpy()
    for fam in dict.fromkeys(cols["family"]):
        idx = np.flatnonzero(cols["family"] == fam)
        adjust_family(cols, idx, settings.alpha, ok[idx])
    df = pd.DataFrame(cols)
    df["adj_method"] = METHOD
    df["guard"] = ""   # audit.stats.guard fills it for a row drawn from an arm it flags
    _verdicts(df, settings)
    return df[COLUMNS]


def _verdicts(df: pd.DataFrame, settings: Settings, n_multiboot: dict | None = None) -> None:
    """Verdict, reason and family note of every row, in place; with ``n_multiboot`` (family ->
    multi-bootstrap tests in it) only the rows with a test get a new verdict: a finalized table
    has lost ``not_run``, and the reason of a row without a test does not change with m."""
    rows = records(df)
    for row in rows:
        if n_multiboot is None or np.isfinite(float(row["p_adj"])):
            row["verdict"], row["reason"] = verdict(row, settings)
        comparison_records(row)   # each test's record: raises if a verdict and its interval disagree
    df["verdict"], df["reason"] = [r["verdict"] for r in rows], [r["reason"] for r in rows]
    counts = n_multiboot or {}
    notes = {fam: family_note([r["reason"] for r in rows if r["family"] == fam], counts.get(fam, 0))
             for fam in dict.fromkeys(r["family"] for r in rows)}
    df["family_note"] = [notes[r["family"]] for r in rows]


def holm_both(table: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """One Holm family per label over both tests: the defined ``welch_p`` and ``mb_p`` of its
    rows (a row below ``min_seeds`` has neither), adjusted together into ``p_adj`` and
    ``mb_p_adj`` with their intervals at their steps' levels (``audit.stats.families``), so that
    any mixture of Welch and multi-bootstrap verdicts drawn from one family (a claim may take
    either) is family-wise controlled at ``alpha``; verdicts and ``family_size`` /
    ``family_note`` follow the joint adjustment. Without multi-bootstrap p-values the table is
    returned as ``finalize`` made it.
    """
    if table.empty or not np.isfinite(table["mb_p"].astype(float)).any():
        return table
    cols, counts = as_columns(table), {}
    for fam in dict.fromkeys(cols["family"]):
        idx = np.flatnonzero(cols["family"] == fam)
        tested = np.isfinite(cols["p_adj"][idx].astype(float))
        adjust_family(cols, idx, settings.alpha, tested, boot_in=np.ones(len(idx), bool))
        counts[fam] = int(np.isfinite(cols["mb_p"][idx].astype(float)).sum())
    df = pd.DataFrame(cols, index=table.index)
    _verdicts(df, settings, counts)
    return df


def make_row(runs: pd.DataFrame, family: str, corpus: str, metric: str, head_a: str, head_b: str,
             lower_is_better: bool, margin, settings: Settings) -> dict:
    """One un-corrected row for a head pair in one corpus, with exclusion counts."""
    arm_a, arm_b = arm(runs, corpus, head_a, metric), arm(runs, corpus, head_b, metric)
    row = compare(arm_a.values, arm_b.values, lower_is_better, margin, settings)
    missing = [h for h, x in ((head_a, arm_a), (head_b, arm_b)) if not x.present]
    row.update(family=family, corpus=corpus, metric=metric, head_a=head_a, head_b=head_b,
               lower_is_better=bool(lower_is_better), n_failed_a=arm_a.n_failed,
               n_failed_b=arm_b.n_failed, n_missing_a=arm_a.n_missing, n_missing_b=arm_b.n_missing,
               not_run=(Gate.NOT_RUN.because(f"no runs of {', '.join(missing)} in corpus {corpus!r}") if missing else ""))
    return row


def expand_heads(names, available, baseline=None) -> list[str]:
    """Names in order, a shell-style pattern (``gss_*``) replaced by the matching ``available``
    heads, sorted. A plain name stays even when absent, and so does a pattern matching nothing:
    its rows then say ``not run``, never vanish from the family."""
    heads = sorted(set(map(str, available)) - {str(baseline)})
    out = []
    for name in map(str, names):
        matched = fnmatch.filter(heads, name) if any(ch in name for ch in "*?[") else [name]
        out += [h for h in matched or [name] if h not in out]
    return out


def expand_family(spec: dict, heads, corpora, where: str) -> list[dict]:
    """Every row of one comparisons family (``$defs/comparison_family``), before any statistic.

    The one expansion behind the study's families (``family_rows``) and the published record's
    declared families (``audit.stats.published.evidence``): pairs, or ``baseline`` against the
    ``against`` names with patterns expanded over ``heads``; per metric its direction and
    margin; per corpus (``spec['corpora']`` or ``corpora``) its Holm label (``family_by``).

    Returns:
        dicts ``family, corpus, metric, head_a, head_b, lower_is_better, margin`` in table order.
    """
    name = spec["family"]
    if spec.get("pairs"):   # the schema allows pairs, or baseline with against
        pairs = [tuple(map(str, p)) for p in spec["pairs"]]
    else:
        pairs = [(h, str(spec["baseline"])) for h in expand_heads(spec["against"], heads, spec["baseline"])]
    split = spec.get("family_by") or []
    out = []
    for metric in spec["metrics"]:
        lib = per_metric(spec.get("lower_is_better"), metric, None)
        lib = default_lower_is_better(metric, where) if lib is None else bool(lib)
        margin = per_metric(spec.get("equivalence_margin"), metric, None)
        for corpus in [str(c) for c in spec.get("corpora") or corpora]:
            parts = [f"{k}={corpus if k == 'corpus' else metric}" for k in ("corpus", "metric") if k in split]
            label = f"{name}[{','.join(parts)}]" if parts else name
            out += [dict(family=label, corpus=corpus, metric=metric, head_a=a, head_b=b, lower_is_better=lib,
                         margin=margin) for a, b in pairs]
    return out


def family_rows(runs: pd.DataFrame, spec: dict, settings: Settings, source: str) -> list[dict]:
    """The rows (uncorrected) of one ``comparisons:`` entry, checked by ``check_section``."""
    absent = {m: absent_later(runs, m) for m in spec["metrics"]}
    for metric in spec["metrics"]:
        if not absent[metric]:
            require_metric(runs, metric, source, f"comparisons family {spec['family']!r}")
    cells = expand_family(spec, runs["head"], sorted(runs["corpus"].unique()),
                          f"{source}: comparisons family {spec['family']!r}")
    # a column measured since issue 24 and absent from these (older) runs: rows that say so
    blank = runs.assign(**{m: np.nan for m, why in absent.items() if why})
    rows = [make_row(blank, c["family"], c["corpus"], c["metric"], c["head_a"], c["head_b"],
                     c["lower_is_better"], c["margin"], settings) for c in cells]
    return [dict(r, not_run=absent[r["metric"]] or r["not_run"]) for r in rows]


def comparisons_table(runs: pd.DataFrame, config: dict, settings: Settings,
                      source: str = "config", sentences: multiboot.Sentences | None = None) -> pd.DataFrame:
    """The full comparisons table for the ``comparisons:`` section of ``config``:
    ``TABLE_COLUMNS``; the multi-bootstrap columns come from ``sentences`` (NaN with the reason
    in ``mb_note`` without them or for a metric other than test_ppl).

    Raises:
        AuditError: a section the schema rejects, or a family name declared twice.
    """
    specs = check_section("comparisons", config.get("comparisons"), source)
    rows = [r for spec in specs for r in family_rows(runs, spec, settings, source)]
    return holm_both(multiboot.attach(finalize(rows, settings), runs, sentences, settings), settings)
