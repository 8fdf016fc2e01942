"""Time per training step of every head relative to softmax (``python -m audit bench heads``).

The heads: every registered head a one-arm study trains (``audit.bench.picks``), in registry
order, the plain softmax first; a head with the options c and k at LK's published GSS shape.
The targets of issue 3 are read from ``configs/bench/heads.yaml``.

One step = forward of the head on a fixed random h (T, B, d), NLL loss on random targets,
backward (into h as well, as in training, where the gradient flows on into the LSTM) and an
SGD step on the head's parameters (tied embedding included). All heads run in the same
process, interleaved round-robin so that drifts in machine load hit every head alike; the
figure per head is the median over repetitions. CUDA is synchronised around each step and
timed by the wall clock. On the CPU the default clock is the process's CPU time: on a machine
shared with other jobs the wall clock also counts the time the process waits for a core, which
made repeated wall-clock ratios swing by +-20% on the 2-core development machine.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from pathlib import Path

import torch
import torch.nn as nn
import yaml

from audit.bench import picks
from audit.errors import AuditError
from audit.model.heads import HEADS, HeadSpec, build_head
from audit.model.heads.base import mean_nll
from audit.train.steps import keep_freed_memory

DEFAULT_HEADS = picks.standalone_heads()
TARGETS_YAML = Path(__file__).resolve().parents[2] / "configs" / "bench" / "heads.yaml"


@functools.cache
def targets() -> dict:
    """Issue 3's targets: ``ratio`` (head -> largest accepted ratio to the baseline) and
    ``faster_than`` (head -> the head it must beat), from ``TARGETS_YAML``."""
    data = yaml.safe_load(TARGETS_YAML.read_text(encoding="utf-8"))
    return {"ratio": dict(data.get("ratio") or {}), "faster_than": dict(data.get("faster_than") or {})}


class _Arm:
    """One head with its embedding, optimiser and fixed inputs."""

    def __init__(self, name, T, B, d, V, device, seed):
        torch.manual_seed(seed)
        emb = nn.Embedding(V, d).to(device)
        self.head = build_head(name, HeadSpec(d_in=d, embedding=emb, options=picks.shape_options(name))).to(device)
        self.head.train()
        extra = self.head.extra_param_groups()
        special = {id(p) for group in extra for p in group["params"]}
        main = [p for p in self.head.parameters() if p.requires_grad and id(p) not in special]
        self.opt = torch.optim.SGD([{"params": main}] + extra, lr=1.0)
        self.h = torch.randn(T, B, d, device=device).mul_(0.5).requires_grad_(True)
        self.targets = torch.randint(0, V, (T, B), device=device)

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        self.h.grad = None
        picked = self.head.target_log_probs(self.h, self.targets)   # the trainer's loss path
        loss = mean_nll(self.head(self.h) if picked is None else picked, self.targets)
        loss.backward()
        self.opt.step()


def bench(heads, T=35, B=20, d=400, V=10000, reps=9, warmup=2, device="cpu", seed=0, clock="auto"):
    """Median seconds per training step of each head.

    Args:
        heads: registry names; the plain softmax (``picks.baseline()``) is added first when
            missing (the reference).
        T, B, d, V: batch shape (positions, sequences), embedding size, vocabulary.
        reps: timed repetitions per head; warmup: untimed ones first.
        device: "cpu" or "cuda".
        clock: "wall", "cpu" (process CPU time, all threads) or "auto" (cpu on the CPU,
            wall on CUDA).

    Returns:
        dict name -> list of per-step seconds (length ``reps``).
    """
    base = picks.baseline()
    heads = [base] + [h for h in heads if h != base]
    unknown = [h for h in heads if h not in HEADS]
    if unknown:
        raise AuditError(f"bench heads: unknown head {unknown[0]!r}; known: {', '.join(sorted(HEADS))}")
    device = torch.device(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if clock == "auto":
        clock = "wall" if device.type == "cuda" else "cpu"
    now = {"wall": time.perf_counter, "cpu": time.process_time}[clock]
    # as the trainer does: without it a third of MoS's CPU time (K = 15) was the system time of
    # page faults on its freshly mapped (T, B, K, V) tensors, and its ratio moved 24-29x run to run
    keep_freed_memory()
    arms = {name: _Arm(name, T, B, d, V, device, seed) for name in heads}
    times = {name: [] for name in heads}
    for rep in range(warmup + reps):
        for name, arm in arms.items():
            sync()
            start = now()
            arm.step()
            sync()
            if rep >= warmup:
                times[name].append(now() - start)
    return times


def format_table(times: dict) -> str:
    """Table of median ms/step and ratio to the plain softmax, with the issue's targets."""
    reference = picks.baseline()
    base = statistics.median(times[reference])
    goals = targets()
    lines = [f"{'head':14s} {'ms/step':>9s} {'x ' + reference:>10s}  target"]
    for name, values in times.items():
        med = statistics.median(values)
        ratio = med / base
        target = goals["ratio"].get(name)
        rival = goals["faster_than"].get(name)
        if rival in times:
            verdict = f"< {rival}: " + ("ok" if med < statistics.median(times[rival]) else "MISSED")
        elif target:
            verdict = f"<= {target:.2f}: " + ("ok" if ratio <= target else "MISSED")
        else:
            verdict = ""
        lines.append(f"{name:14s} {1000 * med:9.2f} {ratio:10.3f}  {verdict}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit bench heads", description=__doc__)
    parser.add_argument("--T", type=int, default=35, help="positions per sequence")
    parser.add_argument("--B", type=int, default=20, help="sequences per batch")
    parser.add_argument("--d", type=int, default=400, help="embedding size (= d_in)")
    parser.add_argument("--V", type=int, default=10000, help="vocabulary size")
    parser.add_argument("--reps", type=int, default=9, help="timed steps per head (median)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--heads", default=",".join(DEFAULT_HEADS), help="comma-separated registry names")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads (default 1, as the trainer's default; 0: PyTorch's choice)")
    parser.add_argument("--clock", default="auto", choices=["auto", "wall", "cpu"],
                        help="auto: process CPU time on the CPU, wall clock on CUDA")
    args = parser.parse_args(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if device == "cuda" and not torch.cuda.is_available():
        raise AuditError("bench heads: --device cuda but no CUDA device is available")
    if args.threads:
        torch.set_num_threads(args.threads)
    times = bench([h for h in args.heads.split(",") if h], args.T, args.B, args.d, args.V,
                  args.reps, args.warmup, device, clock=args.clock)
    name = torch.cuda.get_device_name() if device == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    clock = args.clock if args.clock != "auto" else ("wall" if device == "cuda" else "cpu")
    print(f"T={args.T} B={args.B} d={args.d} V={args.V} on {name}; median {clock} time of {args.reps} steps")
    print(format_table(times))
    return 0
