"""Every verdict traced over the training budget: the final decision computed at earlier budgets.

A study's verdicts are decided once, on the runs' test perplexity at the end of training. Heads that
learn faster win at a small budget and may lose at a larger one, so a reader needs to know whether
a verdict was reached early and held, flipped late, or is still moving when training stops (issue
56). Every run already logs, per epoch, its validation and training perplexity and the tokens it
trained on (``metrics.json`` -> ``log``), so no run is retrained: this module rebuilds the runs
table *as a run stopped after epoch e would have reported it* and hands it, unchanged otherwise, to
the same entry points that make the final tables (``comparisons_table``, ``correlations_table``,
``claims_table``, ``guard_table``). One code path: the trajectory's verdict at a budget is the final
decision's record at that budget, its Holm families the same (a metric not recorded per epoch keeps
its final value in the table, so every family keeps its m; only the rows on a traced metric are kept).

What a run stopped after epoch e reports: a run keeps the weights of its best validation epoch
(``audit.train.trainer``: the first epoch with the lowest validation loss), so each traced metric
is its value at the run's best epoch up to e. At the last epoch this is exactly the runs table's
``valid_ppl`` and ``train_ppl``. A run's status is its final one at every budget (the same runs as
the final verdict). Under SGD and NT-ASGD nothing in training depends on the planned epochs
(``audit.train.checkpoint``), so epoch e of a run is the run a budget of e epochs would have
trained; under AdamW's cosine schedule it is not (the rate at epoch e is higher than a run planned
for e epochs would have used): the docs say so.

The test split is scored once, after training, so a claim on ``test_ppl`` is traced on the
validation perplexity per epoch (``TRACED_AS``), and every trajectory is labelled *validation,
descriptive*: a verdict per budget, with no claim of a decision corrected over the budgets. A
metric measured once after training (ranks, gradient shares, unargmaxable tokens) has no
trajectory, and a claim reading one is listed as not traced with why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from audit.errors import AuditError
from audit.stats import claims as claims_mod
from audit.stats import comparisons as comparisons_mod
from audit.stats import correlations as correlations_mod
from audit.stats import tables as tables_mod
from audit.stats.io import Settings
from audit.stats.decision import Gate

# a runs-table metric -> the per-epoch log field it is traced on. Only fields that mean the same
# per epoch as in the runs table: tokens_per_second is logged per epoch too, but the runs table
# holds its mean over epochs, not its value at the best one, so it is not traced.
TRACED_AS = {"test_ppl": "valid_ppl", "valid_ppl": "valid_ppl", "train_ppl": "train_ppl"}
LOG_FIELDS = sorted(set(TRACED_AS.values()))
KEYS = ["corpus", "head", "seed"]
DATA = "validation, descriptive: a verdict per budget, not corrected over budgets"
COLUMNS = ["kind", "trace", "claim_id", "corpus", "metric", "traced_on", "head_a", "head_b", "look",
           "epoch", "tokens", "verdict", "reason", "estimate", "ci_low", "ci_high", "ci_level", "p_adj",
           "n_a", "n_b", "data"]


def read_epochs(run_dirs) -> pd.DataFrame:
    """Every run's per-epoch log: corpus, head, seed (text, as in the runs table), epoch, tokens
    (trained up to the end of that epoch) and the ``LOG_FIELDS``.

    Raises:
        AuditError: a run folder without ``metrics.json``, an unreadable one, or a log entry
            without ``epoch``, ``tokens`` or a traced field (names the file and the key).
    """
    rows = []
    for run_dir in map(Path, run_dirs):
        path = run_dir / "metrics.json"
        if not path.is_file():
            raise AuditError(f"missing {path}: the run was not trained")
        try:
            metrics = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise AuditError(f"{path}: unreadable JSON ({err.msg}, line {err.lineno})") from None
        missing = [k for k in KEYS if k not in metrics]
        if missing:
            raise AuditError(f"{path}: no key {missing[0]!r}")
        tokens = 0.0
        for i, entry in enumerate(metrics.get("log") or []):
            lost = [k for k in ("epoch", "tokens", *LOG_FIELDS) if k not in entry]
            if lost:
                raise AuditError(f"{path}: log entry {i + 1} has no key {lost[0]!r}")
            tokens += float(entry["tokens"])
            rows.append({**{k: str(metrics[k]) for k in KEYS}, "epoch": int(entry["epoch"]), "tokens": tokens,
                         **{k: float(entry[k]) for k in LOG_FIELDS}})
    return pd.DataFrame(rows, columns=KEYS + ["epoch", "tokens"] + LOG_FIELDS)


def best_so_far(epochs: pd.DataFrame) -> pd.DataFrame:
    """Per run and epoch e: the traced fields at the run's best validation epoch up to e (the first
    epoch with the lowest validation perplexity, as the trainer keeps it), ``best_epoch``, and the
    budget's own ``tokens``."""
    out = []
    for _, run in epochs.sort_values(KEYS + ["epoch"]).groupby(KEYS, sort=False):
        best = None
        for row in run.to_dict("records"):
            if best is None or row["valid_ppl"] < best["valid_ppl"]:   # strict: the first minimum stays
                best = row
            out.append({**{k: row[k] for k in KEYS}, "epoch": row["epoch"], "tokens": row["tokens"],
                        "best_epoch": best["epoch"], **{k: best[k] for k in LOG_FIELDS}})
    return pd.DataFrame(out, columns=KEYS + ["epoch", "tokens", "best_epoch"] + LOG_FIELDS)


