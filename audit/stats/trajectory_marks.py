"""Where each traced verdict stands when training stops: held, changed, or still moving.

Read from a trajectory (``audit.stats.trajectory.trajectory_table``: the final decision at every
recorded budget, on validation perplexity, descriptive) and the runs' per-epoch logs. One mark per
traced comparison or claim, corpus and look:

- **held since N tokens**: the verdict at every budget from N tokens to the end is the last one,
  and N lies in the first ``1 - held_share`` of the budget (by default: the same verdict over at
  least the last half of the training tokens);
- **changed at N tokens**: the verdict last changed at N tokens, inside that last share;
- **still moving**: the verdict held, but the effect's trend over the last epochs differs from
  zero (``moving``; a verdict that changed in the last share is marked "changed" and its text says
  whether it is still moving too). The test: per run, the OLS slope of the traced metric (its value at the best epoch so far,
  what a run stopped there reports) against training tokens over the last half of the run's epochs
  (ceil(E / 2), at least 2); for two arms Welch's t on the two arms' slopes, for one arm a one-sample
  t of its slopes against 0; two-sided at the study's ``stats.alpha``. The effect's slope is the
  difference of the arms' mean slopes (the slope of the difference of means). A correlation has no
  per-arm slope: its trend is not tested. A held verdict whose effect still trends is not called
  held: "held" would say the verdict did not change, and a reader would take it that training had
  settled, which the trend test says it had not.

Each mark's ``text`` says all of this in one line (n per arm, the test, its sidedness and level),
so the page prints it as it is. No mark is a decision corrected over budgets: the trajectory is
descriptive, and the final verdict is the one on test data at the end.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from audit.errors import AuditError
from audit.stats.io import Settings
from audit.stats.trajectory import KEYS, TRACED_AS, look_runs, untraced_reason

HELD_SHARE = 0.5   # the last half of the budget: a verdict the same over it has held
PER = 1e6          # slopes are per million training tokens
GROUP = ["kind", "trace", "claim_id", "corpus", "look"]
COLUMNS = GROUP + ["metric", "traced_on", "head_a", "head_b", "mark", "since_tokens", "final_tokens",
                   "last_verdict", "n_budgets", "moving", "trend_slope", "trend_test", "trend_n_a", "trend_n_b",
                   "trend_t", "trend_df", "trend_p", "alpha", "held_share", "text"]


def run_slopes(traced: pd.DataFrame, runs: pd.DataFrame, corpus: str, head: str, field: str) -> np.ndarray:
    """OLS slopes (per million tokens) of ``field`` over the last half of each ok run's epochs, for
    the runs of (corpus, head) in ``runs`` with at least two epochs; ``traced``: ``best_so_far``."""
    ok = runs[(runs["corpus"] == corpus) & (runs["head"] == head) & (runs["status"] == "ok")]
    part = traced.merge(ok[KEYS], on=KEYS)
    slopes = []
    for _, run in part.sort_values("epoch").groupby(KEYS, sort=True):
        run = run[np.isfinite(run[field])]
        if len(run) < 2:
            continue
        last = run.tail(max(2, math.ceil(len(run) / 2)))
        x, y = last["tokens"].to_numpy() / PER, last[field].to_numpy()
        slopes.append(float(np.polyfit(x, y, 1)[0]) if np.ptp(x) > 0 else math.nan)
    return np.array([s for s in slopes if math.isfinite(s)])


def trend(a: np.ndarray, b: np.ndarray | None) -> dict:
    """The trend test of a trace: Welch's t on two arms' slopes (``b`` given) or a one-sample t of
    one arm's against 0, two-sided; NaN with ``why`` where it is undefined."""
    two = b is not None
    name = "welch t on per-run slopes" if two else "one-sample t of per-run slopes against 0"
    out = dict(trend_test=name, trend_n_a=len(a), trend_n_b=len(b) if two else math.nan,
               trend_slope=math.nan, trend_t=math.nan, trend_df=math.nan, trend_p=math.nan, why="")
    if len(a) < 2 or (two and len(b) < 2):
        return dict(out, why=f"fewer than 2 runs with 2 epochs in an arm (n = {len(a)}{f', {len(b)}' if two else ''})")
    out["trend_slope"] = float(a.mean() - (b.mean() if two else 0.0))
    if np.ptp(a) == 0 and (not two or np.ptp(b) == 0):
        return dict(out, why="every run's slope is the same: no spread to test against")
    res = stats.ttest_ind(a, b, equal_var=False) if two else stats.ttest_1samp(a, 0.0)
    return dict(out, trend_t=float(res.statistic), trend_df=float(res.df), trend_p=float(res.pvalue))


def settle(tokens: list[float], verdicts: list[str], share: float) -> tuple[str, float]:
    """("held" | "changed", the budget from which the last verdict stands)."""
    since = 0
    for i in range(1, len(verdicts)):
        if verdicts[i] != verdicts[i - 1]:
            since = i
    held = tokens[since] <= tokens[-1] * (1 - share)
    return ("held" if held else "changed"), tokens[since]


