"""``python -m audit gpu-check --out DIR [--minutes 8]``: plan the steps into the time, run, report.

Each step runs as ``python -m audit gpu-check --step NAME --budget S --out DIR`` in a child
process that writes ``DIR/steps/NAME.json`` (``common.Result``): a fresh CUDA context and peak
counter per step, and a step that hangs or crashes is stopped and recorded while the others run.
A step starts only if at least its ``minimum`` seconds are left, and ``WRAP_UP`` besides; it gets
at most ``share`` of its own expected cost as budget, stops its inner loop when the budget is spent
(and says what it left out), and is killed ``GRACE`` seconds after it, or at the deadline, never
less than ``WRAP_UP`` after it. The parent never touches CUDA.

Exit status: 0 when ``environment`` and ``correctness`` ran to the end and passed, no check of
``syncs`` or ``dag`` failed and no step crashed or was killed; 1 otherwise. Memory and speed
report against their bands and the targets of docs/gpus.md without failing the run: a plan outside its
band is a plan to correct, a slow GPU is a finding.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import time
from pathlib import Path

from audit.errors import AuditError
from audit.gpucheck.common import run_in_session

# name -> (expected seconds on a GPU, on the simulated device, minimum seconds to start it)
STEPS = {
    "environment": (15, 15, 5),
    "correctness": (60, 150, 30),
    "syncs": (60, 180, 20),
    "memory": (150, 150, 60),
    "speed": (180, 150, 60),
    "dag": (450, 420, 120),     # an H200: runs_per_gpu 1 > 300 s (2026-11-27), 4: 93 s
}
GATING = {"environment", "correctness"}      # must run to the end and pass
CHECKED = {"syncs", "dag"}                   # a failed check fails the run
SHARE = 2.0                                  # a step's budget: at most this times its expected cost
GRACE = 60                                   # seconds past its budget before a step is killed
# seconds a step always has between its budget and its kill, even when --minutes leaves no room
# for GRACE: a step stops at its budget, then kills its Snakemake, removes its workflow copies and
# writes its result (killed at its budget instead, the DAG step was an error, 2026-11-27 CI)
WRAP_UP = 20


def child(name: str, budget: float, out: Path) -> int:
    """Run one step in this process and write its result."""
    from audit.gpucheck.common import Result, device_info

    info = device_info()
    result = Result(name, info["simulated"])
    if not info["cuda"]:
        result.data["error"] = "no CUDA device is visible to torch"
    else:
        module = importlib.import_module(f"audit.gpucheck.{'memcheck' if name == 'memory' else name}")
        try:
            module.run(result, budget, info["simulated"])
        except Exception as err:  # keep what the step measured before it broke; the log has the traceback
            import traceback

            traceback.print_exc()
            result.data["error"] = " ".join(f"{type(err).__name__}: {err}".split())[:600]
    result.write(out / "steps" / f"{name}.json")
    return 0


def run_step(name: str, budget: float, out: Path, kill_after: float | None = None) -> dict:
    """The step's result, or a record of why there is none (crash, kill). The child is killed
    ``kill_after`` seconds after it starts (default: its budget plus ``GRACE``)."""
    path = out / "steps" / f"{name}.json"
    path.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "audit", "gpu-check", "--step", name, "--budget", f"{budget:.0f}", "--out", str(out)]
    log = out / "steps" / f"{name}.log"
    started = time.time()
    with open(log, "w") as handle:
        try:   # the step's own children (Snakemake, its jobs) are killed with it
            code = run_in_session(cmd, budget + GRACE if kill_after is None else kill_after,
                                  stdout=handle, stderr=subprocess.STDOUT).returncode
        except subprocess.TimeoutExpired:
            code = None
    if path.is_file() and code == 0:
        result = json.loads(path.read_text())
    else:
        tail = log.read_text()[-1500:]
        result = {"step": name, "checks": [], "figures": {}, "notes": [], "seconds": round(time.time() - started, 1),
                  "error": "killed after its budget" if code is None else f"exit {code}: {tail.strip()}"}
    result["budget"] = round(budget)
    result["status"] = status(result)
    return result


def status(result: dict) -> str:
    """error, skipped, fail (a check failed in a step that gates or checks), off-target (a memory
    band or speed target missed: a finding, not a failure), incomplete (out of time) or pass."""
    if result.get("error") or result.get("errors"):
        return "error"
    if result.get("skipped"):
        return "skipped"
    if any(not c["ok"] for c in result["checks"]):
        return "fail" if result["step"] in GATING | CHECKED else "off-target"
    return "incomplete" if result.get("incomplete") else "pass"


def exit_code(results: list[dict]) -> int:
    by_name = {r["step"]: r for r in results}
    for name in GATING:
        if by_name.get(name, {}).get("status") != "pass":
            return 1
    for r in results:
        if r["status"] == "error" or (r["step"] in CHECKED and r["status"] == "fail"):
            return 1
    return 0


def plan_and_run(out: Path, minutes: float, names: list[str]) -> list[dict]:
    deadline = time.time() + 60 * minutes
    simulated = None
    results = []
    for name in names:
        expected, expected_sim, minimum = STEPS[name]
        cost = expected_sim if simulated else expected
        left = deadline - time.time() - 5   # the report's own seconds
        if left < minimum + WRAP_UP:
            results.append({"step": name, "checks": [], "figures": {}, "notes": [], "status": "skipped",
                            "skipped": f"needs at least {minimum + WRAP_UP} s, {max(left, 0):.0f} s left of "
                                       f"--minutes {minutes:g}"})
            print(f"gpu-check: {name:12s} skipped ({results[-1]['skipped']})", flush=True)
            continue
        budget = max(min(left - (GRACE if left > minimum + GRACE else WRAP_UP), SHARE * cost), minimum)
        print(f"gpu-check: {name:12s} running (budget {budget:.0f} s)", flush=True)
        # the grace never runs past --minutes: a step with little time left is killed at the
        # deadline, WRAP_UP after its budget
        result = run_step(name, budget, out, kill_after=budget + min(GRACE, left - budget))
        results.append(result)
        if name == "environment":
            simulated = bool(result.get("simulated"))
        print(f"gpu-check: {name:12s} {result['status']} in {result.get('seconds', 0):.0f} s", flush=True)
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit gpu-check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for gpu-check.json, gpu-check.md and the step logs")
    parser.add_argument("--minutes", type=float, default=8.0, help="time to plan the steps into (default 8)")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated subset of {','.join(STEPS)}")
    parser.add_argument("--step", help=argparse.SUPPRESS)       # internal: run one step in this process
    parser.add_argument("--budget", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out = Path(args.out)
    (out / "steps").mkdir(parents=True, exist_ok=True)
    if args.step:
        return child(args.step, args.budget, out)
    names = [s for s in args.steps.split(",") if s]
    unknown = [s for s in names if s not in STEPS]
    if unknown:
        raise AuditError(f"gpu-check --steps: unknown step {unknown[0]!r}; known: {', '.join(STEPS)}")
    if args.minutes <= 0:
        raise AuditError(f"gpu-check --minutes must be positive, got {args.minutes:g}")
    from audit.gpucheck.report import write

    started = time.time()
    results = plan_and_run(out, args.minutes, [s for s in STEPS if s in names])
    code = exit_code(results) if "environment" in names and "correctness" in names else \
        int(any(r["status"] in ("error", "fail") for r in results))
    json_path, md_path = write(out, results, args.minutes, started, code)
    print(f"gpu-check: wrote {json_path} and {md_path}; exit {code}", flush=True)
    return code
