"""How fast this GPU trains paper-size runs (the measurements of ``python -m audit bench gpu``).

In order, each only while the step's time lasts: one run per head family of
``configs/paper-ptb.yaml`` (s/epoch from a timed window after warm-up; the config's own
precision), ``train.deterministic: true``'s cost per family and whether two of its runs end
bitwise equal, aggregate tokens/s of N concurrent softmax runs (separate processes, as Snakemake
starts them; N = 1 is the one run), the same under an MPS daemon of our own, the softmax arm's
step time under TF32, bf16 and bf16_head, each family at bf16_head (issue 57), the best N, then the projected GPU-hours of every paper config.
On a GPU, right after the one-run speeds: the fp32 matmul rate of this GPU, each family's share
of it, and one run per family with ``train.cuda_graphs: true`` (issue 47: its tokens/s, share and
the projected GPU-hours "after": graphs at one run per GPU, no MPS).
Every worker is a child process (``audit.bench.gpu.concurrent``), so this one never holds the
GPU. On the simulated device the model is tiny and no figure is a GPU figure. The checks here are
the speed targets of docs/gpus.md and the determinism findings: reported as met or missed, they
never fail the check (exit code).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

CONCURRENCY = [1, 2, 4, 8]
SEEDS_PER_PROCESS = [2, 4, 8]   # k seeds of one arm in one process (issue 57)
STEPS = {True: (3, 1), False: (60, 15)}   # (timed, warm-up) steps a run, on the simulated device / a GPU
TARGET_EPOCH_S = 15.0      # docs/gpus.md's targets: one paper-PTB softmax run at most 15 s per epoch,
TARGET_SPEEDUP = 5.0       # aggregate at least 5x one run,
TARGET_PTB_HOURS = 150.0   # paper-PTB at most 150 GPU-hours


def run(result, budget: float, simulated: bool) -> None:
    from audit.bench import gpu as bench
    from audit.config import load_study
    from audit.gpucheck.common import REPO

    deadline = time.time() + budget
    steps, warmup = STEPS[simulated]
    result.figure("timed_steps", steps)
    result.figure("warmup_steps", warmup)
    config = load_study(REPO / "configs" / "paper-ptb.yaml")
    corpus_name = config["data"]["corpora"][0]
    tokens = bench.TRAIN_TOKENS[corpus_name]
    families = bench.families()
    base = families[0]  # the plain softmax: the targets of docs/gpus.md are its run's
    one, rates = {}, {}

    def measure(label: str, settings: dict, corpus: str, n: int, env: dict | None = None, group: int = 1) -> dict | None:
        try:
            # a measurement may run a minute past the step's budget, never to its kill
            return bench.concurrent(settings, corpus, n, steps, warmup, env, timeout=max(deadline - time.time(), 0) + 45,
                                    group=group)
        except Exception as err:  # a failed measurement leaves the others standing
            result.data.setdefault("errors", []).append(f"{label}: {' '.join(str(err).split())[:500]}")
            return None

    def target(name: str, value, limit: str, ok: bool) -> None:
        if simulated:  # a tiny model on a CPU says nothing about the GPU targets of docs/gpus.md
            result.figure(name, value)
        else:
            result.check(name, value, limit, ok)

    def left() -> bool:
        if time.time() < deadline:
            return True
        result.data["incomplete"] = True
        return False

    with tempfile.TemporaryDirectory(prefix="audit-gpu-check-") as tmp:
        os.environ.update(AUDIT_GPU_LOCK_DIR=f"{tmp}/locks", AUDIT_GPUS="0", AUDIT_RUNS_PER_GPU=str(max(CONCURRENCY) + 1))
        corpora = {}
        for family in families:
            if not left():
                result.note(f"one-run speed of {family}: out of time")
                continue
            settings = bench.arm_settings(config, family, simulated, "cuda")
            span = settings["train"]["batch_size"] * (settings["train"]["bptt"] + settings["train"]["max_seq_len_delta"])
            corpora[family] = str(bench.fake_corpus(10000, max(50_000, 4 * (steps + warmup + 2) * span),
                                                    Path(tmp) / f"{family}.pt"))
            row = measure(f"one {family} run", settings, corpora[family], 1)
            if row is None:
                continue
            one[family] = row
            rates[family] = row["tokens_per_second"]
            if family == base:
                epoch = tokens / row["tokens_per_second"]
                target(f"s/epoch of one paper-ptb {base} run", round(epoch, 2),
                       f"<= {TARGET_EPOCH_S:g} (target, docs/gpus.md)", epoch <= TARGET_EPOCH_S)
        result.figure("one_run", {f: {"tokens_per_second": r["tokens_per_second"],
                                      "seconds_per_epoch": tokens / r["tokens_per_second"],
                                      "peak_gb": r["peak_gb"]} for f, r in one.items()})
        graph_rates = graph_path(result, bench, config, corpora, one, simulated, measure, left)
        # issue 57's measurements first: the open GPU work of this step
        result.figure("precision_head", head_precision(result, bench, config, corpora, one, simulated, measure, left))
        grouped = seeds_per_process(result, bench, config, corpora, one, simulated, measure, left)
        result.figure("seeds_per_process", grouped)
        best = {f: max(r["x_one"] for r in rows) for f, rows in grouped.items() if rows}
        if best and len(best) == len(families):
            hours = {name: bench.projected_hours(load_study(REPO / "configs" / f"{name}.yaml"),
                                                 {f: one[f]["tokens_per_second"] * best[f] for f in families})
                     for name in bench.PAPER_CONFIGS}
            result.figure("gpu_hours_seeds_per_process", hours)
            target("projected GPU-hours, paper-ptb, the best k seeds per process (no MPS)", round(hours["paper-ptb"], 1),
                   f"<= {TARGET_PTB_HOURS:g} (target, issue 57)", hours["paper-ptb"] <= TARGET_PTB_HOURS)
        result.figure("deterministic", deterministic_cost(result, bench, config, corpora, one, simulated, left, deadline))
        def concurrency(env: dict | None = None, how: str = "") -> list[dict]:
            """Aggregate rows of N = 2, 4, 8 concurrent base runs (N = 1 is the one run above)."""
            rows = []
            for n in CONCURRENCY[1:]:
                if not left():
                    result.note(f"concurrency N={n}{how}: out of time")
                    continue
                row = measure(f"{base} N={n}{how}", bench.arm_settings(config, base, simulated, "cuda"), corpora[base],
                              n, env)
                if row is not None:
                    kept = {k: row[k] for k in ("n", "tokens_per_second", "peak_gb")}
                    rows.append({**kept, "mps": True} if env else kept)
            return rows

        sweep = [{"n": 1, **{k: one[base][k] for k in ("tokens_per_second", "peak_gb")}}] + concurrency() \
            if base in one else []
        result.figure("concurrency_softmax", sweep)  # the JSON key report.py reads
        mps = mps_sweep(result, bench, concurrency, simulated, tmp) if sweep else []
        result.figure("concurrency_softmax_mps", mps)
        precision = {}
        paper_mode = bench.arm_settings(config, base, simulated, "cuda")["train"]["precision"]
        for mode in ("fp32", "tf32", "bf16", "bf16_head"):
            if base not in one or (mode != paper_mode and not left()):   # the config's own: measured above
                result.note(f"precision {mode}: out of time")
                continue
            if simulated and mode == "bf16":
                result.note("precision bf16: the simulated device has no bf16 autocast")
                continue
            settings = bench.arm_settings(config, base, simulated, "cuda")
            settings["train"]["precision"] = mode
            # the config's own precision is the one run above: the same settings, not run twice
            row = one.get(base) if mode == paper_mode else measure(f"{base} at {mode}", settings, corpora[base], 1)
            if row is None:
                continue
            step_tokens = settings["train"]["batch_size"] * settings["train"]["bptt"]
            precision[mode] = {"tokens_per_second": row["tokens_per_second"],
                               "ms_per_step": 1000 * step_tokens / row["tokens_per_second"]}
        result.figure("precision_softmax", precision)  # the JSON key report.py reads
        if sweep:
            best = max(sweep + mps, key=lambda r: r["tokens_per_second"])
            speedup = best["tokens_per_second"] / sweep[0]["tokens_per_second"]
            how = f"N={best['n']}" + (" under MPS" if best.get("mps") else "")
            result.figure("best_n", best["n"])
            result.figure("best", how)
            target(f"aggregate speed-up at the best N ({base})", f"{speedup:.2f}x at {how}",
                   f">= {TARGET_SPEEDUP:g}x (target, docs/gpus.md)", speedup >= TARGET_SPEEDUP)
            # the best N's speed-up applies to the families swept at N = 1 only: stated in the report
            for family in rates:
                rates[family] *= speedup
            result.note(f"GPU-hours assume {base}'s speed-up at {how} ({speedup:.2f}x) for every family")
        if len(rates) == len(families):
            hours = {}
            for name in bench.PAPER_CONFIGS:  # the AWD-LSTM configs: the rates above are that body's
                hours[name] = bench.projected_hours(load_study(REPO / "configs" / f"{name}.yaml"), rates)
            result.figure("gpu_hours", hours)
            if "paper-ptb" in hours:
                target("projected GPU-hours, paper-ptb", round(hours["paper-ptb"], 1),
                       f"<= {TARGET_PTB_HOURS:g} (target, docs/gpus.md)", hours["paper-ptb"] <= TARGET_PTB_HOURS)
        if graph_rates and len(graph_rates) == len(families):
            after = {name: bench.projected_hours(load_study(REPO / "configs" / f"{name}.yaml"), graph_rates)
                     for name in bench.PAPER_CONFIGS}
            result.figure("gpu_hours_graphs", after)
            target("projected GPU-hours, paper-ptb, CUDA graphs, one run per GPU (no MPS)", round(after["paper-ptb"], 1),
                   f"<= {TARGET_PTB_HOURS:g} (target, issue 47)", after["paper-ptb"] <= TARGET_PTB_HOURS)


def seeds_per_process(result, bench, config, corpora, one, simulated, measure, left) -> dict:
    """Issue 57: k seeds of each family in one process, one step of each in turn on streams of
    their own (``audit.train.group``), no MPS; {family: [{k, tokens_per_second, x_one}]}, where
    x_one is the aggregate against the family's one run above."""
    rows: dict[str, list] = {}
    # the simulated device proves the path with one family and one k (no figure is a GPU's)
    for family, eager in list(one.items())[:1 if simulated else None]:
        settings = bench.arm_settings(config, family, simulated, "cuda")
        for k in SEEDS_PER_PROCESS[:1 if simulated else None]:
            if not left():
                result.note(f"{k} seeds of {family} in one process: out of time")
                continue
            row = measure(f"{k} seeds of {family} in one process", settings, corpora[family], 1, group=k)
            if row is not None:
                rows.setdefault(family, []).append({"k": k, "tokens_per_second": row["tokens_per_second"],
                                                    "x_one": row["tokens_per_second"] / eager["tokens_per_second"]})
    return rows