def budgets(traced: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """epoch -> tokens: every epoch an ok run reached, at the median of those runs' tokens."""
    ok = runs.loc[runs["status"] == "ok", KEYS]
    part = traced.merge(ok, on=KEYS) if len(ok) else traced.iloc[:0]
    return part.groupby("epoch", as_index=False)["tokens"].median().sort_values("epoch")


def runs_at(runs: pd.DataFrame, traced: pd.DataFrame, epoch: int) -> pd.DataFrame:
    """The runs table as the runs stopped after ``epoch`` would report it: every ``TRACED_AS``
    metric at the run's best epoch up to there (NaN for a run that never reached it), every other
    column as it is."""
    at = traced.loc[traced["epoch"] == epoch, KEYS + LOG_FIELDS].rename(columns=lambda c: f"_at_{c}" if c in LOG_FIELDS else c)
    merged = runs.merge(at, on=KEYS, how="left")
    out = runs.copy()
    for metric, field in TRACED_AS.items():
        out[metric] = merged[f"_at_{field}"].to_numpy(dtype=float)
    return out


def look_runs(runs: pd.DataFrame, looks: list[int]) -> list[tuple[str, pd.DataFrame]]:
    """(label, runs) per look: a fixed design is one look of every run (label ''); a group-sequential
    study's look of n seeds per arm keeps each arm's n smallest seeds (a stage's seeds are a prefix
    of the next's: ``audit.stats.sequential.schedule``)."""
    if not looks:
        return [("", runs)]
    number = pd.to_numeric(runs["seed"], errors="coerce")
    rank = number.groupby([runs["corpus"], runs["head"]]).rank(method="first")
    return [(f"{n} seeds per arm", runs[(rank <= n).to_numpy()].reset_index(drop=True)) for n in sorted(looks)]


def untraced_reason(claim: dict, config: dict) -> str:
    """Why a claim has no trajectory ('' when it has one): every metric it reads must be recorded
    per epoch (``TRACED_AS``), and its test must need nothing scored only after training."""
    if "untestable" in claim:
        return Gate.UNTESTABLE.because("no verdict to trace")
    if "comparison" in claim and claim.get("test", "welch") == "multibootstrap":
        return ("not traced: its multi-bootstrap resamples the per-sentence test NLL, which is "
                "scored once, after training")
    metrics = claim_reads(claim, config)
    if metrics is None:
        return f"not traced: correlation {claim['correlation']['name']!r} is not declared"
    once = [m for m in metrics if m not in TRACED_AS]
    if once:
        return f"not traced: {', '.join(once)} {'is' if len(once) == 1 else 'are'} measured once, after training, not per epoch"
    return ""


def claim_reads(claim: dict, config: dict) -> list[str] | None:
    """The runs-table metrics a (testable) claim's test reads; None for a correlation the config
    does not declare."""
    if "comparison" in claim:
        return [claim["comparison"]["metric"]]
    if "one_sample" in claim:
        spec = claim["one_sample"]
        return [spec["metric"]] + ([spec["unresolved"]] if spec.get("unresolved") else [])
    name = claim["correlation"]["name"]
    spec = next((c for c in config.get("correlations") or [] if c["name"] == name), None)
    return None if spec is None else [spec["x"], spec["y"]]


def claim_heads(claim: dict, runs: pd.DataFrame, corpus: str) -> tuple[str, str]:
    """(head_a, head_b) of a claim's arms in ``corpus`` ('' for none): of a list of alternatives the
    first with runs there (as ``audit.stats.claims`` resolves it), the one arm of a one-sample claim."""
    present = set(runs.loc[runs["corpus"] == corpus, "head"])

    def pick(names) -> str:
        names = [str(n) for n in (names if isinstance(names, list) else [names])]
        return next((n for n in names if n in present), names[0])

    if "comparison" in claim:
        return pick(claim["comparison"]["head_a"]), pick(claim["comparison"]["head_b"])
    if "one_sample" in claim:
        return pick(claim["one_sample"]["head"]), ""
    return "", ""


def tables_at(runs: pd.DataFrame, config: dict, settings: Settings, baselines, source: str):
    """The guarded comparisons and claims tables of a runs table: what ``python -m audit stats``
    writes, through the same entry points (no sentences: the multi-bootstrap is not traced)."""
    comp = comparisons_mod.comparisons_table(runs, config, settings, source)
    corr = correlations_mod.correlations_table(runs, config, settings, source)
    claims = claims_mod.claims_table(runs, config, settings, comp, corr, source)
    share = settings.max_failed_share
    return (tables_mod.guard_table("comparisons", comp, runs, baselines, config, share),
            tables_mod.guard_table("claims", claims, runs, baselines, config, share))


def judged(table: pd.DataFrame) -> pd.Series:
    """Rows with a verdict to trace: not those never computed (an arm not run in this study)."""
    return ~table["reason"].map(lambda reason: Gate.of(reason).untested).astype(bool)


def _comparison_rows(comp: pd.DataFrame) -> list[dict]:
    rows = []
    for r in comp[comp["metric"].isin(list(TRACED_AS)) & judged(comp)].to_dict("records"):
        rows.append(dict(kind="comparison", trace=f"{r['family']}: {r['head_a']} - {r['head_b']}", claim_id="",
                         corpus=r["corpus"], metric=r["metric"], traced_on=TRACED_AS[r["metric"]],
                         head_a=r["head_a"], head_b=r["head_b"], verdict=r["verdict"], reason=r["reason"],
                         estimate=r["diff"], ci_low=r["diff_ci_low"], ci_high=r["diff_ci_high"],
                         ci_level=r["ci_level"], p_adj=r["p_adj"], n_a=r["n_a"], n_b=r["n_b"]))
    return rows


def claim_rows(table: pd.DataFrame, traced: dict, runs: pd.DataFrame, on: dict | None = TRACED_AS) -> list[dict]:
    """The trajectory rows of a claims table's traced claims (``traced``: id -> (claim, metric));
    ``on``: metric -> the field it is traced on (None: on itself, as a suite's checkpoints are)."""
    rows = []
    for r in table[table["claim_id"].isin(list(traced)) & judged(table)].to_dict("records"):
        claim, metric = traced[r["claim_id"]][:2]
        head_a, head_b = claim_heads(claim, runs, r["corpus"])
        rows.append(dict(kind="claim", trace=r["claim_id"], claim_id=r["claim_id"], corpus=r["corpus"],
                         metric=metric, traced_on=on[metric] if on else metric, head_a=head_a, head_b=head_b,
                         verdict=r["verdict"], reason=r["reason"], estimate=r["estimate"], ci_low=r["ci_low"],
                         ci_high=r["ci_high"], ci_level=r["ci_level"], p_adj=r["p_adj"], n_a=r["n_a"], n_b=r["n_b"]))
    return rows


def claim_metric(claim: dict, config: dict) -> str:
    """The metric a traced claim's estimate is on (a correlation's: its y)."""
    for kind in ("comparison", "one_sample"):
        if kind in claim:
            return claim[kind]["metric"]
    name = claim["correlation"]["name"]
    return next(c["y"] for c in config["correlations"] if c["name"] == name)


def trajectory_table(runs: pd.DataFrame, epochs: pd.DataFrame, config: dict, settings: Settings,
                     baselines: pd.DataFrame | None = None, source: str = "config",
                     looks: list[int] | None = None) -> pd.DataFrame:
    """One row per traced comparison or claim, corpus, look and epoch (``COLUMNS``): the verdict,
    estimate, interval (its level from the row) and adjusted p the final tables would give at that
    budget. ``epochs``: ``read_epochs`` of the study's run folders; ``looks``: a group-sequential
    study's seeds per arm at each look (None: a fixed design, one look of every run)."""
    traced_metric = best_so_far(epochs)
    traced = {c["id"]: (c, claim_metric(c, config)) for c in config.get("claims") or []
              if not untraced_reason(c, config)}
    rows = []
    for label, part in look_runs(runs, looks or []):
        for epoch, tokens in budgets(traced_metric, part).itertuples(index=False):
            at = runs_at(part, traced_metric, epoch)
            comp, claims = tables_at(at, config, settings, baselines, source)
            for row in _comparison_rows(comp) + claim_rows(claims, traced, at):
                rows.append(dict(row, look=label, epoch=int(epoch), tokens=float(tokens), data=DATA))
    return pd.DataFrame(rows, columns=COLUMNS)