def _trend_text(t: dict, unit: str, alpha: float) -> str:
    if not math.isfinite(t["trend_p"]):
        return f"trend not tested ({t['why'] or 'a correlation has no per-arm slope'})"
    n = f"n = {t['trend_n_a']}" + (f", {t['trend_n_b']}" if math.isfinite(t["trend_n_b"]) else "")
    side = "<" if t["trend_p"] < alpha else ">="
    return (f"effect's trend {t['trend_slope']:+.3g} {unit} per 1M tokens over each run's last half of epochs "
            f"({t['trend_test']}, {n}, two-sided p = {t['trend_p']:.3g} {side} alpha {alpha:g})")


def mark_row(group: pd.DataFrame, t: dict, settings: Settings, share: float) -> dict:
    """The mark of one trace (its trajectory rows ``group``, sorted by epoch) and its one-line text."""
    first = group.iloc[0]
    tokens, verdicts = group["tokens"].tolist(), group["verdict"].astype(str).tolist()
    kind, since = settle(tokens, verdicts, share)
    moving = math.isfinite(t["trend_p"]) and t["trend_p"] < settings.alpha
    mark = "still moving" if moving and kind == "held" else kind
    said = verdicts[-1].replace("_", " ")
    if kind == "held":
        what = f"{said} at every budget from {since:,.0f} to {tokens[-1]:,.0f} tokens"
    else:
        before = verdicts[len(verdicts) - 1 - _run_length(verdicts)].replace("_", " ")
        what = f"{before} before {since:,.0f} tokens, {said} from there to {tokens[-1]:,.0f}"
    head = {"held": f"held since {since:,.0f} tokens", "changed": f"changed at {since:,.0f} tokens",
            "still moving": "still moving"}[mark]
    on = (f"traced on {first['traced_on']} per epoch (the claim is on {first['metric']})"
          if first["traced_on"] != first["metric"] else f"traced on {first['traced_on']} per epoch")
    head += " and still moving" if moving and kind == "changed" else ""
    text = (f"{head}: {what}; {_trend_text(t, first['traced_on'], settings.alpha)}; {on}, "
            f"validation and descriptive, not corrected over {len(tokens)} budgets")
    return dict({k: first[k] for k in GROUP + ["metric", "traced_on", "head_a", "head_b"]},
                mark=mark, since_tokens=since, final_tokens=tokens[-1], last_verdict=verdicts[-1],
                n_budgets=len(tokens), moving=moving, alpha=settings.alpha, held_share=share, text=text,
                **{k: v for k, v in t.items() if k != "why"})


def _run_length(verdicts: list[str]) -> int:
    """How many budgets at the end share the last verdict."""
    n = 1
    while n < len(verdicts) and verdicts[-n - 1] == verdicts[-1]:
        n += 1
    return n


def marks_table(trajectories: pd.DataFrame, traced: pd.DataFrame, runs: pd.DataFrame, config: dict,
                settings: Settings, looks: list[int] | None = None, share: float = HELD_SHARE) -> pd.DataFrame:
    """One mark per trace of ``trajectories`` (``COLUMNS``), then one "not traced" row per claim
    and corpus without a trajectory, with why. ``traced``: ``best_so_far`` of the runs' logs;
    ``looks``: as given to ``trajectory_table`` (each look's slopes use that look's runs)."""
    if not 0 < share < 1:
        raise AuditError(f"trajectory marks: held share must lie in (0, 1); got {share}")
    by_look = dict(look_runs(runs, looks or []))
    # read back from CSV, an empty text cell is NaN: '' again, so that groups and looks match
    text = ["claim_id", "look", "head_a", "head_b"]
    trajectories = trajectories.assign(**{c: trajectories[c].astype(object).fillna("") for c in text})
    rows = []
    for _, group in trajectories.sort_values("epoch").groupby(GROUP, sort=False, dropna=False):
        first = group.iloc[0]
        part, field = by_look.get(first["look"], runs), TRACED_AS[first["metric"]]
        if first["head_a"]:
            a = run_slopes(traced, part, first["corpus"], first["head_a"], field)
            b = run_slopes(traced, part, first["corpus"], first["head_b"], field) if first["head_b"] else None
            t = trend(a, b)
        else:   # a correlation: no per-arm slope
            t = dict(trend(np.array([]), None), trend_test="none: a correlation has no per-arm slope", trend_n_a=math.nan,
                     why="a correlation has no per-arm slope")
        rows.append(mark_row(group, t, settings, share))
    last = list(by_look)[-1]
    corpora = sorted(runs["corpus"].unique())
    seen = set(zip(trajectories["claim_id"], trajectories["corpus"].astype(str)))
    for claim in config.get("claims") or []:
        why = untraced_reason(claim, config) or "not traced: no verdict at any budget (the claim was not run here)"
        rows += [dict(kind="claim", trace=claim["id"], claim_id=claim["id"], corpus=str(c), look=last,
                      mark="not traced", text=why, alpha=settings.alpha, held_share=share)
                 for c in claim.get("corpora") or corpora if (claim["id"], str(c)) not in seen]
    return pd.DataFrame(rows, columns=COLUMNS)
