"""CUDA graphs at paper size, across a validation pass and the switch to averaging (issue 54).

The small check (``audit.gpucheck.graphcheck``) runs at h = 32, where cuDNN picks other kernels
than at paper-ptb's h = 1,150, and never leaves SGD's first epoch. Here paper-ptb's softmax run
(its model, dropouts, batch 20 and bptt 70, from configs/paper-ptb.yaml) on a random corpus of
its vocabulary (V = 10,000) trains two epochs of ``STEPS`` steps at a fixed BPTT length (one
graph, so nearly every step is a replay): SGD, a validation pass, the switch to averaging
(ET-ASGD after epoch 1), averaged steps, a validation pass. Eager, eager again (this GPU's own
run-to-run spread) and through graphs, from one seed; the graph run must agree with the first
eager run in every step's loss, both validation losses and the averaged model's weights, within
float32's tolerance or 10 times the spread. A tensor a graph captured that moved stops the graph
run with one line (``audit.train.graphs``), which is then the failed check's value.

Then the share of GPU-busy time per step, eager and through graphs: ``PROFILED`` more steps of
each run under ``torch.profiler`` (CUDA activity), the union of the kernels' (and copies')
intervals over the wall time of those steps. Near 1: the step waits on kernels; well below: on
the host. Only a GPU can measure it: off-GPU, or when the profiler saw no kernel, it is reported
as not measured, never as a number.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from audit.gpucheck.graphcheck import LOSS_RTOL, PARAM_TOL, gaps, record_losses

STEPS = 30        # per epoch: about 1 s of eager steps on an H200 (18.6 ms each, docs/gpus.md)
PROFILED = 20     # steps under the profiler, per path
VALID_CHUNKS = 10  # validation chunks of bptt x eval_batch_size tokens


def paper_size() -> dict:
    """What the check trains: the baseline head's run of paper-ptb (the softmax), V = 10,000."""
    from audit.bench import picks

    return {"config": "paper-ptb", "head": picks.baseline(), "vocab": 10000, "model": {}}


def paper_settings(size: dict, graphs: bool, steps: int) -> dict:
    """The run settings of ``size["head"]`` in ``size["config"]`` (``size["model"]`` overriding
    its model), trained two epochs of ``steps`` steps at a fixed bptt on CUDA, averaging after
    the first."""
    from audit.config import load_study, run_settings, train_settings
    from audit.gpucheck.common import REPO

    config = load_study(REPO / "configs" / f"{size['config']}.yaml")
    settings = train_settings(run_settings(config, config["data"]["corpora"][0], size["head"], 1))
    train = settings["train"]
    settings["model"] = {**settings["model"], **size["model"]}
    settings["max_tokens"] = {"train": None, "valid": None, "test": None}
    settings["train"] = {**train, "epochs": 2, "epoch_tokens": steps * train["bptt"] * train["batch_size"],
                         "variable_bptt": False, "asgd": "et", "switch_epoch": 1, "device": "cuda", "threads": 1,
                         **({"cuda_graphs": True} if graphs else {})}
    return settings


def busy_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals: kernels on several streams overlap, and a
    GPU running two at once is busy once."""
    total, reach = 0.0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


def busy_share(trainer, steps: int) -> dict | None:
    """GPU-busy share of ``steps`` more training steps under the profiler (None: this torch cannot
    trace CUDA, as a CPU build cannot, or it saw no kernel)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, supported_activities

    if ProfilerActivity.CUDA not in supported_activities():
        return None
    t = trainer.t
    t["epoch_tokens"] = steps * t["bptt"] * t["batch_size"]
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        trainer.train_epoch()
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
    spans = [(e.time_range.start, e.time_range.end) for e in prof.events() if e.device_type == DeviceType.CUDA]
    if not spans:
        return None
    busy = busy_us(spans) / 1e6
    return {"steps": steps, "wall_ms_per_step": round(1e3 * wall / steps, 3),
            "busy_ms_per_step": round(1e3 * busy / steps, 3), "share": round(busy / wall, 3)}


