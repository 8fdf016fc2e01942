"""The interim analysis of a group-sequential study: which comparisons stop, which arms get seeds.

``python -m audit sequential interim --design JSON --stage k --run-dirs ... [--previous
stage<k-1>.json] --out stage<k>.json`` (the Snakemake checkpoint ``interim`` of
rules/sequential.smk) reads the runs trained so far and replays the stop rules of
``audit.stats.sequential.stopping.replay`` (the very code the simulation ``python -m audit bench
sequential`` measures) from stage 1 to stage k. So rerunning a stage recomputes every decision
from the same runs, deterministically; a previous stage's recorded decisions that the replay no
longer reproduces (a run was retrained, a comparison changed) are an error, not silently
overwritten.

Every row of the study's ``comparisons:`` (family x corpus x metric x pair, Holm families as in
``audit.stats.comparisons``) is one hypothesis. At look j its arms hold the first n_j seeds of
the schedule (``audit.stats.sequential.schedule``); failed runs and non-finite values are left out and
lower the information n_a n_b / (n_a + n_b). The stage record (JSON) holds the per-stage history
(seeds, Welch statistic, boundary, decision), the final sequentially valid numbers of every
comparison (``audit.stats.sequential.history``) and, per (corpus, head) arm, the seeds it has and the
seeds it gets next: an arm gets the next stage's seeds only when some comparison still
continuing uses it. ``done`` is true once no comparison continues.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from audit.config import check_section
from audit.errors import AuditError
from audit.files import atomic_write_text
from audit.stats.comparisons import default_lower_is_better, per_metric
from audit.stats.io import require_metric
from audit.stats.sequential import boundaries as seq, schedule, stopping


def design_of(settings: dict) -> stopping.Design:
    """The ``stopping.Design`` of ``schedule.design_settings``."""
    return stopping.Design(settings["initial"], settings["step"], settings["max"], settings["spending"],
                           settings["alpha"], settings["futility_power"], settings["gamma"])


def comparison_rows(runs: pd.DataFrame, comparisons: list, source: str) -> tuple[list[dict], list[dict]]:
    """The hypotheses of ``comparisons:`` (checked by the schema), and the rows whose arms have
    no runs (not run: left out of their family, as in the fixed design's table)."""
    rows, not_run = [], []
    for spec in check_section("comparisons", comparisons, source):
        name = spec["family"]
        if "pairs" in spec:
            pairs = [tuple(p) for p in spec["pairs"]]
        else:
            heads = sorted(set(runs["head"]) - {spec["baseline"]})
            against = []
            for pattern in spec["against"]:
                matched = fnmatch.filter(heads, pattern) if any(ch in pattern for ch in "*?[") else [pattern]
                against += [h for h in matched if h not in against]
            pairs = [(h, spec["baseline"]) for h in against]
        corpora = [str(c) for c in spec.get("corpora") or sorted(runs["corpus"].unique())]
        for metric in spec["metrics"]:
            require_metric(runs, metric, source, f"comparisons family {name!r}")
            lib = per_metric(spec.get("lower_is_better"), metric, None)
            lib = default_lower_is_better(metric, f"{source}: comparisons family {name!r}") if lib is None else bool(lib)
            margin = per_metric(spec.get("equivalence_margin"), metric, None)
            for corpus in corpora:
                parts = [f"{k}={corpus if k == 'corpus' else metric}" for k in ("corpus", "metric")
                         if k in spec["family_by"]]
                label = f"{name}[{','.join(parts)}]" if parts else name
                for head_a, head_b in pairs:
                    row = dict(family=label, corpus=corpus, metric=metric, head_a=head_a, head_b=head_b,
                               lower_is_better=lib, equivalence_margin=math.nan if margin is None else float(margin))
                    present = [h for h in (head_a, head_b) if ((runs["corpus"] == corpus) & (runs["head"] == h)).any()]
                    (rows if len(present) == 2 else not_run).append(row)
    return rows, not_run


def _values(runs: pd.DataFrame, corpus: str, head: str, metric: str, seeds: set) -> np.ndarray:
    part = runs[(runs["corpus"] == corpus) & (runs["head"] == head) & (runs["status"] == "ok")
                & runs["seed"].astype(int).isin(seeds)]
    x = part[metric].to_numpy(float)
    return x[np.isfinite(x)]


def looks(runs: pd.DataFrame, row: dict, spec: dict, sizes: list[int], k: int) -> dict:
    """Welch statistics of one hypothesis at looks 1..k, each on the arms' first n_j seeds.

    Returns:
        dict of (k,) arrays: n_a, n_b, mean_a, mean_b, sd_a, sd_b, diff, se, df, p, p_tost, info.
    """
    out = {key: np.full(k, np.nan) for key in ("n_a", "n_b", "mean_a", "mean_b", "sd_a", "sd_b", "diff", "se",
                                               "df", "p", "p_tost", "info")}
    for j in range(k):
        seeds = set(schedule.seeds_for(spec, sizes[j]))
        a = _values(runs, row["corpus"], row["head_a"], row["metric"], seeds)
        b = _values(runs, row["corpus"], row["head_b"], row["metric"], seeds)
        var = [float(np.var(x, ddof=1)) if len(x) >= 2 else math.nan for x in (a, b)]
        w = stopping.welch_arrays(np.mean(a) if len(a) else np.nan, var[0], len(a),
                                  np.mean(b) if len(b) else np.nan, var[1], len(b), row["equivalence_margin"])
        out["n_a"][j], out["n_b"][j] = len(a), len(b)
        out["mean_a"][j], out["mean_b"][j] = (np.mean(a) if len(a) else np.nan), (np.mean(b) if len(b) else np.nan)
        out["sd_a"][j], out["sd_b"][j] = math.sqrt(var[0]), math.sqrt(var[1])
        for key in ("diff", "se", "df", "p", "p_tost", "info"):
            out[key][j] = float(w[key])
    return out


def fractions(info: np.ndarray, design: stopping.Design, p: np.ndarray, p_tost: np.ndarray) -> np.ndarray:
    """Information fractions of looks 1..K (observed for the looks made, planned after), with
    the p-values of a look that added no information (all its new runs failed) set to NaN.

    Such a look keeps its planned fraction (its alpha is spent unused) and its diff, se and df
    (those of the look before, shown in the history); its NaN p keeps it out of both the repeated
    p and the repeated CI (``history._rep_p``, ``history._rci``): at its planned, larger nominal
    level the old data's interval would be narrower than they warrant.

    The planned fraction of look j exceeds every observed fraction before it (observed <= planned
    and the plan increases), so the sequence stays increasing, as the boundaries need.
    """
    planned = np.array([float(seq.information(n, n)) for n in design.sizes]) / design.info_max
    t = planned.copy()
    for j in range(len(info)):
        obs = info[j] / design.info_max
        if obs > 0 and (j == 0 or obs > t[j - 1]):
            t[j] = obs
        else:
            p[j] = p_tost[j] = np.nan
    return t


def analyse(runs: pd.DataFrame, config: dict, stage: int, source: str = "config") -> dict:
    """The record of interim analysis ``stage`` (1-based) of a study.

    Args:
        runs: the runs table of the runs trained so far (``audit.stats.runs_table.collect``).
        config: the study's ``seeds`` (a mapping), ``comparisons`` and ``stats`` sections.
        stage: the stage just trained, 1..K.

    Returns:
        The stage record (see the module docstring); JSON-serialisable, NaN as None.
    """
    from audit.stats.sequential import history

    settings = schedule.design_settings(config)
    design = design_of(settings)
    sizes, K = design.sizes, len(design.sizes)
    if not 1 <= stage <= K:
        raise AuditError(f"interim: stage {stage} outside 1..{K} of the schedule {sizes}")
    spec = config["seeds"]
    arms = check_arms(runs, spec, sizes, stage)
    rows, not_run = comparison_rows(runs, config.get("comparisons") or [], source)
    if not rows:
        raise AuditError(f"{source}: no comparison of the study has runs of both its arms")
    stats = [looks(runs, r, spec, sizes, stage) for r in rows]
    t = np.stack([fractions(s["info"], design, s["p"], s["p_tost"]) for s in stats])   # (rows, K)
    families: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        families.setdefault(r["family"], []).append(i)
    prefix = [dict() for _ in range(stage)]   # replay state after each stage j, per row
    tables = {}
    for idx in families.values():
        m = len(idx)
        eff = np.stack([stopping.level_table(t[i], design, m, 2, True) for i in idx])[None]
        eq = np.stack([stopping.level_table(t[i], design, m, 1, True) for i in idx])[None]
        tables.update({i: (eff[0, n], eq[0, n]) for n, i in enumerate(idx)})
        arr = {key: np.stack([stats[i][key] for i in idx])[None] for key in ("p", "p_tost", "diff", "se", "info")}
        margin = np.array([rows[i]["equivalence_margin"] for i in idx])[None]
        for j in range(stage):
            out = stopping.replay(arr["p"][..., : j + 1], arr["p_tost"][..., : j + 1], arr["diff"][..., : j + 1],
                                  arr["se"][..., : j + 1], arr["info"][..., : j + 1], eff, eq, design, K - 1, margin)
            for n, i in enumerate(idx):
                prefix[j][i] = {key: out[key][0, n] for key in out}
    record = history.stage_record(rows, stats, t, tables, prefix, families, design, settings, stage)
    decided = {i: prefix[-1][i]["decision"] for i in range(len(rows))}
    running = {(rows[i]["corpus"], h) for i, d in decided.items() if d == stopping.CONTINUE
               for h in (rows[i]["head_a"], rows[i]["head_b"])}
    for a in arms:
        needed = (a["corpus"], a["head"]) in running and stage < K
        if needed and a["n"] != sizes[stage - 1]:
            raise AuditError(f"interim: arm {a['corpus']}/{a['head']} has {a['n']} seeds but a comparison still "
                             f"running needs the stage-{stage} count {sizes[stage - 1]}")
        a["next"] = sizes[stage] if needed else a["n"]
    record.update(study=config.get("study", ""), stage=stage, last_stage=K, sizes=sizes, design=settings,
                  done=not running or stage == K, arms=arms, not_run=not_run,
                  runs=int(sum(a["n"] for a in arms)), runs_fixed_max=int(len(arms) * settings["max"]))
    return _clean(record)


def check_arms(runs: pd.DataFrame, spec: dict, sizes: list[int], stage: int) -> list[dict]:
    """Per (corpus, head): the seeds it has, which must be the schedule's first n (n a stage size
    up to this stage's), counting failed runs."""
    arms = []
    for (corpus, head), part in runs.groupby(["corpus", "head"], sort=True):
        seeds = sorted(int(s) for s in part["seed"])
        n = len(seeds)
        if seeds != schedule.seeds_for(spec, n) or n not in sizes[:stage]:
            raise AuditError(f"interim: arm {corpus}/{head} has seeds {seeds}; the schedule {sizes} (first seed "
                             f"{spec.get('first', 1)}) allows the first n seeds for n in {sizes[:stage]}")
        arms.append({"corpus": corpus, "head": head, "n": n, "failed": int((part["status"] != "ok").sum())})
    return arms


def _clean(value):
    """NaN and infinities to None, numpy scalars to Python ones (strict JSON)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def check_previous(record: dict, previous: dict) -> None:
    """The decisions recorded at the previous stage must be those the replay reproduces now."""
    stage = previous["stage"]
    now = {(h["family"], h["corpus"], h["metric"], h["head_a"], h["head_b"]): h["decision"]
           for h in record["history"] if h["stage"] == stage}
    for h in previous["history"]:
        key = (h["family"], h["corpus"], h["metric"], h["head_a"], h["head_b"])
        if h["stage"] == stage and now.get(key) != h["decision"]:
            raise AuditError(f"interim: stage {stage} decided {h['decision']!r} for {' vs '.join(key[3:])} "
                             f"({key[0]}, {key[1]}, {key[2]}) but its runs now give {now.get(key)!r}: runs or "
                             f"comparisons changed since; remove results/{record['study']}/sequential to restart")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit sequential", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("interim", help="decide the comparisons after one stage")
    p.add_argument("--design", required=True, help="JSON: the study's seeds, comparisons, stats sections")
    p.add_argument("--stage", type=int, required=True)
    p.add_argument("--run-dirs", nargs="+", required=True)
    p.add_argument("--previous", help="the previous stage's record (stage > 1)")
    p.add_argument("--out", required=True)
    f = sub.add_parser("final", help="the record of the last stage, checked done, as the study's decisions")
    f.add_argument("--stage-file", required=True)
    f.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.command == "final":
        record = json.loads(Path(args.stage_file).read_text())
        if not record.get("done"):
            raise AuditError(f"{args.stage_file}: stage {record.get('stage')} is not the last one (comparisons continue)")
        atomic_write_text(json.dumps(record, indent=1, allow_nan=False) + "\n", Path(args.out))
        return 0
    from audit.stats.runs_table import collect

    try:
        config = json.loads(args.design)
    except json.JSONDecodeError as err:
        raise AuditError(f"--design: not valid JSON ({err})") from None
    runs = collect([Path(d) for d in args.run_dirs])[0]
    runs["seed"], runs["corpus"], runs["head"] = runs["seed"].astype(str), runs["corpus"].astype(str), runs["head"].astype(str)
    record = analyse(runs, config, args.stage, source=f"study {config.get('study', '')}")
    if args.stage > 1:
        if not args.previous:
            raise AuditError(f"interim: stage {args.stage} needs --previous (the stage {args.stage - 1} record)")
        check_previous(record, json.loads(Path(args.previous).read_text()))
    atomic_write_text(json.dumps(record, indent=1, allow_nan=False) + "\n", Path(args.out))
    going = [f"{a['corpus']}/{a['head']}: {a['n']} -> {a['next']}" for a in record["arms"] if a["next"] > a["n"]]
    print(f"stage {args.stage}: {'done' if record['done'] else 'continue'}; "
          f"{'; '.join(going) or 'no arm gets more seeds'}")
    return 0
