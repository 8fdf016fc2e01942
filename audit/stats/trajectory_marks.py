"""Where each traced verdict stands when training stops: held, changed, or still moving.

Read from a trajectory (``audit.stats.trajectory.trajectory_table``: the final decision at every
recorded budget, on validation perplexity, descriptive; or ``audit.stats.checkpoints``: a suite's
claims at every checkpoint) and the runs' values at each budget. One mark per traced comparison or
claim, corpus and look; ``Axis`` says what the budgets are (training tokens, or a suite's steps).
``share`` is the study's ``stats.trajectory.held_share`` (default 0.5, the last half):

- **held since N tokens**: the verdict at every budget from N tokens to the end is the last one,
  and N lies in the first ``1 - share`` of the budget (by default: the same verdict over at
  least the last half of the training tokens). A verdict that never changed is held since the
  first recorded budget even where that budget lies inside the last share (share 1: every
  recorded budget): nothing recorded says it was ever another;
- **changed at N tokens**: the verdict last changed at N tokens, inside that last share;
- **still moving**: the verdict held, but the effect's trend over the last share differs from
  zero (``moving``; a verdict that changed in the last share is marked "changed" and its text says
  whether it is still moving too). The test: per run, the OLS slope of the traced metric (its
  value at the best epoch so far, what a run stopped there reports; a checkpoint's own value)
  against training tokens (or steps) over the last ``share`` of the run's epochs (ceil(share x
  E), at least 2): one window for both marks, so "held" and "not moving" speak of the same
  stretch of training. For two arms Welch's t on the two arms' slopes, for one arm a one-sample t
  of its slopes against 0; two-sided at the study's ``stats.alpha``. The effect's slope is the
  difference of the arms' mean slopes (the slope of the difference of means). A correlation has no
  per-arm slope: its trend is not tested. A held verdict whose effect still trends is not called
  held: "held" would say the verdict did not change, and a reader would take it that training had
  settled, which the trend test says it had not.

Each mark's ``text`` says all of this in one line (the share, n per arm, the test, its sidedness
and level), so the page prints it as it is. No mark is a decision corrected over budgets: the
trajectory is descriptive, and the final verdict is the one on test data at the end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from audit.errors import AuditError
from audit.stats.io import Settings
from audit.stats.trajectory import KEYS, TRACED_AS, look_runs, untraced_reason

GROUP = ["kind", "trace", "claim_id", "corpus", "look"]
TREND_COLUMNS = ["trend_slope", "trend_test", "trend_n_a", "trend_n_b", "trend_t", "trend_df", "trend_p", "alpha",
                 "held_share", "text"]


@dataclass(frozen=True)
class Axis:
    """What the budgets of a trajectory are: the column ordering them (``order``), their position
    (``at``: settle's axis and the slopes' x, in units of ``per``), how a position and the points
    are written, the columns naming one trace, and whether a metric is traced on another field
    (a study's test perplexity on validation perplexity per epoch) or on itself (a checkpoint)."""

    order: str
    at: str
    per: float
    per_words: str
    points: str
    position: str            # format of a position, e.g. "{:,.0f} tokens"
    group: tuple
    traced_as: dict | None   # metric -> the field it is traced on; None: on itself
    on: str                  # the data the marks are on, after "; "
    budget: str = "budget"   # one point of the trajectory, in words

    def where(self, x: float) -> str:
        return self.position.format(x)

    def field(self, metric: str) -> str:
        return metric if self.traced_as is None else self.traced_as[metric]

    def columns(self) -> list[str]:
        return list(self.group) + ["metric", "traced_on", "head_a", "head_b", "mark", f"since_{self.at}",
                                   f"final_{self.at}", "last_verdict", "n_budgets", "moving"] + TREND_COLUMNS


EPOCHS = Axis(order="epoch", at="tokens", per=1e6, per_words="1M tokens", points="epochs",
              position="{:,.0f} tokens", group=tuple(GROUP), traced_as=TRACED_AS,
              on="validation and descriptive")
COLUMNS = EPOCHS.columns()


def check_share(share: float) -> None:
    """The schema's bound on ``stats.trajectory.held_share``, for a Settings made in code."""
    if not 0 < share <= 1:
        raise AuditError(f"config key stats.trajectory.held_share: must lie in (0, 1]; got {share}")


def share_words(share: float) -> str:
    return "half" if share == 0.5 else f"{share:.0%}"


def run_slopes(traced: pd.DataFrame, runs: pd.DataFrame, corpus: str, head: str, field: str,
               share: float, axis: Axis = EPOCHS) -> np.ndarray:
    """OLS slopes (per ``axis.per``) of ``field`` over the last ``share`` of each ok run's points
    (ceil(share x E), at least 2), for the runs of (corpus, head) in ``runs`` with at least two;
    ``traced``: each run's value at each budget (``best_so_far``, or a suite's checkpoints)."""
    ok = runs[(runs["corpus"] == corpus) & (runs["head"] == head) & (runs["status"] == "ok")]
    part = traced.merge(ok[KEYS], on=KEYS)
    slopes = []
    for _, run in part.sort_values(axis.order).groupby(KEYS, sort=True):
        run = run[np.isfinite(run[field].to_numpy(dtype=float))]
        if len(run) < 2:
            continue
        last = run.tail(max(2, math.ceil(share * len(run))))
        x, y = last[axis.at].to_numpy(dtype=float) / axis.per, last[field].to_numpy(dtype=float)
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
        return dict(out, why=f"fewer than 2 runs with 2 points in an arm (n = {len(a)}{f', {len(b)}' if two else ''})")
    out["trend_slope"] = float(a.mean() - (b.mean() if two else 0.0))
    if np.ptp(a) == 0 and (not two or np.ptp(b) == 0):
        return dict(out, why="every run's slope is the same: no spread to test against")
    res = stats.ttest_ind(a, b, equal_var=False) if two else stats.ttest_1samp(a, 0.0)
    return dict(out, trend_t=float(res.statistic), trend_df=float(res.df), trend_p=float(res.pvalue))


def settle(budgets: list[float], verdicts: list[str], share: float) -> tuple[str, float]:
    """("held" | "changed", the budget from which the last verdict stands): held when that budget
    lies at or before the start of the last ``share`` of the budget, or is the first recorded one
    (no change recorded at all)."""
    since = 0
    for i in range(1, len(verdicts)):
        if verdicts[i] != verdicts[i - 1]:
            since = i
    held = since == 0 or budgets[since] <= budgets[-1] * (1 - share)
    return ("held" if held else "changed"), budgets[since]


def _trend_text(t: dict, unit: str, alpha: float, share: float, axis: Axis) -> str:
    if not math.isfinite(t["trend_p"]):
        return f"trend not tested ({t['why'] or 'a correlation has no per-arm slope'})"
    n = f"n = {t['trend_n_a']}" + (f", {t['trend_n_b']}" if math.isfinite(t["trend_n_b"]) else "")
    side = "<" if t["trend_p"] < alpha else ">="
    return (f"effect's trend {t['trend_slope']:+.3g} {unit} per {axis.per_words} over each run's last "
            f"{share_words(share)} of {axis.points} ({t['trend_test']}, {n}, two-sided p = {t['trend_p']:.3g} "
            f"{side} alpha {alpha:g})")


def _settled_words(verdicts: list[str], budgets: list[float], kind: str, since: float, share: float,
                   axis: Axis) -> str:
    """What the trajectory shows, in words: the verdicts before and from ``since``, and the share."""
    said, end = verdicts[-1].replace("_", " "), axis.where(budgets[-1])
    if kind == "held":
        what = f"{said} at every {axis.budget} from {axis.where(since)} to {end}"
        if since > budgets[-1] * (1 - share):   # never changed, but recorded only inside the share
            return what + (f" (every recorded {axis.budget}; the last {share_words(share)} of the budget "
                           f"begins before the first)")
        return what + f" (at least the last {share_words(share)} of the budget)"
    before = verdicts[len(verdicts) - 1 - _run_length(verdicts)].replace("_", " ")
    return f"{before} before {axis.where(since)}, {said} from there to {end} (inside the last {share_words(share)})"


def mark_row(group: pd.DataFrame, t: dict, settings: Settings, share: float, axis: Axis = EPOCHS) -> dict:
    """The mark of one trace (its trajectory rows ``group``, sorted by ``axis.order``) and its line."""
    first = group.iloc[0]
    budgets, verdicts = group[axis.at].astype(float).tolist(), group["verdict"].astype(str).tolist()
    kind, since = settle(budgets, verdicts, share)
    moving = math.isfinite(t["trend_p"]) and t["trend_p"] < settings.alpha
    mark = "still moving" if moving and kind == "held" else kind
    head = {"held": f"held since {axis.where(since)}", "changed": f"changed at {axis.where(since)}",
            "still moving": "still moving"}[mark]
    head += " and still moving" if moving and kind == "changed" else ""
    if axis.traced_as is None:
        on = f"{first['traced_on']} at each of the {axis.points}"
    elif first["traced_on"] != first["metric"]:
        on = f"traced on {first['traced_on']} per epoch (the claim is on {first['metric']})"
    else:
        on = f"traced on {first['traced_on']} per epoch"
    text = (f"{head}: {_settled_words(verdicts, budgets, kind, since, share, axis)}; "
            f"{_trend_text(t, first['traced_on'], settings.alpha, share, axis)}; {on}, "
            f"{axis.on}, not corrected over {len(budgets)} {axis.budget}s")
    return dict({k: first[k] for k in list(axis.group) + ["metric", "traced_on", "head_a", "head_b"]},
                mark=mark, **{f"since_{axis.at}": since, f"final_{axis.at}": budgets[-1]},
                last_verdict=verdicts[-1], n_budgets=len(budgets), moving=moving, alpha=settings.alpha,
                held_share=share, text=text, **{k: v for k, v in t.items() if k != "why"})


def _run_length(verdicts: list[str]) -> int:
    """How many budgets at the end share the last verdict."""
    n = 1
    while n < len(verdicts) and verdicts[-n - 1] == verdicts[-1]:
        n += 1
    return n


def trace_marks(trajectories: pd.DataFrame, traced: pd.DataFrame, by_look: dict, settings: Settings,
                axis: Axis = EPOCHS) -> list[dict]:
    """One mark per trace of ``trajectories`` (grouped by ``axis.group``); ``by_look``: look ->
    the runs table its slopes read (a fixed design: {'': runs})."""
    share = settings.held_share
    check_share(share)
    # read back from CSV, an empty text cell is NaN: '' again, so that groups and looks match
    text = ["claim_id", "look", "head_a", "head_b"]
    trajectories = trajectories.assign(**{c: trajectories[c].astype(object).fillna("") for c in text})
    rows = []
    for _, group in trajectories.sort_values(axis.order).groupby(list(axis.group), sort=False, dropna=False):
        first = group.iloc[0]
        part, field = by_look.get(first["look"], next(iter(by_look.values()))), axis.field(first["metric"])
        if first["head_a"]:
            a = run_slopes(traced, part, first["corpus"], first["head_a"], field, share, axis)
            b = run_slopes(traced, part, first["corpus"], first["head_b"], field, share, axis) if first["head_b"] else None
            t = trend(a, b)
        else:   # a correlation: no per-arm slope
            t = dict(trend(np.array([]), None), trend_test="none: a correlation has no per-arm slope", trend_n_a=math.nan,
                     why="a correlation has no per-arm slope")
        rows.append(mark_row(group, t, settings, share, axis))
    return rows


def marks_table(trajectories: pd.DataFrame, traced: pd.DataFrame, runs: pd.DataFrame, config: dict,
                settings: Settings, looks: list[int] | None = None) -> pd.DataFrame:
    """One mark per trace of ``trajectories`` (``COLUMNS``), then one "not traced" row per claim
    and corpus without a trajectory, with why. ``traced``: ``best_so_far`` of the runs' logs;
    ``looks``: as given to ``trajectory_table`` (each look's slopes use that look's runs); the
    share from ``settings.held_share`` (``stats.trajectory.held_share``)."""
    by_look = dict(look_runs(runs, looks or []))
    rows = trace_marks(trajectories, traced, by_look, settings)
    last = list(by_look)[-1]
    corpora = sorted(runs["corpus"].unique())
    seen = set(zip(trajectories["claim_id"], trajectories["corpus"].astype(str)))
    for claim in config.get("claims") or []:
        why = untraced_reason(claim, config) or "not traced: no verdict at any budget (the claim was not run here)"
        rows += [dict(kind="claim", trace=claim["id"], claim_id=claim["id"], corpus=str(c), look=last,
                      mark="not traced", text=why, alpha=settings.alpha, held_share=settings.held_share)
                 for c in claim.get("corpora") or corpora if (claim["id"], str(c)) not in seen]
    return pd.DataFrame(rows, columns=COLUMNS)