def head_precision(result, bench, config, corpora, one, simulated, measure, left) -> dict:
    """Issue 57: each family's one run with ``train.precision: bf16_head`` (the head's matmuls in
    bfloat16) against its run at the config's precision above; {family: {tokens_per_second,
    x_config}}. On the simulated device the bfloat16 matmul is emulated in float32 kernels
    (``audit.model.matmuls``): its speed says nothing of a GPU's."""
    rows = {}
    for family, eager in list(one.items())[:1 if simulated else None]:   # simulated: the path, once
        if not left():
            result.note(f"bf16_head of {family}: out of time")
            continue
        settings = bench.arm_settings(config, family, simulated, "cuda")
        if settings["train"]["precision"] == "bf16_head":
            continue   # measured above
        settings["train"]["precision"] = "bf16_head"
        row = measure(f"{family} at bf16_head", settings, corpora[family], 1)
        if row is not None:
            rows[family] = {"tokens_per_second": row["tokens_per_second"],
                            "x_config": row["tokens_per_second"] / eager["tokens_per_second"]}
    return rows


def graph_path(result, bench, config, corpora, one, simulated, measure, left) -> dict:
    """The fp32 matmul rate of this GPU, each family's share of it eager and through CUDA graphs
    (one run each, right after the eager ones); {family: graph tokens/s}. Not on the simulated
    device: no CUDA graphs on a CPU, and its matmul rate is the CPU's."""
    if simulated:
        result.note("CUDA graphs and the fp32 peak: not on the simulated device")
        return {}
    try:
        rate = bench.measure_fp32_rate("cuda")
    except Exception as err:
        result.data.setdefault("errors", []).append(f"fp32 rate: {' '.join(str(err).split())[:500]}")
        return {}
    result.figure("fp32_tflops", round(rate / 1e12, 2))
    rows, rates = {}, {}
    for family, eager in one.items():
        settings = bench.arm_settings(config, family, simulated, "cuda")
        row = {"eager_tokens_per_second": eager["tokens_per_second"],
               "eager_share": bench.share_of_peak(settings, eager["tokens_per_second"], rate)}
        if left():
            graphed = measure(f"one {family} run, CUDA graphs", bench.with_graphs(settings), corpora[family], 1)
            if graphed is not None:
                rates[family] = graphed["tokens_per_second"]
                row.update(tokens_per_second=graphed["tokens_per_second"], peak_gb=graphed["peak_gb"],
                           x_eager=graphed["tokens_per_second"] / eager["tokens_per_second"],
                           share=bench.share_of_peak(settings, graphed["tokens_per_second"], rate),
                           graph_steps=graphed["graph_steps"])
        else:
            result.note(f"CUDA graphs {family}: out of time")
        rows[family] = row
    result.figure("graphs", rows)
    return rates


