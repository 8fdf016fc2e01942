"""Warnings a reader must see before trusting the audit: one row per problem found.

Kinds (the ``kind`` column):
- ``failed``: a run ended with status other than ``ok`` (diverged runs say so in the detail), or
  ended ok without a finite test perplexity (the guard counts it as failed);
- ``too_few_seeds``: an arm has fewer successful seeds than ``stats.min_seeds``;
- ``non_normal``: Shapiro-Wilk rejects normality (at ``stats.alpha``) for an arm of a compared
  metric, where the t-tests lean on normality; only for n >= 3 (the test's minimum);
- ``unconverged``: a run's best validation epoch is its last epoch and its relative validation gain
  over that epoch (``valid_gain_last``) exceeds ``stats.converged_gain`` (or was not recorded): it
  was still improving by that much when training stopped. Best = last alone is no warning: a
  schedule that anneals the learning rate to zero (cosine) or an averaged iterate (NT-ASGD) makes
  the last epoch the best one by design, and on the Transformer study that flagged 60 of 61 runs;
- ``far_from_converged``: an arm's median relative validation gain over its last epoch
  (``valid_gain_last``) exceeds ``stats.converged_gain``; the detail gives that median and the
  epochs at which NT-ASGD switched (``asgd_epoch``, "never" for runs that never switched);
- ``hidden_gap``: a softmax run whose hidden size read from its double-centred log-P spectrum
  (``hidden_gap_dim``, audit/evaluate/hidden_gap.py) is not its d (``hidden_gap_ok`` false): the
  positive control of the rank tolerances failed, so that run's ranks are suspect;
- ``not_measured``: a measurement an arm's head or body cannot support (a runs-table ``*_note``
  column starting "not measured", e.g. no ``output_layer()``, or a softmax on a body that states
  no ``output_rank``, whose hidden-gap control could not run), one row per arm, measurement and
  reason, with the number of runs;
- ``excluded``: values a table dropped or excluded (missing metrics, comparisons dropped from a
  Holm family, counted by reason: not run, too few seeds, failed runs, undefined p-value; runs
  outside a declared correlation window).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from audit.stats.decision import Gate
from audit.stats.gates import DROP_KINDS, drop_kind
from audit.stats.io import Settings

COLUMNS = ["kind", "corpus", "head", "seed", "metric", "detail"]
_KIND_TEXT = {Gate.NOT_RUN: "not run (an arm has no runs)", Gate.TOO_FEW_SEEDS: "with too few seeds",
              Gate.RUNS_FAILED: "with too few seeds left by failed runs",
              Gate.UNDEFINED: "with an undefined p-value"}


def _row(kind: str, detail: str, corpus="", head="", seed="", metric="") -> dict:
    return {"kind": kind, "corpus": corpus, "head": head, "seed": seed, "metric": metric, "detail": detail}


def compared_metrics(config: dict) -> list[str]:
    """Metrics named by the config's comparisons (default ``test_ppl``), in first-seen order."""
    metrics = [m for spec in config.get("comparisons") or [] for m in spec.get("metrics") or ["test_ppl"]]
    return list(dict.fromkeys(metrics or ["test_ppl"]))