def paper_run(settings: dict, corpus: str, profile: bool) -> dict:
    """Two epochs of one run: per-step losses, the logged rows, the averaged model's weights on
    the host, and (``profile``) the busy share of ``PROFILED`` steps after them."""
    import torch

    from audit.train.trainer import Trainer

    trainer = Trainer(settings, corpus, log=lambda msg: None)
    losses = record_losses(trainer)
    rows = [trainer.run_epoch() for _ in range(settings["train"]["epochs"])]
    weights = {k: v.detach().cpu().clone() for k, v in trainer.eval_model().state_dict().items()}
    out = {"losses": torch.stack(losses).double().cpu(), "weights": weights, "rows": rows}
    out["busy"] = busy_share(trainer, PROFILED) if profile else None
    return out


def check(result, corpus: str, size: dict, profile: bool, steps: int = STEPS) -> None:
    """The three runs and their verdict; figures ``graphs_paper_busy`` (eager, graphs)."""
    from audit.errors import AuditError

    runs = {}
    for label, graphs in (("eager", False), ("rerun", False), ("graphs", True)):
        try:
            runs[label] = paper_run(paper_settings(size, graphs, steps), corpus, profile and label != "rerun")
        except AuditError as err:   # a moved tensor (or another refusal): the check fails with its line
            result.check(f"CUDA graphs = eager at paper size, {size['head']}", str(err), "runs to the end", False)
            return
    spread, (loss, weights) = gaps(runs["rerun"], runs["eager"]), gaps(runs["graphs"], runs["eager"])
    valid = max(abs(g["valid_loss"] - e["valid_loss"]) / abs(e["valid_loss"])
                for g, e in zip(runs["graphs"]["rows"], runs["eager"]["rows"]))
    loss_tol, param_tol = max(LOSS_RTOL, 10 * spread[0]), max(PARAM_TOL, 10 * spread[1])
    replayed = [r.get("graph_steps", 0) for r in runs["graphs"]["rows"]]
    switched = runs["graphs"]["rows"][0].get("switched_to_asgd", False) and runs["graphs"]["rows"][1]["averaging"]
    result.check(f"CUDA graphs = eager at paper size, {size['head']}, 2 x {steps} steps, validation and ASGD switch",
                 f"loss {loss:.3g}, validation {valid:.3g}, weights {weights:.3g} (steps replayed per epoch "
                 f"{replayed[0]}, {replayed[1]})",
                 f"losses <= {loss_tol:.3g}, weights <= {param_tol:.3g} (fp32 or 10x the eager rerun's "
                 f"{spread[0]:.3g}, {spread[1]:.3g}); replays in both epochs",
                 loss <= loss_tol and valid <= loss_tol and weights <= param_tol and min(replayed) > 0 and switched)
    busy = {label: runs[label]["busy"] for label in ("eager", "graphs")}
    result.figure("graphs_paper_busy", busy)
    if any(v is None for v in busy.values()):
        result.note("GPU-busy share per step at paper size: not measured (the profiler's CUDA activity needs a GPU)")


def run(result, simulated: bool, deadline: float) -> None:
    """The paper-size check on a GPU; on the simulated device a note (a 24M-parameter LSTM at CPU
    speed, and no graphs: tests/gpucheck/test_graphpaper.py checks it there at a small size)."""
    from audit.gpucheck.common import random_corpus

    if simulated:
        result.note("CUDA graphs at paper size: not run on the simulated device (tests/gpucheck/test_graphpaper.py "
                    "runs the check there at a small size with the graph stand-in); GPU-busy share: not measured")
        return
    if time.time() > deadline:
        result.note("out of time before the paper-size CUDA-graph check: not checked")
        result.data["incomplete"] = True
        return
    size = paper_size()
    settings = paper_settings(size, False, STEPS)["train"]
    tokens = STEPS * settings["bptt"] * settings["batch_size"] + 1
    valid = VALID_CHUNKS * settings["bptt"] * settings["eval_batch_size"] + 1
    with tempfile.TemporaryDirectory(prefix="audit-gpu-check-paper-") as tmp:
        # the profiled steps continue the split: room for them after the two epochs
        corpus = random_corpus(Path(tmp) / "corpus.pt", size["vocab"], 3 * tokens, valid, valid)
        check(result, corpus, size, profile=True)
