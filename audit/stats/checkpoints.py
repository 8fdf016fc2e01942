"""A pretrained suite's claims traced over its checkpoints: the trajectory of issue 56 on the time
axis of another evidence source.

A suite (``audit.pretrained``) writes, beside the runs table a study names under ``evidence:``,
``checkpoints.csv``: one row per (model, seed, checkpoint), every column of the runs table it can
measure at a checkpoint, and ``step``. Its runs table is the final checkpoint's rows plus columns
computed once over the last checkpoints (``late_loss_slope`` and the other saturation measures) and
``design``. So the runs table *as checkpoint s measured the same runs* is the runs table with every
column ``checkpoints.csv`` holds taken from checkpoint s (``runs_at_step``), the rest kept: every
Holm family keeps its m, as a study's epochs keep the metrics measured once. It is judged by the
function that judges the runs table itself (``audit.stats.sources.judge_evidence``: the study's
comparisons, correlations and claims, guarded against the study's and the suite's baselines), so
at the last step the trajectory is the evidence claims table's verdicts, row for row.

Unlike a study's epochs, every checkpoint is measured on the same test text as the final verdict:
a claim is traced on its own metric. The trajectory is still descriptive, one verdict per
checkpoint, never corrected over checkpoints. Not traced, with why: a claim on a column that
``checkpoints.csv`` lacks (the saturation measures: one value per run, over the last checkpoints),
or that is measured at fewer than 2 checkpoints (unargmaxable tokens under ``pretrained.argmax:
final``), or judged by the multi-bootstrap (the suite keeps the final checkpoint's per-sentence
NLL only), or untestable. The marks (``audit.stats.trajectory_marks``, axis ``CHECKPOINTS``) are
the study's: held, changed, still moving over ``stats.trajectory.held_share`` of the steps.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from audit.stats.io import CHECKPOINT_KEY, Settings, load_runs
from audit.stats.sources import evidence_sentences, judge_evidence
from audit.stats.trajectory import KEYS, claim_metric, claim_reads, claim_rows
from audit.stats.trajectory_marks import GROUP, Axis, trace_marks
from audit.stats.decision import Gate

CHECKPOINTS = Axis(order="step", at="step", per=1e4, per_words="10,000 steps", points="checkpoints",
                   position="step {:,.0f}", group=("evidence_source", *GROUP), traced_as=None,
                   on="on the suite's test text as its final verdict, descriptive", budget="checkpoint")
DATA = "test text at each checkpoint, descriptive: a verdict per checkpoint, not corrected over checkpoints"
COLUMNS = ["evidence_source", "kind", "trace", "claim_id", "corpus", "metric", "traced_on", "head_a", "head_b",
           "look", "step", "revision", "verdict", "reason", "estimate", "ci_low", "ci_high", "ci_level", "p_adj",
           "n_a", "n_b", "data"]
MARK_COLUMNS = CHECKPOINTS.columns()


def sibling_checkpoints(runs: str | Path) -> Path:
    """Where a suite's ``checkpoints.csv`` lies: beside its runs table (``audit.pretrained.table``)."""
    return Path(runs).parent / "checkpoints.csv"


def read_checkpoints(path: str | Path) -> pd.DataFrame:
    """A checkpoints table, read as a runs table is (``load_runs``), one row per run and ``step``.

    Raises:
        AuditError: one line naming the file: unreadable, no ``step`` or an empty cell in it, a
            run twice at one step.
    """
    return load_runs(path, CHECKPOINT_KEY)


def runs_at_step(runs: pd.DataFrame, checkpoints: pd.DataFrame, step: float) -> pd.DataFrame:
    """The runs table as checkpoint ``step`` measured its runs: every column of ``checkpoints``
    at that checkpoint's value, every other column (measured once over the last checkpoints) as
    it is. A run with no row at ``step`` has no measurement there: NaN, status failed."""
    at = checkpoints[checkpoints["step"] == step]
    shared = [c for c in checkpoints.columns if c in runs.columns and c not in KEYS]
    merged = runs[KEYS].merge(at[KEYS + shared], on=KEYS, how="left")
    out = runs.copy()
    for column in shared:
        out[column] = merged[column].to_numpy()
    out["status"] = merged["status"].fillna("failed").to_numpy()
    return out


def measured_steps(checkpoints: pd.DataFrame, metric: str) -> list[float]:
    """The steps at which some ok run has a finite ``metric``."""
    ok = checkpoints[checkpoints["status"] == "ok"]
    values = pd.to_numeric(ok[metric], errors="coerce")
    return sorted(set(ok.loc[values.notna() & (values.abs() != float("inf")), "step"]))