def find_warnings(runs: pd.DataFrame, config: dict, comparisons: pd.DataFrame | None = None,
                  correlations: pd.DataFrame | None = None) -> pd.DataFrame:
    """All warnings of a study.

    Args:
        runs: the runs table (``audit.stats.io.load_runs`` types: corpus/head/seed/status str).
        config: the statistics sections of the study config (``comparisons``, ``stats``).
        comparisons, correlations: the statistics tables, or None when not produced.

    Returns:
        DataFrame[kind, corpus, head, seed, metric, detail], in the kind order of the module doc.
    """
    settings = Settings.from_config(config.get("stats"), "stats config")
    rows = []
    for run in runs[runs["status"] != "ok"].itertuples():
        error = str(getattr(run, "error", "") or "no reason recorded")
        kind = "diverged" if any(w in error.lower() for w in ("nan", "inf", "diverg")) else "failed"
        rows.append(_row("failed", f"{kind}: {error}; excluded from every test", run.corpus, run.head, run.seed))
    ok = runs[runs["status"] == "ok"]
    if "test_ppl" in ok:   # ok without a finite test perplexity: counted as failed by the guard
        lost = ok[~np.isfinite(pd.to_numeric(ok["test_ppl"], errors="coerce").to_numpy(float))]
        for run in lost.itertuples():
            rows.append(_row("failed", "status ok but no finite test perplexity: counted as a failed run by the "
                             "guard (audit.stats.guard), excluded from the perplexity tests", run.corpus, run.head,
                             run.seed))
    for (corpus, head), group in runs.groupby(["corpus", "head"], sort=True):
        n_ok = int((group["status"] == "ok").sum())
        if n_ok < settings.min_seeds:
            rows.append(_row("too_few_seeds", f"{n_ok} successful seed(s) < stats.min_seeds = "
                             f"{settings.min_seeds}: comparisons with this arm give no verdict", corpus, head))
    for metric in compared_metrics(config):
        if metric not in ok:
            continue
        for (corpus, head), group in ok.groupby(["corpus", "head"], sort=True):
            values = pd.to_numeric(group[metric], errors="coerce").dropna().to_numpy(float)
            # Shapiro-Wilk needs n >= 3 and is undefined for constant samples
            if len(values) < 3 or values.max() == values.min():
                continue
            w, p = stats.shapiro(values)
            if p < settings.alpha:
                rows.append(_row("non_normal", f"Shapiro-Wilk W = {w:.3f}, p = {p:.3g} (n = {len(values)}): "
                                 "the t-tests assume normal means; read the rank test beside them",
                                 corpus, head, metric=metric))
    if {"best_epoch", "epochs_run"} <= set(ok.columns):
        for run in ok.itertuples():
            best, last = getattr(run, "best_epoch"), getattr(run, "epochs_run")
            if not (pd.notna(best) and pd.notna(last) and int(best) == int(last)):
                continue
            gain = pd.to_numeric(getattr(run, "valid_gain_last", np.nan), errors="coerce")
            if pd.notna(gain) and gain <= settings.converged_gain:
                continue
            gained = ("last-epoch gain not recorded" if pd.isna(gain) else
                      f"last-epoch valid-ppl gain {gain:.1%} > stats.converged_gain {settings.converged_gain:.1%}")
            rows.append(_row("unconverged", f"best validation epoch = last epoch ({int(last)}), {gained}: "
                             "still improving when training stopped (see the learning curves figure, #fig-learning-curves)",
                             run.corpus, run.head, run.seed))
    rows += far_from_converged(ok, settings)
    rows += failed_hidden_gap(ok)
    rows += not_measured(ok)
    rows += _exclusions(comparisons, correlations)
    return pd.DataFrame(rows, columns=COLUMNS)


def far_from_converged(ok: pd.DataFrame, settings: Settings) -> list[dict]:
    """One warning per arm whose median ``valid_gain_last`` over its ok runs exceeds
    ``settings.converged_gain``: still gaining that much per epoch, its perplexity is far from
    where the model would end, and its verdicts speak for this budget only."""
    if "valid_gain_last" not in ok:
        return []
    rows = []
    for (corpus, head), group in ok.groupby(["corpus", "head"], sort=True):
        gains = pd.to_numeric(group["valid_gain_last"], errors="coerce").dropna()
        if gains.empty or gains.median() <= settings.converged_gain:
            continue
        switched = "not recorded"
        if "asgd_epoch" in group:
            epochs = pd.to_numeric(group["asgd_epoch"], errors="coerce")
            counts = epochs.dropna().astype(int).value_counts().sort_index()
            parts = [f"epoch {e} ({c} run{'s' if c > 1 else ''})" for e, c in counts.items()]
            never = int(epochs.isna().sum())
            switched = ", ".join(parts + ([f"never ({never} run{'s' if never > 1 else ''})"] if never else []))
        rows.append(_row("far_from_converged",
                         f"median relative valid-ppl gain of the last epoch {gains.median():.1%} (n = {len(gains)}) "
                         f"> stats.converged_gain {settings.converged_gain:.1%}; NT-ASGD switched: {switched}",
                         corpus, head, metric="valid_gain_last"))
    return rows


