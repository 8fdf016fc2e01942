"""Benchmarks that print figures: ``python -m audit bench <name> [options]``.

``heads``: time per training step of each head relative to softmax (audit/bench/heads.py).
``spectrum``: streamed Gram spectrum against the materialised float32 SVD (audit/bench/spectrum.py).
``sequential``: error rates and seeds of the group-sequential design by simulation (audit/bench/sequential.py);
``--compare`` puts candidate designs side by side (audit/bench/sequential_compare.py).
``step``: our training step against a plain nn.LSTM loop of the same shape (audit/bench/step.py).
``candidates``: candidate CPU model sizes against the unigram baseline (audit/bench/candidates.py).
``study``: where a study's CPU goes, the training steps' share of it (audit/bench/study.py).
``argmax``: seconds and tokens settled per tier of the unargmaxable-token test at PTB paper size, and the cost of
the witness search on a paper-size MoS (audit/bench/argmax.py).
``multiboot``: null rejection rates of the multi-bootstrap's p-value candidates and Welch (audit/bench/multiboot.py).
``gpu``: s/epoch, concurrent runs per GPU and projected GPU-hours of the paper configs (audit/bench/gpu.py).
``vocab``: CPU seconds of the spectrum, the argmax test and the gradient share per head at a BPE V (16,000) against
the evaluate job's planned runtime (audit/bench/vocab.py).
"""

import importlib
import sys

BENCHMARKS = {"heads": "audit.bench.heads", "spectrum": "audit.bench.spectrum", "step": "audit.bench.step",
              "gpu": "audit.bench.gpu", "sequential": "audit.bench.sequential",
              "study": "audit.bench.study", "candidates": "audit.bench.candidates",
              "argmax": "audit.bench.argmax", "multiboot": "audit.bench.multiboot",
              "vocab": "audit.bench.vocab"}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in BENCHMARKS:
        print(f"usage: python -m audit bench {{{','.join(BENCHMARKS)}}} [options]", file=sys.stderr)
        return 2
    return int(importlib.import_module(BENCHMARKS[argv[0]]).main(argv[1:]) or 0)
