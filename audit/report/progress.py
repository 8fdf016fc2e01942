"""Where a long study stands: ``python -m audit progress --configfile configs/<study>.yaml``.

One line per run of the study (every seed scheduled so far, under a sequential schedule):
epochs done of those planned, the best validation perplexity so far, seconds per epoch and the
ETA, from ``audit.train.progress.run_status`` (what the runs wrote; nothing here imports torch).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from audit.config import load_study, run_settings
from audit.errors import AuditError
from audit.stats.sequential.schedule import progress_seeds
from audit.train.progress import run_status


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "-"
    hours, rest = divmod(int(round(seconds)), 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def format_table(rows: list[dict]) -> str:
    width = max([len(r["run"]) for r in rows] + [3])
    lines = [f"{'run':{width}s} {'state':12s} {'epochs':>11s} {'best valid ppl':>15s} {'s/epoch':>9s} {'ETA':>11s}"]
    for r in rows:
        ppl = f"{r['best_valid_ppl']:.2f}" if math.isfinite(r["best_valid_ppl"]) else "-"
        spe = f"{r['seconds_per_epoch']:.1f}" if math.isfinite(r["seconds_per_epoch"]) else "-"
        lines.append(f"{r['run']:{width}s} {r['state']:12s} {r['done']:>5d}/{r['planned']:<5d} {ppl:>15s} "
                     f"{spe:>9s} {_duration(r['eta_seconds']):>11s}")
    finished = sum(r["state"] not in ("running", "not started") for r in rows)
    epochs = sum(r["done"] for r in rows), sum(r["planned"] for r in rows)
    lines.append(f"{finished}/{len(rows)} runs finished; {epochs[0]}/{epochs[1]} epochs")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit progress", description=__doc__)
    parser.add_argument("--configfile", required=True, help="study config YAML")
    parser.add_argument("--root", default=".", help="workflow folder holding results/ (default: here)")
    args = parser.parse_args(argv)
    config = load_study(args.configfile)
    base = Path(args.root) / "results" / config["study"] / "runs"
    rows = []
    for corpus in config["data"]["corpora"]:
        for entry in config["heads"]:
            for seed in progress_seeds(config, base / corpus / entry["name"]):  # sequential: those scheduled so far
                planned = run_settings(config, corpus, entry["name"], seed)["train"]["epochs"]
                rows.append(run_status(base / corpus / entry["name"] / str(seed), planned))
    if not rows:
        raise AuditError(f"{args.configfile}: the study has no training runs")
    print(format_table(rows))
    return 0