def failed_hidden_gap(ok: pd.DataFrame) -> list[dict]:
    """One warning per run whose ``hidden_gap_ok`` is false (written for softmax runs only)."""
    if "hidden_gap_ok" not in ok:
        return []
    rows = []
    for run in ok.itertuples():
        flag = getattr(run, "hidden_gap_ok")
        if str(flag).lower() in ("false", "0", "0.0"):   # CSV: a bool column with blanks reads as text
            d = getattr(run, "hidden_gap_expected", None)
            d = getattr(run, "emb_size", None) if d is None or pd.isna(d) else int(d)   # runs before issue 33: d
            residual = getattr(run, "hidden_gap_residual", None)
            tail = "" if residual is None or pd.isna(residual) else f", spectrum past it s_(r+1)/s_1 = {float(residual):.2g}"
            rows.append(_row("hidden_gap", f"hidden size read from the double-centred log-P = "
                             f"{getattr(run, 'hidden_gap_dim')}, the body's rank r = {d if pd.notna(d) else '?'}"
                             f"{tail}: the positive control of a softmax run failed (the estimate must be r and "
                             "the spectrum end there), its ranks are suspect", run.corpus, run.head, run.seed,
                             metric="hidden_gap_dim"))
    return rows


def not_measured(ok: pd.DataFrame) -> list[dict]:
    """One warning per (corpus, head, note column, reason) whose runs-table ``*_note`` says
    "not measured": what the audit did not compute for that arm and why, so that a missing
    column is never read as a pass (a softmax whose hidden-gap control could not run)."""
    rows = []
    for column in sorted(c for c in ok.columns if c.endswith("_note")):
        notes = ok[column].astype("string")
        picked = ok[notes.str.startswith("not measured", na=False)]
        for (corpus, head, note), group in picked.groupby(["corpus", "head", column], sort=True):
            rows.append(_row("not_measured", f"{note} ({len(group)} run{'s' if len(group) > 1 else ''})",
                             corpus, head, metric=column[: -len("_note")]))
    return rows


def _exclusions(comparisons: pd.DataFrame | None, correlations: pd.DataFrame | None) -> list[dict]:
    rows = []
    if comparisons is not None and len(comparisons):
        for row in comparisons.itertuples():
            for side, head in (("a", row.head_a), ("b", row.head_b)):
                missing = getattr(row, f"n_missing_{side}", 0)
                if pd.notna(missing) and int(missing) > 0:
                    rows.append(_row("excluded", f"{int(missing)} ok run(s) without a value of {row.metric} "
                                     f"left out of {row.family}", row.corpus, head, metric=row.metric))
        for family, group in comparisons.groupby("family", sort=False):
            count = group["family_dropped"].iloc[0] if "family_dropped" in group else 0
            if pd.notna(count) and int(count) > 0:
                # by reason: most dropped rows are too-few-seeds or not-run rows, not undefined tests
                out = group[~np.isfinite(pd.to_numeric(group["p_adj"], errors="coerce"))]
                # a guarded row's reason ends with what the test alone gave (audit.stats.guard)
                tested = [r.split("; the test alone: ", 1)[-1] for r in out["reason"].fillna("")]
                kinds = [drop_kind(r) or Gate.UNDEFINED for r in tested]
                why = ", ".join(f"{kinds.count(k)} {_KIND_TEXT[k]}" for k in DROP_KINDS if k in kinds)
                rows.append(_row("excluded", f"{int(count)} comparison(s) dropped from family {family} before "
                                 f"the {group['adj_method'].iloc[0]} correction: {why}"))
    if correlations is not None and len(correlations):
        for row in correlations.itertuples():
            outside = getattr(row, "n_outside_window", 0)
            if pd.notna(outside) and int(outside) > 0 and str(row.level) == "runs":
                rows.append(_row("excluded", f"{int(outside)} run(s) outside the declared window "
                                 f"({row.restriction}) of correlation {row.name}; reported beside the "
                                 "unrestricted result and marked post hoc", row.corpus, metric=row.y))
            excluded = getattr(row, "n_excluded", 0)
            if (pd.notna(excluded) and int(excluded) > 0 and str(row.level) == "runs"
                    and str(row.restriction) == "none"):
                rows.append(_row("excluded", f"{int(excluded)} run(s) failed or missing {row.x}/{row.y} "
                                 f"excluded from correlation {row.name}", row.corpus, metric=row.y))
    return rows

