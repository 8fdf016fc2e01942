"""Peak GPU memory of a train and an evaluate job at paper size, against ``audit/plan/memory.py``'s plan.

Each job of ``MEMORY_JOBS`` (a paper config's arm: by default the one the plan says is largest,
else a named one whose head's floats per vocabulary entry were not yet measured) is run for real on
a corpus of random ids with the corpus's vocabulary and split sizes (memory does not depend on
which words):

- train job: the real ``Trainer``, ``TRAIN_STEPS`` steps at the longest sequence the plan assumes
  (bptt + max_seq_len_delta when BPTT varies), then an epoch at the job's own bptt (its steps, a
  validation pass over the whole split in eval_batch_size x bptt chunks, the best-weights copy),
  then (AWD-LSTM) averaging on and that epoch again, so every state copy the plan counts is alive
  at once;
- evaluate job: the evaluation model, the test split on the device, and the first pass of
  ``audit.evaluate.run``: log-P rows streamed through the spectrum's float64 Gram and its
  eigensolver. Only ``EVAL_EXTRA_ROWS`` more rows than the vocabulary are streamed (the Gram and
  the eigensolver's copy are n x n once the stream is taller than wide, so the peak is that of
  all contexts; the time is not).

The plan's tensor bytes (``memory.job_bytes`` less ``memory.CONTEXT_BYTES``, the CUDA context,
which is not a tensor) are compared with ``torch.cuda.max_memory_allocated``: the ratio must lie
in ``BAND``; outside it the plan is to be corrected (docs/gpus.md).
"""

from __future__ import annotations

import gc
import tempfile
import time
from pathlib import Path

# (config, arm, jobs, train overrides); arm None: the plan's largest arm; EACH_HEAD: one arm of
# every other head of the config (each head has its own floats per vocabulary entry in
# heads/traits.py, the GPU's figure only where measured). The Transformer also at fp32, its plan's
# other precision. WT2 last: its 33,278^2 eigensolve is slow.
EACH_HEAD = "each head"
MEMORY_JOBS = [
    ("paper-ptb", None, ("train", "evaluate"), {}),
    ("paper-ptb", EACH_HEAD, ("train",), {}),
    ("transformer-paper", None, ("train", "evaluate"), {}),
    ("transformer-paper", None, ("train",), {"precision": "fp32"}),
    ("paper-wt2", None, ("train", "evaluate"), {}),
]
BAND = (0.8, 1.25)       # measured / planned
TRAIN_STEPS = 3
EVAL_EXTRA_ROWS = 1000


def largest_arm(config: dict, job: str) -> dict:
    """The plan's row of the arm whose ``job`` needs the most memory (first corpus)."""
    from audit.plan import memory

    rows = [r for r in memory.plan(config, gpu_runs_only=False) if r["job"] == job]
    return max(rows, key=lambda r: r["bytes"])


def shrink(settings: dict) -> dict:
    """The same arm at a size the simulated device (a CPU) runs in seconds: its figures check the
    step's plumbing, not the plan at paper size."""
    from audit.bench import picks

    m, t = settings["model"], settings["train"]
    other = m.get("body") not in (None, picks.default_body())  # the Transformer, not the default AWD-LSTM
    settings["vocab_size"] = 1000
    settings["max_tokens"] = {"train": 20000, "valid": 2000, "test": 2000}
    m.update(emb_size=16, hidden_size=64 if other else 32,
             last_size=16 if m.get("last_size") else m.get("last_size"))
    if other:
        m.update(n_heads=2, context_size=32)
        t.update(bptt=32)
    else:
        t.update(bptt=8, max_seq_len_delta=4)
    t.update(batch_size=4, eval_batch_size=2)
    options = settings["options"]
    for key, small in (("knots", 100), ("experts", 3)):
        if key in options:
            options[key] = small
    return settings


def sized_corpus(settings: dict, folder: Path) -> str:
    from audit.gpucheck.common import random_corpus
    from audit.plan.resources import tokens, vocab_of

    sizes = {s: tokens(settings, s) for s in ("train", "valid", "test")}
    return random_corpus(folder / f"{settings['corpus']}-{vocab_of(settings)}.pt", vocab_of(settings), **sizes)


def train_peak(settings: dict, corpus: str):
    """(peak allocated bytes, peak reserved bytes, the trainer) of a short train job."""
    import torch

    from audit.config import train_settings
    from audit.train.trainer import Trainer

    s = train_settings(settings)
    t = s["train"]
    bptt = t["bptt"]
    longest = bptt + t["max_seq_len_delta"] if t["variable_bptt"] else bptt
    t.update(device="cuda", variable_bptt=False, bptt=longest, epoch_tokens=TRAIN_STEPS * longest * t["batch_size"])
    torch.cuda.reset_peak_memory_stats()
    trainer = Trainer(s, corpus, log=lambda msg: None)
    trainer.train_epoch()
    # the job's own chunk from here on (the trainer reads its settings live): validation reads
    # eval_batch_size x bptt tokens, as the run does. Validating at the longest training sequence
    # made paper-ptb's MoS peak in a 10 x 110-token validation chunk, not in training (the H200's
    # 3.21 GB of 2026-11-26, docs/gpus.md)
    t["bptt"] = bptt
    trainer.run_epoch()
    if t["asgd"] != "none":
        trainer.start_averaging()
    trainer.run_epoch()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved(), trainer


