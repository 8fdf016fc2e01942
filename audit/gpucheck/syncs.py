"""Host syncs per training step and per evaluation chunk, counted on the device itself.

``torch.cuda.set_sync_debug_mode("warn")`` makes CUDA's runtime wrappers warn at every
synchronising call (a device-to-host read, a blocking copy, a stream or device synchronise); the
warnings are counted per phase of one small run per head: an SGD epoch, a validation pass, an
averaging epoch, a validation pass (AdamW for the Transformer, which has no averaging). The
budget is the simulated device's (docs/gpus.md): at most one sync per ``SYNC_EVERY`` = 50
training steps per phase, at most one per validation chunk. On the simulated device the same
warnings come from its own sync record (tests/support/fake_cuda.py).
"""

from __future__ import annotations

import math
import tempfile
import warnings
from pathlib import Path

from audit.device import SYNC_EVERY

STEP_BUDGET = 1 / SYNC_EVERY  # syncs per training step (audit.device.SYNC_EVERY = 50)
CHUNK_BUDGET = 1.0       # syncs per validation chunk
# 12,000 tokens in 10 streams at bptt 10: about 120 steps per epoch, so the 1-in-50 budget is met
# only by a loop that really reads the host once per 50 steps (a per-step read gives 1)
SIZE = {"batch_size": 10, "bptt": 10, "eval_batch_size": 10}


class SyncCounter:
    """Count CUDA's "synchronizing CUDA operation" warnings inside a ``with`` block."""

    def __enter__(self):
        import torch

        self.count = 0
        self._catch = warnings.catch_warnings(record=True)
        self._records = self._catch.__enter__()
        warnings.simplefilter("always")
        self._previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc):
        import torch

        # a sync is the host waiting at a call, counted when the call is made: nothing queued
        # on the device adds one later, so no synchronize is needed (and none is counted)
        torch.cuda.set_sync_debug_mode(self._previous)
        self.count = sum("synchronizing CUDA operation" in str(w.message) for w in self._records)
        self._catch.__exit__(*exc)
        return False


def measure(head: str, body: str, corpus: str) -> list[dict]:
    """One row per phase: steps, syncs, validation chunks and syncs."""
    from audit.bench import picks
    from audit.gpucheck.common import tiny_settings
    from audit.train.trainer import Trainer
    from audit.train.validation import evaluate_loss

    settings = tiny_settings(head, body, "cuda", variable_bptt=False, **SIZE)
    trainer = Trainer(settings, corpus, log=lambda msg: None)
    step = trainer.optimizer.step
    steps = [0]

    def counted(*args, **kwargs):
        steps[0] += 1
        return step(*args, **kwargs)

    trainer.optimizer.step = counted
    rows = []
    # the default body (AWD-LSTM) trains with SGD then averages; the other (the Transformer) uses AdamW
    phases = ["sgd", "averaging"] if body == picks.default_body() else ["adamw", "adamw"]
    for phase in phases:
        steps[0] = 0
        with SyncCounter() as train:
            trainer.train_epoch()
        with SyncCounter() as valid:
            evaluate_loss(trainer.eval_model(), trainer.valid_data, SIZE["bptt"])
        chunks = math.ceil((trainer.valid_data.size(0) - 1) / SIZE["bptt"])
        rows.append({"head": head, "body": body, "phase": phase, "steps": steps[0], "syncs": train.count,
                     "valid_chunks": chunks, "valid_syncs": valid.count})
        if phase == "sgd":
            trainer.start_averaging()
    return rows


def run(result, budget: float, simulated: bool) -> None:
    import time

    from audit.gpucheck.common import every_arm, random_corpus

    deadline = time.time() + budget
    table = []
    with tempfile.TemporaryDirectory(prefix="audit-gpu-check-") as tmp:
        corpus = random_corpus(Path(tmp) / "corpus.pt", 500, 12000, 2000, 1000)
        for body, head in every_arm(deadline, result, "counted"):
            for row in measure(head, body, corpus):
                table.append(row)
                per_step, per_chunk = row["syncs"] / row["steps"], row["valid_syncs"] / row["valid_chunks"]
                result.check(f"syncs per step, {body}/{head} {row['phase']}",
                             f"{per_step:.3f} ({row['syncs']} in {row['steps']})", f"<= {STEP_BUDGET:g}",
                             per_step <= STEP_BUDGET)
                result.check(f"syncs per validation chunk, {body}/{head} {row['phase']}",
                             f"{per_chunk:.2f} ({row['valid_syncs']} in {row['valid_chunks']})",
                             f"<= {CHUNK_BUDGET:g}", per_chunk <= CHUNK_BUDGET)
    result.figure("syncs", table)