def untraced_reason(claim: dict, config: dict, checkpoints: pd.DataFrame) -> str:
    """Why a claim has no trajectory over the checkpoints ('' when it has one)."""
    if "untestable" in claim:
        return Gate.UNTESTABLE.because("no verdict to trace")
    if "comparison" in claim and claim.get("test", "welch") == "multibootstrap":
        return "not traced: its multi-bootstrap resamples per-sentence NLL, which the suite keeps for its final checkpoint only"
    metrics = claim_reads(claim, config)
    if metrics is None:
        return f"not traced: correlation {claim['correlation']['name']!r} is not declared"
    absent = [m for m in metrics if m not in checkpoints.columns]
    if absent:
        return (f"not traced: {', '.join(absent)} {'is' if len(absent) == 1 else 'are'} not measured per checkpoint "
                f"(one value per run, over the suite's last checkpoints, or none)")
    few = [(m, len(measured_steps(checkpoints, m))) for m in metrics]
    few = [(m, n) for m, n in few if n < 2]
    if few:
        return f"not traced: {few[0][0]} is measured at {few[0][1]} checkpoint{'s' if few[0][1] != 1 else ''} only"
    return ""


def entry_trajectory(entry: dict, config: dict, settings: Settings, baselines: pd.DataFrame | None,
                     source: str = "config") -> pd.DataFrame:
    """One row per traced claim, corpus and checkpoint of one ``evidence:`` entry (``COLUMNS``);
    no rows when no ``checkpoints.csv`` lies beside its runs table (a runs table with no time axis)."""
    path = sibling_checkpoints(entry["runs"])
    if not path.is_file():
        return pd.DataFrame(columns=COLUMNS)
    runs, checkpoints = load_runs(entry["runs"]), read_checkpoints(path)
    traced = {}
    for claim in config.get("claims") or []:
        if not untraced_reason(claim, config, checkpoints):
            steps = set.intersection(*(set(measured_steps(checkpoints, m)) for m in claim_reads(claim, config)))
            traced[claim["id"]] = (claim, claim_metric(claim, config), steps)
    rows, steps = [], sorted(checkpoints["step"].unique())
    for step in steps:
        at = runs_at_step(runs, checkpoints, step)
        revision = checkpoints.loc[checkpoints["step"] == step, "revision"].iloc[0] if "revision" in checkpoints else ""
        # the per-sentence NLL beside the runs table is the last checkpoint's: its multi-bootstrap
        # tests join their Holm family there, as in the evidence claims table, and nowhere earlier
        sentences = evidence_sentences(entry["runs"]) if step == steps[-1] else None
        table = judge_evidence(at, entry, config, settings, baselines, source, sentences)
        here = {k: v for k, v in traced.items() if step in v[2]}   # its metrics measured at this step
        rows += [dict(row, evidence_source=entry["name"], look="", step=float(step), revision=revision, data=DATA)
                 for row in claim_rows(table, here, at, on=None)]
    return pd.DataFrame(rows, columns=COLUMNS)


def checkpoint_trajectories(config: dict, settings: Settings, baselines: pd.DataFrame | None,
                            source: str = "config") -> pd.DataFrame:
    """``entry_trajectory`` of every ``evidence:`` entry, stacked."""
    tables = [entry_trajectory(e, config, settings, baselines, source) for e in config.get("evidence") or []]
    tables = [t for t in tables if not t.empty]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=COLUMNS)


def checkpoint_marks(trajectories: pd.DataFrame, config: dict, settings: Settings) -> pd.DataFrame:
    """One mark per traced claim and corpus of each suite (``MARK_COLUMNS``: held since step N,
    changed at step N, still moving), then one "not traced" row per other claim and corpus of the
    suite's runs, with why."""
    rows = []
    for entry in config.get("evidence") or []:
        path = sibling_checkpoints(entry["runs"])
        if not path.is_file():
            continue
        runs, checkpoints = load_runs(entry["runs"]), read_checkpoints(path)
        part = trajectories[trajectories["evidence_source"].astype(str) == entry["name"]]
        rows += trace_marks(part, checkpoints, {"": runs}, settings, CHECKPOINTS)
        seen = set(zip(part["claim_id"].astype(str), part["corpus"].astype(str)))
        for claim in config.get("claims") or []:
            why = (untraced_reason(claim, config, checkpoints)
                   or "not traced: no verdict at any checkpoint (its arms are not in this suite)")
            rows += [dict(evidence_source=entry["name"], kind="claim", trace=claim["id"], claim_id=claim["id"],
                          corpus=str(c), look="", mark="not traced", text=why, alpha=settings.alpha,
                          held_share=settings.held_share)
                     for c in claim.get("corpora") or sorted(runs["corpus"].unique()) if (claim["id"], str(c)) not in seen]
    return pd.DataFrame(rows, columns=MARK_COLUMNS)
