"""How fast this GPU trains paper-size runs (the measurements of ``python -m audit bench gpu``).

In order, each only while the step's time lasts: one run per head family of
``configs/paper-ptb.yaml`` (s/epoch from a timed window after warm-up), the softmax arm's step
time under fp32, TF32 and bf16, aggregate tokens/s of N concurrent softmax runs (separate
processes, as Snakemake starts them) and the best N, then the projected GPU-hours of every paper
config. Every worker is a child process (``audit.bench.gpu.concurrent``), so this one never holds
the GPU. On the simulated device the model is tiny and no figure is a GPU figure. The checks here
are the speed targets of docs/gpus.md: reported as met or missed, they never fail the check (exit
code).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

CONCURRENCY = [1, 2, 4, 8]
TARGET_EPOCH_S = 15.0      # docs/gpus.md's targets: one paper-PTB softmax run at most 15 s per epoch,
TARGET_SPEEDUP = 5.0       # aggregate at least 5x one run,
TARGET_PTB_HOURS = 150.0   # paper-PTB at most 150 GPU-hours


def run(result, budget: float, simulated: bool) -> None:
    from audit.bench import gpu as bench
    from audit.config import load_study
    from audit.gpucheck.common import REPO

    deadline = time.time() + budget
    steps, warmup = (3, 1) if simulated else (60, 15)
    result.figure("timed_steps", steps)
    result.figure("warmup_steps", warmup)
    config = load_study(REPO / "configs" / "paper-ptb.yaml")
    corpus_name = config["data"]["corpora"][0]
    tokens = bench.TRAIN_TOKENS[corpus_name]
    families = bench.families()
    base = families[0]  # the plain softmax: the targets of docs/gpus.md are its run's
    one, rates = {}, {}

    def measure(label: str, settings: dict, corpus: str, n: int) -> dict | None:
        try:
            return bench.concurrent(settings, corpus, n, steps, warmup)
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
        precision = {}
        for mode in ("fp32", "tf32", "bf16"):
            if base not in corpora or not left():
                result.note(f"precision {mode}: out of time")
                continue
            if simulated and mode == "bf16":
                result.note("precision bf16: the simulated device has no bf16 autocast")
                continue
            settings = bench.arm_settings(config, base, simulated, "cuda")
            settings["train"]["precision"] = mode
            row = measure(f"{base} at {mode}", settings, corpora[base], 1)
            if row is None:
                continue
            step_tokens = settings["train"]["batch_size"] * settings["train"]["bptt"]
            precision[mode] = {"tokens_per_second": row["tokens_per_second"],
                               "ms_per_step": 1000 * step_tokens / row["tokens_per_second"]}
        result.figure("precision_softmax", precision)  # the JSON key report.py reads
        sweep = []
        for n in CONCURRENCY:
            if base not in corpora or not left():
                result.note(f"concurrency N={n}: out of time")
                continue
            settings = bench.arm_settings(config, base, simulated, "cuda")
            row = measure(f"{base} N={n}", settings, corpora[base], n)
            if row is not None:
                sweep.append(row)
        result.figure("concurrency_softmax", sweep)  # the JSON key report.py reads
        if sweep:
            best = max(sweep, key=lambda r: r["tokens_per_second"])
            speedup = best["tokens_per_second"] / sweep[0]["tokens_per_second"]
            result.figure("best_n", best["n"])
            target(f"aggregate speed-up at the best N ({base})", f"{speedup:.2f}x at N={best['n']}",
                   f">= {TARGET_SPEEDUP:g}x (target, docs/gpus.md)", speedup >= TARGET_SPEEDUP)
            # the best N's speed-up applies to the families swept at N = 1 only: stated in the report
            for family in rates:
                rates[family] *= speedup
            result.note(f"GPU-hours assume {base}'s speed-up at N={best['n']} ({speedup:.2f}x) for every family")
        if len(rates) == len(families):
            hours = {}
            for name in bench.PAPER_CONFIGS:  # the AWD-LSTM configs: the rates above are that body's
                hours[name] = bench.projected_hours(load_study(REPO / "configs" / f"{name}.yaml"), rates)
            result.figure("gpu_hours", hours)
            if "paper-ptb" in hours:
                target("projected GPU-hours, paper-ptb", round(hours["paper-ptb"], 1),
                       f"<= {TARGET_PTB_HOURS:g} (target, docs/gpus.md)", hours["paper-ptb"] <= TARGET_PTB_HOURS)
