"""Where a run stands, for ``python -m audit progress`` (``audit.report.progress``).

Per run: epochs done of those planned, the best validation perplexity so far, seconds
per epoch (median of the last ``WINDOW`` epochs, training plus validation) and the ETA of what
is left, read only from what the runs wrote: ``metrics.json`` of a finished run, else
``work/progress.json``, which the trainer rewrites atomically after every epoch's checkpoint
(``record``). A run with neither has not started. Nothing here imports torch.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path

from audit.files import atomic_write_text

WINDOW = 10  # epochs whose median gives seconds per epoch
_LAST: dict[str, float] = {}  # run folder -> monotonic time of the last record in this process


def progress_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / "work" / "progress.json"


def record(run_dir: str | Path, rows: list[dict], planned: int) -> None:
    """Rewrite ``work/progress.json`` after an epoch: epoch, validation ppl and the wall
    seconds since the previous epoch ended in this process (the first epoch after a start or a
    resume counts its training time only, as its start-up is no part of an epoch)."""
    key, now = str(run_dir), time.monotonic()
    last = rows[-1]
    seconds = now - _LAST[key] if key in _LAST else last["train_seconds"]
    _LAST[key] = now
    previous = read_progress(run_dir)
    kept = {r["epoch"]: r for r in (previous or {}).get("epochs", []) if r["epoch"] < last["epoch"]}
    kept[last["epoch"]] = {"epoch": last["epoch"], "valid_ppl": last["valid_ppl"], "seconds": seconds}
    for row in rows:  # epochs logged before this file existed (e.g. a run resumed from an old checkpoint)
        kept.setdefault(row["epoch"], {"epoch": row["epoch"], "valid_ppl": row["valid_ppl"],
                                       "seconds": row["train_seconds"]})
    body = {"planned": planned, "epochs": [kept[e] for e in sorted(kept)], "updated": time.time()}
    atomic_write_text(json.dumps(body, allow_nan=True), progress_path(run_dir))


def read_progress(run_dir: str | Path) -> dict | None:
    path = progress_path(run_dir)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return None  # written atomically, so only a foreign file can be unreadable: treat as absent


def run_status(run_dir: str | Path, planned: int) -> dict:
    """One row of the progress table for a run folder (see the module docstring)."""
    run_dir = Path(run_dir)
    metrics_path = run_dir / "metrics.json"
    if metrics_path.is_file():
        metrics = json.loads(metrics_path.read_text())
        epochs = [{"epoch": r["epoch"], "valid_ppl": r["valid_ppl"], "seconds": r["train_seconds"]}
                  for r in metrics.get("log", [])]
        state = metrics["status"] if metrics["status"] != "ok" else "done"
        planned = metrics.get("settings", {}).get("train", {}).get("epochs", planned)
    else:
        body = read_progress(run_dir)
        epochs = body["epochs"] if body else []
        state = "running" if body else "not started"
        planned = body["planned"] if body else planned
    done = epochs[-1]["epoch"] if epochs else 0
    ppl = [r["valid_ppl"] for r in epochs if r["valid_ppl"] is not None and math.isfinite(r["valid_ppl"])]
    recent = [r["seconds"] for r in epochs[-WINDOW:]]
    per_epoch = statistics.median(recent) if recent else math.nan
    eta = 0.0 if state != "running" and state != "not started" else (planned - done) * per_epoch
    return {"run": "/".join(run_dir.parts[-3:]), "state": state, "done": done, "planned": planned,
            "best_valid_ppl": min(ppl) if ppl else math.nan, "seconds_per_epoch": per_epoch, "eta_seconds": eta}