def deterministic_cost(result, bench, config, corpora, one, simulated, left, deadline: float) -> dict:
    """``train.deterministic: true`` against the default, per family timed above: tokens/s and
    the ratio to the one run's. The baseline runs twice: its two runs of one seed must end with
    bitwise equal weights (the key's promise, docs/gpus.md "Determinism"). An arm that torch
    refuses to run deterministically (an op with no deterministic CUDA kernel) is a finding,
    recorded with torch's message, not an error of the step."""
    base = bench.families()[0]
    out = {}
    for family, runs in [(f, 2 if f == base else 1) for f in bench.families() if f in one]:
        rows = []
        for _ in range(runs):
            if not left():
                result.note(f"deterministic {family}: out of time")
                break
            settings = bench.arm_settings(config, family, simulated, "cuda")
            settings["train"]["deterministic"] = True
            try:
                rows.append(bench.concurrent(settings, corpora[family], 1, *STEPS[simulated],
                                             timeout=max(deadline - time.time(), 0) + 45))
            except Exception as err:
                message = " ".join(str(err).split())[-400:]
                if not simulated:   # the simulated device's CPU kernels say nothing of CUDA's
                    result.check(f"train.deterministic runs {family}", message, "runs", False)
                out[family] = {"error": message}
                break
        if not rows:
            continue
        tps = sorted(r["tokens_per_second"] for r in rows)[0]   # the slower of the two: a cost, not a best case
        out[family] = {"tokens_per_second": tps, "x_default": tps / one[family]["tokens_per_second"], "runs": len(rows)}
        if len(rows) == 2:
            same = rows[0]["weights_sha256"] == rows[1]["weights_sha256"]
            out[family]["bitwise_equal"] = same
            if not simulated:
                result.check(f"train.deterministic: two {family} runs of one seed end bitwise equal",
                             "equal" if same else "differ", "equal", same)
    return out


def mps_sweep(result, bench, concurrency, simulated: bool, tmp: str) -> list[dict]:
    """``concurrency`` again with an NVIDIA MPS control daemon of our own (private pipe and log
    folders, stopped at the end): CUDA time-slices between processes, MPS lets their kernels run
    at once. Skipped, with the reason, where it cannot start."""
    if simulated:
        result.note("MPS: not on the simulated device")
        return []
    env = bench.start_mps(f"{tmp}/mps")
    if env is None:
        result.note("MPS: nvidia-cuda-mps-control not found or did not start: skipped")
        return []
    try:
        return concurrency(env, " under MPS")
    finally:
        bench.stop_mps(env)
