"""Benchmark ``python -m audit bench vocab``: the evaluate job's V-sized costs at a subword V.

A byte-level BPE vocabulary (``data.tokenizer: bpe``) sets V = ``data.vocab_size``; the three
measurements of the evaluation whose cost grows with V are timed here, per built-in head, with the
evaluation's own functions (``audit.evaluate.run``, ``audit.evaluate.debate``,
``audit.evaluate.gradient_share``), at V = ``--vocab`` (16,000) and d = ``--emb-size`` (64):

- spectrum: every streamed pass the job makes over the test split (``run.stream_rows`` into
  ``spectrum.stream_spectrum``): the log-P pass (all test positions forward, the first
  ``evaluate.contexts`` rows into the Gram), the double-centred second pass when
  ``evaluate.hidden_gap``, and the f(l) pass of a head with ``transformed_logits``. The forward
  passes are included (the job cannot have the rows without them); the gradient share's seconds,
  which observe the first pass, are not;
- argmax: ``debate.argmax_fields``, the exact test (both of its boxes) of the heads that declare
  ``order_preserving``, the witness search of the others;
- gradient share: ``gradient_share.GradientShare`` (its basis and its ``add`` on every block) over
  the first ``evaluate.gradient_share.contexts`` positions; "-" for a head it does not apply to.

The run settings are those a study gets from ``--config`` (configs/smoke.yaml: its small AWD-LSTM
and its ``evaluate:``) with ``data.tokenizer: bpe``, ``data.vocab_size`` V, ``model.emb_size`` d and
one arm per built-in head that trains on its own (``audit.bench.picks.standalone_heads``); the
budget printed beside each head is that job's planned runtime, ``evaluate_minutes(settings)`` x 60
seconds (audit/plan/resources.py), which also holds the job's startup and a safety factor.

The weights are untrained (PyTorch's init under a seeded generator) and the test stream is
seeded uniform ids: a trained model costs the same arithmetic (the shapes are the same), though
the witness search and the LP tiers settle a trained head's tokens at their own pace. CPU
seconds (``time.process_time``) of one thread (``torch.set_num_threads(1)``; run it with
OMP_NUM_THREADS=1 so that BLAS is single-threaded too).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def study_config(path: str | Path, vocab: int, emb_size: int, heads: list[str], contexts: int | None) -> dict:
    """The study ``path`` made a subword study (``data.tokenizer: bpe``, ``data.vocab_size`` vocab)
    of size ``emb_size`` with one arm per head in ``heads``, on the CPU with one thread; ``contexts``
    replaces ``evaluate.contexts`` when given. Validated and filled by ``check_study``."""
    from audit import yamlfile
    from audit.config import check_study

    raw = yamlfile.load(path)
    raw["data"] = {**raw.get("data", {}), "tokenizer": "bpe", "vocab_size": vocab}
    raw["model"] = {**raw.get("model", {}), "emb_size": emb_size}
    raw["train"] = {**raw.get("train", {}), "device": "cpu", "threads": 1}
    raw["heads"] = [{"name": name} for name in heads]
    if contexts is not None:
        raw["evaluate"] = {**raw.get("evaluate", {}), "contexts": contexts}
    for key in ("comparisons", "correlations", "claims", "claims_file", "evidence"):
        raw.pop(key, None)   # about the study's own arms, which are replaced
    return check_study(raw, str(path))


def _cpu(function, *args, **kwargs) -> tuple[object, float]:
    start = time.process_time()
    out = function(*args, **kwargs)
    return out, time.process_time() - start


class _Timed:
    """An observer that passes every block on to ``inner`` and sums the CPU seconds it takes."""

    def __init__(self, inner):
        self.inner, self.seconds = inner, 0.0

    def add(self, block) -> None:
        _, seconds = _cpu(self.inner.add, block)
        self.seconds += seconds


def time_head(settings: dict, seed: int) -> dict:
    """CPU seconds of the spectrum passes, the argmax test and the gradient share of one run
    (module docstring); ``gradient_share`` None where the head has no pre-map logits."""
    import torch

    from audit.config import check_section
    from audit.evaluate import debate, gradient_share, hidden_gap, spectrum
    from audit.evaluate.run import stream_rows
    from audit.model.language_model import LanguageModel
    from audit.plan.resources import tokens, vocab_of
    from audit.train.trainer import model_config

    vocab, options = vocab_of(settings), check_section("evaluate", settings["evaluate"], "evaluate options")
    torch.manual_seed(seed)
    model = LanguageModel(model_config(settings, vocab)).eval()
    rng = np.random.default_rng(seed)
    test = torch.from_numpy(rng.integers(0, vocab, size=tokens(settings, "test"))).long()
    contexts, bptt = options["contexts"], settings["train"]["bptt"]
    limit = None if contexts == "all" else min(int(contexts), test.numel() - 1)
    observers, share = [], None
    if gradient_share.pre_map(model.head, model.body.d_out) is not None:
        share_limit = options["gradient_share"]["contexts"]
        share, built = _cpu(gradient_share.GradientShare, model.head, test[1:],
                            None if share_limit == "all" else int(share_limit), d_in=model.body.d_out)
        share = _Timed(share)
        share.seconds += built
        observers.append((share, "h"))
    column_mean = hidden_gap.ColumnMean(limit) if options["hidden_gap"] else None
    if column_mean is not None:
        observers.append((column_mean, "log_p"))
    totals = {"nll": 0.0, "tokens": 0}
    start = time.process_time()
    spectrum.stream_spectrum(stream_rows(model, test, bptt, limit, totals=totals, observers=tuple(observers)))
    if column_mean is not None:
        spectrum.stream_spectrum(hidden_gap.double_centred(stream_rows(model, test, bptt, limit), column_mean.mean()))
    if model.head.transformed_logits(torch.zeros(1, 1, model.body.d_out)) is not None:
        spectrum.stream_spectrum(stream_rows(model, test, bptt, limit, transformed=True))
    passes = time.process_time() - start
    if share is not None:
        share.inner.summary()   # the figures themselves are not the point, but they must come out
    _, argmax = _cpu(debate.argmax_fields, model.head, test, [str(i) for i in range(vocab)], options["argmax"],
                     box=getattr(model.body, "output_box", None), d_in=model.body.d_out)
    return {"spectrum": passes - (share.seconds - built if share is not None else 0.0), "argmax": argmax,
            "gradient_share": share.seconds if share is not None else None}


def rows(config: dict, seed: int) -> list[dict]:
    """One row per arm of ``config``: the head, its timings (``time_head``), their sum, the
    planned budget in seconds (``evaluate_minutes`` x 60) and whether the sum is within it."""
    from audit.config import run_settings
    from audit.plan.resources import evaluate_minutes

    out = []
    for entry in config["heads"]:
        settings = run_settings(config, config["data"]["corpora"][0], entry["name"], seed)
        seconds = time_head(settings, seed)
        total = sum(v for v in seconds.values() if v is not None)
        budget = 60 * evaluate_minutes(settings)
        out.append({"head": entry["name"], **seconds, "total": total, "budget": budget, "within": total <= budget})
    return out


def main(argv: list[str]) -> int:
    import torch

    from audit.bench import picks

    parser = argparse.ArgumentParser(prog="python -m audit bench vocab", description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=int, default=16_000, help="V, the BPE's data.vocab_size")
    parser.add_argument("--emb-size", type=int, default=64, help="d, model.emb_size")
    parser.add_argument("--contexts", type=int, default=None, help="evaluate.contexts (default: the config's)")
    parser.add_argument("--heads", nargs="+", default=None, help="default: every head that trains on its own")
    parser.add_argument("--config", default=str(REPO / "configs" / "smoke.yaml"), help="the study whose sizes are used")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    config = study_config(args.config, args.vocab, args.emb_size, args.heads or picks.standalone_heads(), args.contexts)
    print(f"V = {args.vocab} (data.tokenizer: bpe), d = {args.emb_size}, {Path(args.config).name}'s body; "
          f"evaluate.contexts = {config['evaluate']['contexts']}, gradient_share.contexts = "
          f"{config['evaluate']['gradient_share']['contexts']}, hidden_gap = {config['evaluate']['hidden_gap']}; "
          f"untrained weights (seed {args.seed}); CPU seconds, torch threads 1")
    print("| head | spectrum passes s | argmax s | gradient share s | sum s | planned budget s | within |")
    print("|---|---|---|---|---|---|---|")
    table = rows(config, args.seed)
    for row in table:
        share = "-" if row["gradient_share"] is None else f"{row['gradient_share']:.1f}"
        print(f"| {row['head']} | {row['spectrum']:.1f} | {row['argmax']:.1f} | {share} | {row['total']:.1f} | "
              f"{row['budget']} | {'yes' if row['within'] else 'NO'} |")
    return 0 if all(row["within"] for row in table) else 1
