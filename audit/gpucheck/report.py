"""``gpu-check.json`` (everything) and ``gpu-check.md`` (one page) from the steps' results."""

from __future__ import annotations

import json
import time
from pathlib import Path

from audit.files import atomic_write_text


def _table(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + \
        ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def markdown(results: list[dict], minutes: float, started: float, code: int) -> str:
    by = {r["step"]: r for r in results}
    env = by.get("environment", {}).get("figures", {})
    simulated = env.get("simulated", True)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    lines = [f"# gpu-check: {env.get('gpu', 'no device')} ({when})", ""]
    if simulated:
        lines += ["**Simulated device (CPU tensors that report cuda:0; tests/support/fake_cuda.py): no timing or "
                  "memory figure below is a GPU figure.**", ""]
    lines += [f"Result: **{'PASS' if code == 0 else 'FAIL'}** (exit {code}), planned into {minutes:g} minutes, "
              f"took {time.time() - started:.0f} s.", ""]
    if env:
        flags = env.get("precision_flags", {})
        lines += [f"- GPU: {env.get('gpu')}, {env.get('gpu_memory_gib')} GiB; driver {env.get('driver')}",
                  f"- torch {env.get('torch')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, Python "
                  f"{env.get('python')}, {env.get('cpu_count')} CPUs",
                  "- float32 flags per train.precision (matmul / cuDNN RNN / cuDNN conv / autocast): " +
                  "; ".join(f"{p}: {f['matmul']} / {f['cudnn_rnn']} / {f['cudnn_conv']} / {f['autocast']}"
                            for p, f in flags.items()), ""]
    rows = []
    for r in results:
        checks = r.get("checks", [])
        failed = sum(not c["ok"] for c in checks)
        why = r.get("skipped") or (r.get("error", "")[:120].replace("\n", " ") if r.get("error") else "")
        why = why or "; ".join(r.get("notes", []))[:160]
        rows.append([r["step"], r["status"], f"{r.get('seconds', 0):.0f}", f"{len(checks) - failed} of {len(checks)}", why])
    lines += ["## Steps", ""] + _table(["step", "status", "seconds", "checks passed", "notes"], rows) + [""]
    failed = [(r["step"], c) for r in results for c in r.get("checks", []) if not c["ok"]]
    if failed:
        lines += ["## Checks not met (memory and speed: findings; the others fail the run)", ""] + _table(["step", "check", "value", "limit"],
                                                   [[s, c["name"], c["value"], c["limit"]] for s, c in failed]) + [""]
    syncs = by.get("syncs", {}).get("figures", {}).get("syncs")
    if syncs:
        worst = max(syncs, key=lambda r: r["syncs"] / r["steps"])
        worst_chunk = max(syncs, key=lambda r: r["valid_syncs"] / r["valid_chunks"])
        lines += ["## Host syncs", "",
                  f"{len(syncs)} phases counted; most per training step: {worst['syncs'] / worst['steps']:.3f} "
                  f"({worst['body']}/{worst['head']} {worst['phase']}, {worst['syncs']} in {worst['steps']}); most per "
                  f"validation chunk: {worst_chunk['valid_syncs'] / worst_chunk['valid_chunks']:.2f}. Budget: 1 per 50 "
                  "steps, 1 per chunk.", ""]
    drop = by.get("correctness", {}).get("figures", {}).get("weight_drop_ms")
    if drop:
        lines += ["## Weight drop (cuDNN's flat-weight copy)", "",
                  f"One forward and backward of a {drop['n_in']} -> {drop['n_out']} LSTM layer (batch {drop['batch']}, "
                  f"{drop['steps']} steps; paper-ptb's first layer), median of 20: flat weights {drop['flat']:.2f} ms, "
                  f"weight-dropped {drop['dropped']:.2f} ms (cuDNN warned of non-contiguous weights: "
                  f"{'yes' if by['correctness']['figures'].get('weight_drop_cudnn_warned') else 'no'}).", ""]
    busy = by.get("correctness", {}).get("figures", {}).get("graphs_paper_busy")
    if busy:
        lines += ["## GPU-busy share per step (paper-ptb softmax, torch.profiler)", "",
                  "Kernel time (the union of the kernels' intervals) over wall time, per training step: near 1, "
                  "the step waits on kernels; well below, on the host.", ""]
        lines += _table(["path", "wall ms/step", "busy ms/step", "share"],
                        [[path, *([f"{v['wall_ms_per_step']:.2f}", f"{v['busy_ms_per_step']:.2f}", f"{v['share']:.1%}"]
                                  if v else ["not measured", "", ""])] for path, v in busy.items()]) + [""]
    memory = by.get("memory", {}).get("figures", {}).get("memory")
    if memory:
        lines += ["## Memory (peak allocated against audit/plan/memory.py's plan, CUDA context excluded)", ""] + _table(
            ["config", "arm", "job", "precision", "planned GB", "allocated GB", "reserved GB", "ratio"],
            [[m["config"], m["arm"], m["job"], m.get("precision", ""), f"{m['planned_gb']:.3g}", f"{m['allocated_gb']:.3g}",
              f"{m['reserved_gb']:.3g}", f"{m['ratio']:.2f}"] for m in memory]) + [""]
    speed = by.get("speed", {}).get("figures", {})
    if speed.get("one_run"):
        lines += ["## Speed (paper-ptb arms" + (", tiny model: not GPU figures" if simulated else "") + ")", ""]
        lines += _table(["family", "tokens/s, one run", "s/epoch", "peak GB"],
                        [[f, f"{v['tokens_per_second']:,.0f}", f"{v['seconds_per_epoch']:.1f}", f"{v['peak_gb']:.2f}"]
                         for f, v in speed["one_run"].items()]) + [""]
        if speed.get("graphs"):
            lines += [f"CUDA graphs (train.cuda_graphs), one run per family; shares of this GPU's measured fp32 "
                      f"matmul rate, {speed.get('fp32_tflops', float('nan')):.1f} TFLOP/s (TF32 off):", ""]
            lines += _table(["family", "eager tokens/s", "eager share", "graphs tokens/s", "x eager", "graphs share",
                             "timed steps replayed"],
                            [[f, f"{v['eager_tokens_per_second']:,.0f}", f"{v['eager_share']:.1%}",
                              *([f"{v['tokens_per_second']:,.0f}", f"{v['x_eager']:.2f}", f"{v['share']:.1%}",
                                 v["graph_steps"]] if "tokens_per_second" in v else ["not measured", "", "", ""])]
                             for f, v in speed["graphs"].items()]) + [""]
        if speed.get("precision_softmax"):
            lines += _table(["precision (softmax)", "tokens/s", "ms/step"],
                            [[p, f"{v['tokens_per_second']:,.0f}", f"{v['ms_per_step']:.1f}"]
                             for p, v in speed["precision_softmax"].items()]) + [""]
        if speed.get("seeds_per_process"):
            lines += _table(["seeds in one process (issue 57)", "k", "tokens/s", "x one run"],
                            [[f, r["k"], f"{r['tokens_per_second']:,.0f}", f"{r['x_one']:.2f}"]
                             for f, rows in speed["seeds_per_process"].items() for r in rows]) + [""]
        if speed.get("gpu_hours_seeds_per_process"):
            lines += ["Projected GPU-hours at each family's best k seeds per process, no MPS: " +
                      ", ".join(f"{name} {h:,.1f}" for name, h in speed["gpu_hours_seeds_per_process"].items()), ""]
        if speed.get("precision_head"):
            lines += _table(["train.precision: bf16_head (issue 57)", "tokens/s", "x the config's precision"],
                            [[f, f"{v['tokens_per_second']:,.0f}", f"{v['x_config']:.2f}"]
                             for f, v in speed["precision_head"].items()]) + [""]
        if speed.get("deterministic"):
            lines += _table(["train.deterministic: true", "tokens/s", "x default", "two runs bitwise equal"],
                            [[f, "error: " + v["error"][:200], "", ""] if "error" in v else
                             [f, f"{v['tokens_per_second']:,.0f}", f"{v['x_default']:.2f}",
                              {True: "yes", False: "no"}.get(v.get("bitwise_equal"), "")]
                             for f, v in speed["deterministic"].items()]) + [""]
        if speed.get("concurrency_softmax"):
            base = speed["concurrency_softmax"][0]["tokens_per_second"]
            rows = speed["concurrency_softmax"] + speed.get("concurrency_softmax_mps", [])
            lines += _table(["N concurrent (softmax)", "MPS", "aggregate tokens/s", "x N=1", "peak GB per run"],
                            [[r["n"], "yes" if r.get("mps") else "no", f"{r['tokens_per_second']:,.0f}",
                              f"{r['tokens_per_second'] / base:.2f}", f"{r['peak_gb']:.2f}"] for r in rows]) + [""]
            lines += [f"Best: {speed.get('best', 'N=' + str(speed.get('best_n')))}", ""]
        if speed.get("gpu_hours"):
            after = speed.get("gpu_hours_graphs", {})
            lines += _table(["paper config", "projected GPU-hours (eager, best N)"]
                            + (["CUDA graphs, one run per GPU"] if after else []),
                            [[k, f"{v:,.1f}"] + ([f"{after[k]:,.1f}"] if after else [])
                             for k, v in speed["gpu_hours"].items()]) + [""]
    dag = by.get("dag", {})
    if dag.get("figures"):
        walls = {k[:-len("_wall_seconds")]: v for k, v in dag["figures"].items() if k.endswith("_wall_seconds")}
        lines += ["## Smoke study through Snakemake", "",
                  "Wall seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in walls.items()) +
                  " (cpu = the CPU study; gpuN = --resources gpu=1 at runs_per_gpu N).", ""]
        lines += _table(["check", "value", "limit"], [[c["name"], c["value"], c["limit"]] for c in dag.get("checks", [])]) + [""]
    errors = [(r["step"], e) for r in results for e in ([r["error"]] if r.get("error") else []) + r.get("errors", [])]
    if errors:
        lines += ["## Errors (the step logs are under steps/)", ""] + [f"- {s}: {e[:400]}" for s, e in errors] + [""]
    lines += ["Every check with its value and limit: gpu-check.json.", ""]
    return "\n".join(lines)


def write(out: Path, results: list[dict], minutes: float, started: float, code: int) -> tuple[Path, Path]:
    env = next((r for r in results if r["step"] == "environment"), {}).get("figures", {})
    blob = {"gpu": env.get("gpu"), "simulated": env.get("simulated", True), "minutes": minutes,
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": round(time.time() - started, 1), "exit": code, "steps": results}
    json_path, md_path = out / "gpu-check.json", out / "gpu-check.md"
    atomic_write_text(json.dumps(blob, indent=1, default=str) + "\n", json_path)
    atomic_write_text(markdown(results, minutes, started, code), md_path)
    return json_path, md_path
