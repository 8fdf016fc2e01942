"""What paper scale costs on a GPU (``python -m audit bench gpu``).

For each head family of ``configs/paper-ptb.yaml`` (``families()``: softmax, plif, mos), with that
arm's model and training settings and the real ``Trainer.train_epoch`` on random token ids of
the corpus's vocabulary size (speed does not depend on which words):

1. one run: seconds per epoch = the corpus's training tokens / the tokens per second of a timed
   window of ``--steps`` steps after ``--warmup`` untimed ones (training only; validation adds
   a pass over ~8% as many tokens without backward);
2. N concurrent runs, N in ``--concurrency`` (separate processes, as Snakemake starts them):
   aggregate tokens/s over a common timed window (every worker warms up, then all start
   together); the best N and its speed-up over one run;
3. projected GPU-hours of every paper config: sum over its runs of epochs x training tokens /
   (aggregate tokens/s at the best N of the run's family, per GPU);
4. the same concurrency sweep under NVIDIA MPS where ``nvidia-cuda-mps-control`` starts (N = 1
   is the one run of step 1 in both sweeps, and every ratio is to it);
5. on a GPU, one run per family with ``train.cuda_graphs: true`` (audit/train/graphs.py; at least
   ``GRAPH_WARMUP`` warm-up steps, so that most BPTT lengths are captured before the timed
   window), each path's share of the GPU's fp32 peak (training FLOPs per token,
   ``audit.plan.resources.train_flops_per_token``, x tokens/s over the fp32 matmul rate measured
   on this GPU, TF32 off: ``fp32_rate``), and the projected GPU-hours before (eager, best N) and
   after (graphs, one run per GPU, no MPS).

On a CPU it runs a tiny size (``--tiny`` is implied), so CI exercises every step; its figures
say nothing about GPUs.

The parent process never touches CUDA: which device there is, and every measurement (the one
run included), comes from child processes. A parent holding a CUDA context, its cached memory
and a GPU slot through the sweep would skew the figures it reports, and each child's peak
memory counter starts at zero, so no head's peak carries over to the next.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from audit.errors import AuditError
from audit.stats.sequential.schedule import planned_seeds

TRAIN_TOKENS = {"ptb": 929_589, "wikitext-2": 2_088_628, "wikitext-103": 103_227_021}  # training tokens incl. <eos> (LM convention)
PAPER_CONFIGS = ["paper-ptb", "paper-wt2", "fair-comparison-paper", "gss-grid-paper-ptb", "gss-grid-paper-wt2",
                 "mos-sweep-paper-ptb"]
CONCURRENCY = [1, 2, 4, 8, 12, 16]
# warm-up steps of a CUDA-graph run: a length's first step is eager and its second a capture; the
# AWD-LSTM's lengths are N(70, 5) with p 0.95, so 150 steps capture the common ones (the rare
# bptt/2 lengths stay eager in the window: counted in its ``graph_steps``)
GRAPH_WARMUP = 150
FP32_RATE_SIZE = {"cuda": 8192, "cpu": 1024}   # n of the n x n float32 matmuls timed for the fp32 peak
REPO = Path(__file__).resolve().parent.parent.parent


def families() -> list[str]:
    """The families timed, each named by the head that stands for it, the baseline's first: the
    plain softmax (the element-wise maps of the softmax cost within 10% of it, docs/benchmarks.md),
    PLIF (its knot table) and MoS (K softmaxes); ``audit.bench.picks``."""
    from audit.bench import picks

    return [picks.baseline(), picks.trained_knots(), picks.latent_mixture()]


def family_of(head: str) -> str:
    """The family ``head`` (a registry name or an import path) is timed as: its ``timing_family``
    when that is one of ``families()`` (PLIF's frozen control, the other mixtures), else the
    baseline's (the element-wise maps and the matched softmax)."""
    from audit.model.heads import head_class

    timed = families()
    family = head_class(head).timing_family
    return family if family in timed else timed[0]


def arm_settings(config: dict, family: str, tiny: bool, device: str) -> dict:
    """Run settings of the config's first arm of ``family`` (a tiny model on the CPU)."""
    from audit.config import run_settings

    entry = next((e for e in config["heads"] if family_of(e["head"]) == family), None)
    if entry is None:
        raise AuditError(f"bench gpu: no arm of family {family!r} in study {config['study']!r}")
    settings = run_settings(config, config["data"]["corpora"][0], entry["name"], planned_seeds(config)[0])
    settings["train"].update(device=device, epochs=1)
    settings.pop("max_tokens", None)
    if tiny:
        settings["model"].update(emb_size=16, hidden_size=32, last_size=16 if settings["model"]["last_size"] else None)
        settings["train"].update(batch_size=4, bptt=8, max_seq_len_delta=4)
        if "knots" in settings["options"]:
            settings["options"]["knots"] = 100
        if "experts" in settings["options"]:
            settings["options"]["experts"] = 3
        if "match" in settings:
            settings["match"]["model"].update(emb_size=16, hidden_size=32, last_size=16)
    return settings


def fake_corpus(vocab: int, tokens: int, path: Path) -> Path:
    """A corpus cache of uniformly random ids (seeded) with the real vocabulary size."""
    import numpy as np
    import torch

    from audit.data.corpus import Corpus, save

    ids = torch.from_numpy(np.random.default_rng(0).integers(0, vocab, tokens, dtype=np.int64))
    save(Corpus(vocab=[f"w{i}" for i in range(vocab)], train=ids, valid=ids[:2000].clone(), test=ids[:2000].clone()), path)
    return path


def wait_for_start(barrier: Path | None) -> None:
    """Say this worker is warm, then wait for ``concurrent``'s common start (no barrier: go now)."""
    if barrier is not None:
        (barrier / f"ready-{os.getpid()}").touch()
        while not (barrier / "go").exists():
            time.sleep(0.005)


def worker(settings: dict, corpus: str, steps: int, warmup: int, barrier: Path | None) -> dict:
    """Warm up, wait for the barrier, time ``steps`` steps; tokens, start and end (wall clock)."""
    import torch

    from audit.train.trainer import Trainer, mean_sequence_length

    t = settings["train"]
    mean_len = mean_sequence_length(t["bptt"], t["variable_bptt"])
    trainer = Trainer(settings, corpus, log=lambda msg: None)
    if trainer.train.cuda_graphs:
        warmup = max(warmup, GRAPH_WARMUP)
    sync = torch.cuda.synchronize if trainer.device.type == "cuda" else (lambda: None)
    trainer.t["epoch_tokens"] = int(warmup * mean_len * t["batch_size"]) or 1
    trainer.train_epoch()
    sync()
    wait_for_start(barrier)
    trainer.t["epoch_tokens"] = int(steps * mean_len * t["batch_size"])
    start = time.time()
    row = trainer.train_epoch()
    sync()
    end = time.time()
    memory = torch.cuda.max_memory_reserved() if trainer.device.type == "cuda" else 0
    tokens = row["tokens_per_second"] * row["train_seconds"]
    # the trained weights' digest: two runs of one seed agree bitwise iff their digests do
    # (``train.deterministic``'s promise, checked by gpu-check's speed step)
    digest = hashlib.sha256()
    for name, tensor in sorted(trainer.model.state_dict().items()):
        digest.update(name.encode() + tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return {"tokens": tokens, "start": start, "end": end, "peak_bytes": memory, "weights_sha256": digest.hexdigest(),
            "graph_steps": row.get("graph_steps", 0)}


def group_worker(settings: dict, corpus: str, k: int, steps: int, warmup: int, barrier: Path | None) -> dict:
    """``worker`` for k seeds of one arm in this one process, one step of each in turn
    (``audit.train.group``, issue 57): the tokens of all k over the timed window."""
    import torch

    from audit.train.group import Turns, epochs_in_turn, stream_for
    from audit.train.trainer import Trainer, mean_sequence_length

    t = settings["train"]
    mean_len = mean_sequence_length(t["bptt"], t["variable_bptt"])
    turns, trainers = Turns(), []
    for j in range(k):
        trainers.append(Trainer(dict(settings, seed=settings["seed"] + j), corpus, log=lambda msg: None))
        turns.keep(j, trainers[-1].device)
    streams = [stream_for(tr.device) for tr in trainers]
    sync = torch.cuda.synchronize if trainers[0].device.type == "cuda" else (lambda: None)

    def epoch(n_steps: int) -> dict[int, dict]:
        for tr in trainers:
            tr.t["epoch_tokens"] = int(n_steps * mean_len * t["batch_size"]) or 1

        def failed(j, err):
            raise err

        rows = epochs_in_turn(trainers, list(range(k)), turns, streams, failed)
        sync()
        return rows

    epoch(warmup)
    wait_for_start(barrier)
    start = time.time()
    rows = epoch(steps)
    end = time.time()
    memory = torch.cuda.max_memory_reserved() if trainers[0].device.type == "cuda" else 0
    return {"tokens": sum(r["tokens"] for r in rows.values()), "start": start, "end": end, "peak_bytes": memory,
            "weights_sha256": "", "graph_steps": 0}


def fp32_rate(device: str) -> float:
    """FLOP/s of float32 n x n matmuls on ``device`` with TF32 off: the peak a run's share is of
    (measured, not a datasheet's: what cuBLAS reaches on this GPU at its clocks and power)."""
    import torch

    n = FP32_RATE_SIZE[device]
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(3):
        a @ b
    sync()
    reps = 20 if device == "cuda" else 2
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync()
    return 2 * n ** 3 * reps / (time.perf_counter() - start)


def measure_fp32_rate(device: str) -> float:
    """``fp32_rate`` measured by a child process (this one never touches CUDA)."""
    proc = subprocess.run([sys.executable, "-m", "audit", "bench", "gpu", "--fp32-rate", device], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode:
        raise AuditError(f"bench gpu: the fp32 rate's child failed: {proc.stderr[-400:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["flops"]


def with_graphs(settings: dict) -> dict:
    """``settings`` with ``train.cuda_graphs: true`` (a copy)."""
    return {**settings, "train": {**settings["train"], "cuda_graphs": True}}


def share_of_peak(settings: dict, tokens_per_second: float, rate: float) -> float:
    """The fraction of ``rate`` (FLOP/s) a run at ``tokens_per_second`` uses: its training FLOPs
    per token (the model's multiply-adds, forward and backward) times its tokens/s over the rate."""
    from audit.plan.resources import run_flops_per_token

    return run_flops_per_token(settings) * tokens_per_second / rate


def probe_device() -> dict:
    """torch version, CUDA availability, GPU name and memory, asked of a child process."""
    code = ("import json, torch; c = torch.cuda.is_available(); print(json.dumps({'torch': torch.__version__, "
            "'cuda': c, 'name': torch.cuda.get_device_name() if c else '', "
            "'gib': torch.cuda.get_device_properties(0).total_memory / 2**30 if c else 0}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=600)
    if done.returncode:
        raise AuditError(f"bench gpu: probing the device failed: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def concurrent(settings: dict, corpus: str, n: int, steps: int, warmup: int, env: dict | None = None,
               timeout: float = 1800, group: int = 1) -> dict:
    """N worker processes with a common start: aggregate tokens/s over the union window (each
    process training ``group`` seeds in turn, ``group_worker``, when above 1). Workers
    still running after ``timeout`` seconds are killed and AuditError raised (a hung worker, an
    MPS daemon that never answers, must not take the caller's other figures down with it)."""
    with tempfile.TemporaryDirectory(prefix="audit-bench-gpu-") as tmp:
        barrier = Path(tmp)
        cmd = [sys.executable, "-m", "audit", "bench", "gpu", "--worker", json.dumps(settings), "--corpus", corpus,
               "--steps", str(steps), "--warmup", str(warmup), "--barrier", tmp, "--group", str(group)]
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                  env={**os.environ, **(env or {})}) for _ in range(n)]
        deadline = time.time() + timeout
        while len(list(barrier.glob("ready-*"))) < n:
            if any(p.poll() not in (None, 0) for p in procs) or time.time() > deadline:
                for p in procs:
                    p.kill()
                errors = [p.communicate()[1][-400:] for p in procs if p.returncode]
                raise AuditError(f"bench gpu: a worker of {n} failed: {errors[0] if errors else 'timeout'}")
            time.sleep(0.05)
        (barrier / "go").touch()
        results = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=max(deadline - time.time(), 1))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                raise AuditError(f"bench gpu: {n} workers still running after {timeout:.0f} s") from None
            if p.returncode:
                raise AuditError(f"bench gpu: worker failed: {err[-400:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    window = max(r["end"] for r in results) - min(r["start"] for r in results)
    return {"n": n, "tokens_per_second": sum(r["tokens"] for r in results) / window,
            "peak_gb": max(r["peak_bytes"] for r in results) / 1e9,
            "weights_sha256": sorted({r["weights_sha256"] for r in results}),
            "graph_steps": sum(r.get("graph_steps", 0) for r in results)}


def start_mps(tmp: str) -> dict | None:
    """Start an MPS control daemon with private pipe/log folders; its env, or None."""
    control = shutil.which("nvidia-cuda-mps-control")
    if control is None:
        return None
    env = {"CUDA_MPS_PIPE_DIRECTORY": f"{tmp}/pipe", "CUDA_MPS_LOG_DIRECTORY": f"{tmp}/log"}
    for folder in env.values():
        os.makedirs(folder, exist_ok=True)
    done = subprocess.run([control, "-d"], env={**os.environ, **env}, capture_output=True, text=True)
    return env if done.returncode == 0 else None


def stop_mps(env: dict) -> None:
    subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", env={**os.environ, **env}, text=True,
                   capture_output=True)


def projected_hours(config: dict, family_tps: dict) -> float:
    """GPU-hours of a study: sum over runs of epochs x training tokens / aggregate tokens/s."""
    from audit.config import run_settings

    seconds = 0.0
    for corpus in config["data"]["corpora"]:
        for entry in config["heads"]:
            tps = family_tps[family_of(entry["head"])]
            for seed in planned_seeds(config):  # a sequential schedule: every arm up to max (the most it costs)
                epochs = run_settings(config, corpus, entry["name"], seed)["train"]["epochs"]
                seconds += epochs * TRAIN_TOKENS[corpus] / tps
    return seconds / 3600


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit bench gpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "configs" / "paper-ptb.yaml"), help="where the arms come from")
    parser.add_argument("--families", default=",".join(families()))
    parser.add_argument("--concurrency", default=None, help="comma-separated N (default 1,2,4,8,12,16; CPU: 1,2)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per run (default 100; CPU 5)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 20; CPU 2)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--tiny", action="store_true", help="tiny model (implied on the CPU)")
    parser.add_argument("--no-mps", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    parser.add_argument("--barrier", help=argparse.SUPPRESS)
    parser.add_argument("--fp32-rate", choices=["cpu", "cuda"], help=argparse.SUPPRESS)
    parser.add_argument("--group", type=int, default=1, help=argparse.SUPPRESS)   # seeds a worker trains in turn
    args = parser.parse_args(argv)
    if args.worker:  # one concurrent run (or one group of seeds): print its JSON figures
        work = worker if args.group == 1 else functools.partial(group_worker, k=args.group)
        print(json.dumps(work(json.loads(args.worker), args.corpus, steps=args.steps, warmup=args.warmup,
                              barrier=Path(args.barrier))))
        return 0
    if args.fp32_rate:  # the child of measure_fp32_rate
        print(json.dumps({"flops": fp32_rate(args.fp32_rate)}))
        return 0
    from audit.config import load_study

    probe = probe_device()  # in a child: this process keeps no CUDA context
    cuda = probe["cuda"] if args.device == "auto" else args.device == "cuda"
    if args.device == "cuda" and not probe["cuda"]:
        raise AuditError("bench gpu: --device cuda but no CUDA device is available")
    device, tiny = ("cuda" if cuda else "cpu"), (args.tiny or not cuda)
    steps = args.steps or (100 if not tiny else 5)
    warmup = args.warmup if args.warmup is not None else (20 if not tiny else 2)
    ns = [int(n) for n in (args.concurrency or ("1,2" if not cuda else ",".join(map(str, CONCURRENCY)))).split(",")]
    where = f"{probe['name']} ({probe['gib']:.0f} GiB)" \
        if cuda else "cpu, tiny model (CI check: no GPU figure)"
    config = load_study(args.config)
    corpus_name = config["data"]["corpora"][0]
    print(f"bench gpu on {where}; arms of {args.config}; {steps} timed steps after {warmup} warm-up; torch {probe['torch']}")
    peak = measure_fp32_rate(device)
    print(f"fp32 matmul rate (TF32 off, measured): {peak / 1e12:,.2f} TFLOP/s: the peak each share below is of")
    best, graphed = {}, {}
    with tempfile.TemporaryDirectory(prefix="audit-bench-gpu-") as tmp:
        # the runs share GPU 0 on purpose: private locks with room for every worker (audit/device.py)
        os.environ.update(AUDIT_GPU_LOCK_DIR=f"{tmp}/locks", AUDIT_GPUS="0", AUDIT_RUNS_PER_GPU=str(max(ns) + 1))
        for family in args.families.split(","):
            settings = arm_settings(config, family, tiny, device)
            vocab = 10000 if corpus_name == "ptb" else 33278
            corpus = str(fake_corpus(vocab, max(50_000, 4 * (steps + warmup + 2) * settings["train"]["batch_size"]
                                         * (settings["train"]["bptt"] + settings["train"]["max_seq_len_delta"])),
                                     Path(tmp) / f"{family}.pt"))
            one = concurrent(settings, corpus, 1, steps, warmup)  # a child: fresh context and peak counter
            tps = one["tokens_per_second"]
            print(f"\n{family}: one run {tps:,.0f} tokens/s -> {TRAIN_TOKENS[corpus_name] / tps:,.1f} s per "
                  f"{corpus_name} epoch (training), peak {one['peak_gb']:.2f} GB, "
                  f"{share_of_peak(settings, tps, peak):.1%} of the fp32 peak")
            if cuda:   # the graph path: one run per GPU (no MPS), the projection's "after"
                g = concurrent(with_graphs(settings), corpus, 1, steps, warmup)
                graphed[family] = g["tokens_per_second"]
                print(f"  CUDA graphs: {g['tokens_per_second']:,.0f} tokens/s ({g['tokens_per_second'] / tps:.2f} x "
                      f"eager), {share_of_peak(settings, g['tokens_per_second'], peak):.1%} of the fp32 peak, "
                      f"{g['graph_steps']} timed steps replayed, peak {g['peak_gb']:.2f} GB")
            else:
                print("  CUDA graphs: need a CUDA device (train.cuda_graphs)")
            modes = [("plain", None)]
            mps = None if (args.no_mps or not cuda) else start_mps(f"{tmp}/mps")
            if mps is not None:
                modes.append(("MPS", mps))
            elif cuda and not args.no_mps:
                print("  MPS: nvidia-cuda-mps-control not found or did not start: skipped")
            try:
                for mode, env in modes:
                    # N = 1 is the run above in both modes (one process has nothing to share under
                    # MPS), and every ratio is to it: a paper-size run less on the GPU node
                    rows = [one if n == 1 else concurrent(settings, corpus, n, steps, warmup, env) for n in ns]
                    top = max(rows, key=lambda r: r["tokens_per_second"])
                    for r in rows:
                        print(f"  {mode:5s} N={r['n']:2d}: {r['tokens_per_second']:12,.0f} tokens/s aggregate "
                              f"({r['tokens_per_second'] / tps:5.2f} x one run), peak {r['peak_gb']:.2f} GB/run")
                    print(f"  {mode:5s} best N = {top['n']}")
                    if family not in best or top["tokens_per_second"] > best[family][1]:
                        best[family] = (f"{mode} N={top['n']}", top["tokens_per_second"])
            finally:
                if mps is not None:
                    stop_mps(mps)
    print("\nprojected GPU-hours (before: eager at the best N per family; after: CUDA graphs, one run per GPU"
          + (", tiny CPU model: not a GPU figure)" if tiny else ")"))
    rates = {f: best.get(f, max(best.values(), key=lambda b: b[1]))[1] for f in families()}
    after = {f: graphed.get(f, max(graphed.values())) for f in families()} if graphed else None
    for name in PAPER_CONFIGS:
        path = REPO / "configs" / f"{name}.yaml"
        if path.is_file():
            study = load_study(path)
            line = f"  {name:24s} before {projected_hours(study, rates):12,.1f}"
            print(line + (f"   after {projected_hours(study, after):12,.1f} GPU-hours" if after else " GPU-hours"))
    print("best: " + ", ".join(f"{f} {how}" for f, (how, _) in best.items()))
    return 0
