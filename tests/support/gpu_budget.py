"""Host syncs and aten ops per training step and per evaluation chunk, on the simulated CUDA device.

``measure_training`` trains one tiny run with ``train.device: cuda`` inside ``fake_cuda.simulated_cuda``
through both phases (an SGD epoch, then averaged SGD from epoch 2 by ET-ASGD) and reports per
phase: training steps, host syncs (everything inside the epoch, the end-of-epoch read included),
aten ops, mixed-device ops; and the validation pass's syncs and chunks.

    PYTHONPATH=.:tests python tests/support/gpu_budget.py /path/to/corpus.pt   # docs/gpus.md's table
"""

from __future__ import annotations

import math
import os
import sys

from helpers import tiny_settings
from support.fake_cuda import simulated_cuda

HEADS = ["softmax", "sigsoftmax", "gss", "plif", "plif_frozen", "mos", "moc", "mos_uniform", "mixtape"]
# 12,000 tokens in 10 streams at bptt 10: about 120 steps per epoch, so the 1-in-50 budget is
# met only by a loop that really reads the host once per 50 steps (a per-step read gives 1)
SIZE = {"epochs": 2, "train_tokens": 12000, "bptt": 10, "asgd": "et", "switch_epoch": 1, "device": "cuda"}


def settings_for(head: str, **override) -> dict:
    return tiny_settings(head=head, **{**SIZE, **override})


def measure_training(head: str, corpus, lock_dir) -> list[dict]:
    """One row per epoch: phase, steps, syncs, ops, mixed, syncs per step; then validation."""
    from audit.train import trainer as T
    from audit.train.validation import evaluate_loss

    os.environ.setdefault("AUDIT_GPU_LOCK_DIR", os.fspath(lock_dir))
    settings = settings_for(head)
    rows = []
    with simulated_cuda() as sim:
        trainer = T.Trainer(settings, os.fspath(corpus), log=lambda m: None)
        steps = [0]
        step = trainer.optimizer.step

        def counted(*args, **kwargs):
            steps[0] += 1
            return step(*args, **kwargs)

        trainer.optimizer.step = counted
        for _ in range(settings["train"]["epochs"]):
            phase = "averaging" if trainer.average is not None else "sgd"
            steps[0] = 0
            sim.take()
            trainer.train_epoch()
            train = sim.take()
            trainer.epoch += 1
            valid_loss = evaluate_loss(trainer.eval_model(), trainer.valid_data, settings["train"]["bptt"])
            valid = sim.take()
            chunks = math.ceil((trainer.valid_data.size(0) - 1) / settings["train"]["bptt"])
            rows.append({"head": head, "phase": phase, "steps": steps[0], "syncs": train.n_syncs,
                         "sync_reasons": dict(train.syncs), "ops_per_step": train.ops / steps[0],
                         "mixed": sorted(set(train.mixed + valid.mixed)), "cpu_generator": train.cpu_generator,
                         "valid_syncs": valid.n_syncs, "valid_chunks": chunks, "valid_loss": valid_loss,
                         "averaged_on_device": trainer.average is None or trainer.average.n_averaged.device.type == "cuda"})
            if trainer.average is None:
                trainer.start_averaging()
    return rows


def main(argv: list[str]) -> int:
    import tempfile

    corpus = argv[0]
    heads = argv[1:] or HEADS
    print("| head | phase | steps | host syncs per step | aten ops per step | validation syncs per chunk |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for head in heads:
            for row in measure_training(head, corpus, tmp):
                print(f"| {head} | {row['phase']} | {row['steps']} | {row['syncs'] / row['steps']:.3f} "
                      f"({row['syncs']}) | {row['ops_per_step']:.0f} | "
                      f"{row['valid_syncs'] / row['valid_chunks']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