def evaluate_peak(settings: dict, corpus: str, cfg, state: dict) -> tuple[int, int, int]:
    """(peak allocated, peak reserved, rows streamed) of the evaluate job's forward + spectrum,
    with nothing of the train job left on the device."""
    import torch

    from audit.data.corpus import load as load_corpus
    from audit.evaluate import spectrum
    from audit.evaluate.run import stream_rows
    from audit.model.language_model import LanguageModel

    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = LanguageModel(cfg).cuda()
    model.load_state_dict(state)
    model.eval()
    data = load_corpus(corpus)
    test, vocab = data.test, len(data.vocab)
    contexts = settings["evaluate"]["contexts"]
    limit = test.numel() - 1 if contexts == "all" else min(int(contexts), test.numel() - 1)
    limit = min(limit, vocab + EVAL_EXTRA_ROWS)
    totals = {"nll": 0.0, "tokens": 0}
    spec = spectrum.stream_spectrum(stream_rows(model, test.cuda(), settings["train"]["bptt"], limit, totals=totals))
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved(), spec.m


def expand(jobs: list[tuple]) -> list[tuple]:
    """``jobs`` with each ``EACH_HEAD`` entry replaced by one entry per head of its config: the
    config's first arm of that head, less the largest arm's head (measured by its own entry)."""
    from audit.config import load_study
    from audit.gpucheck.common import REPO

    out = []
    for name, arm, kinds, overrides in jobs:
        if arm != EACH_HEAD:
            out.append((name, arm, kinds, overrides))
            continue
        config = load_study(REPO / "configs" / f"{name}.yaml")
        first = {}
        for entry in config["heads"]:
            first.setdefault(entry["head"], entry["name"])
        largest = largest_arm(config, "train")["arm"]
        largest_head = next(e["head"] for e in config["heads"] if e["name"] == largest)
        out += [(name, arm_name, kinds, overrides) for head, arm_name in first.items() if head != largest_head]
    return out


def run(result, budget: float, simulated: bool, jobs: list[tuple] | None = None) -> None:
    import torch

    deadline = time.time() + budget
    rows = []
    with tempfile.TemporaryDirectory(prefix="audit-gpu-check-") as tmp:
        for name, arm, kinds, overrides in expand(jobs or MEMORY_JOBS):
            label = " ".join([name] + ([arm] if arm else []) + [f"{k}={v}" for k, v in overrides.items()])
            if time.time() > deadline:
                result.note(f"{label}: out of time, not measured")
                result.data["incomplete"] = True
                continue
            try:
                rows += measure(name, simulated, deadline, Path(tmp), result, arm, kinds, overrides)
            except Exception as err:  # one config's failure leaves the others measured
                if type(err).__name__ == "OutOfMemoryError":
                    raise
                result.data.setdefault("errors", []).append(f"{label}: {type(err).__name__}: {err}"[:600])
            gc.collect()
            torch.cuda.empty_cache()
    result.figure("memory", rows)


def measure(name: str, simulated: bool, deadline: float, tmp: Path, result, arm: str | None = None,
            kinds: tuple = ("train", "evaluate"), overrides: dict | None = None) -> list[dict]:
    """The rows of ``kinds`` (train, evaluate) of one paper config's arm (default: the plan's
    largest training job), with ``overrides`` on its train settings."""
    from audit.plan import memory
    from audit.config import load_study, run_settings
    from audit.gpucheck.common import REPO

    config = load_study(REPO / "configs" / f"{name}.yaml")
    if arm is None:
        largest = largest_arm(config, "train")
        corpus_name, arm = largest["corpus"], largest["arm"]
    else:
        corpus_name = config["data"]["corpora"][0]
    settings = run_settings(config, corpus_name, arm, 1)
    settings["train"].update(overrides or {})
    if simulated:
        settings = shrink(settings)
        if settings["train"].get("precision") == "bf16":  # the simulated device has no bf16 autocast
            settings["train"]["precision"] = "fp32"
            result.note(f"{name}: bf16 measured as fp32 on the simulated device")
    rows = []
    planned = memory.job_bytes(settings)
    corpus = sized_corpus(settings, tmp)
    allocated, reserved, trainer = train_peak(settings, corpus)
    jobs = [("train", allocated, reserved, None)]
    state = {k: v.detach().cpu() for k, v in trainer.eval_model().state_dict().items()}
    cfg = trainer.cfg
    del trainer  # the evaluate job starts on an empty device
    if "evaluate" in kinds and time.time() < deadline:
        e_alloc, e_res, streamed = evaluate_peak(settings, corpus, cfg, state)
        jobs.append(("evaluate", e_alloc, e_res, streamed))
    elif "evaluate" in kinds:
        result.note(f"{name}: evaluate job not measured (out of time)")
    precision = settings["train"].get("precision", "fp32")
    for job, alloc, res, streamed in jobs:
        plan = planned[job] - memory.CONTEXT_BYTES
        ratio = alloc / plan
        row = {"config": name, "arm": arm, "job": job, "precision": precision, "planned_gb": plan / 1e9,
               "allocated_gb": alloc / 1e9, "reserved_gb": res / 1e9, "ratio": ratio}
        if streamed is not None:
            row["rows_streamed"] = streamed
        rows.append(row)
        result.check(f"memory plan, {name} {job} ({arm}, {precision})",
                     f"{ratio:.2f} ({alloc / 1e9:.3g} of {plan / 1e9:.3g} GB planned)",
                     f"measured / planned in [{BAND[0]}, {BAND[1]}]", BAND[0] <= ratio <= BAND[1])
    return rows
