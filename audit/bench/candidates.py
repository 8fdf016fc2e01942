"""Candidate CPU model sizes against the unigram baseline (``python -m audit bench candidates``).

How the CPU default (configs/default.yaml) was chosen (docs/studies.md, "Choosing the CPU default"): each
``--spec`` trains one run in this process with the real ``Trainer`` and prints one JSON line with
the validation perplexity per epoch, the test perplexity over the whole test split and over its
first 5,000 tokens, the unigram perplexity of the same vocabulary and tokens
(``audit.evaluate.baselines``), their ratio, and the process's CPU seconds for training and
validation. A spec is comma-separated ``key=value`` pairs; unset keys take the defaults below::

    python -m audit bench candidates --corpus results/data/ptb/corpus.pt \\
        --spec "K=2000,d=64,lr=10,clip=0.25" --spec "K=2000,d=64,lr=10,clip=0.25,head=mos,experts=2,last=64"

Keys: ``K`` vocabulary (the K most frequent training words, the rest ``<unk>``), ``d``, ``H``,
``L`` layers, ``B`` batch, ``bptt``, ``drop`` (every dropout and weight drop, the mixtures'
latent dropout too), ``dropl`` (the mixtures' latent dropout alone, overriding ``drop`` there: the
MoS sweep's arms drop nothing else), ``lr``, ``clip``, ``E`` epochs of ``T`` tokens, ``asgd`` (nt,
et, none) and ``sw`` (ET's switch epoch), ``head``, ``experts`` and ``last`` (d' of the mixtures),
``seed``.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import torch

from audit.bench import picks
from audit.errors import AuditError
from audit.model.heads.traits import HEAD_OPTIONS

DEFAULTS = {"K": 2000, "d": 32, "H": 128, "L": 2, "B": 32, "bptt": 35, "drop": 0.0, "lr": 10.0, "clip": 0.25,
            "E": 8, "T": 150_000, "asgd": "nt", "sw": 200, "head": picks.baseline(), "experts": None, "last": None,
            "dropl": None, "seed": 1}
NO_DEFAULT_KINDS = {"experts": int, "last": int, "dropl": float}   # the types of the keys unset by default
LATENT_HEADS = [name for name, options in HEAD_OPTIONS.items() if "dropoutl" in options]
FIRST_TEST_TOKENS = 5_000   # the old default's test slice, kept for comparison


def parse_spec(text: str) -> dict:
    """``"K=2000,d=64"`` -> the defaults with those keys replaced (typed like the defaults).

    Raises:
        AuditError: an unknown key or a value of the wrong type.
    """
    spec = dict(DEFAULTS)
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        if key not in DEFAULTS:
            raise AuditError(f"bench candidates: unknown spec key {key!r}; known: {', '.join(DEFAULTS)}")
        kind = type(DEFAULTS[key]) if DEFAULTS[key] is not None else NO_DEFAULT_KINDS[key]
        try:
            spec[key] = kind(value)
        except ValueError:
            raise AuditError(f"bench candidates: spec key {key}={value!r} is not a {kind.__name__}") from None
    return spec


def settings_for(spec: dict) -> dict:
    """The run settings of a spec, validated like a study's (``audit.config``)."""
    from audit.config import check_study, run_settings

    drop = spec["drop"]
    model = {"emb_size": spec["d"], "hidden_size": spec["H"], "n_layers": spec["L"], "dropoute": 0.0,
             "dropouti": drop, "dropouth": drop, "dropout": drop, "wdrop": drop}
    if spec["last"]:
        model["last_size"] = spec["last"]
    options = {"experts": spec["experts"]} if spec["experts"] else {}
    latent = spec["head"] in LATENT_HEADS and spec["experts"]
    if spec["dropl"] is not None and not latent:
        raise AuditError(f"bench candidates: spec key dropl={spec['dropl']} needs head={' / '.join(LATENT_HEADS)} "
                         f"with experts set (head={spec['head']}, experts={spec['experts']})")
    if latent:
        options["dropoutl"] = drop if spec["dropl"] is None else spec["dropl"]
    config = check_study({
        "study": "bench-candidates", "seeds": [spec["seed"]], "heads": [{"name": spec["head"], "options": options}],
        "data": {"max_tokens": {"valid": 10_000}}, "model": model,
        "train": {"epochs": spec["E"], "epoch_tokens": spec["T"], "batch_size": spec["B"], "bptt": spec["bptt"],
                  "lr": spec["lr"], "clip": spec["clip"], "asgd": spec["asgd"], "switch_epoch": spec["sw"],
                  "nonmono": 1, "threads": 1, "device": "cpu"},
    }, "bench candidates spec")
    return run_settings(config, "ptb", spec["head"], spec["seed"])


def measure(spec: dict, corpus_path: Path, work: Path) -> dict:
    """Train one candidate and score it against the unigram of its vocabulary."""
    from audit.data.corpus import load, restrict_vocab, save
    from audit.evaluate.baselines import unigram_ppl
    from audit.train.trainer import Trainer, batchify
    from audit.train.validation import evaluate_loss

    corpus = load(corpus_path)
    if spec["K"] < len(corpus.vocab):
        corpus = restrict_vocab(corpus, spec["K"])
    path = work / f"corpus_v{len(corpus.vocab)}.pt"
    if not path.is_file():
        save(corpus, path)
    start = time.process_time()
    trainer = Trainer(settings_for(spec), str(path), log=lambda message: None)
    curve = [round(trainer.run_epoch()["valid_ppl"], 1) for _ in range(spec["E"])]
    cpu = time.process_time() - start
    model, cpu_device = trainer.eval_model(), torch.device("cpu")
    train = corpus.train.numpy()
    out = {"spec": spec, "valid_ppl": curve, "cpu_seconds": round(cpu, 3)}   # 3 digits: a tiny candidate takes < 0.05 s
    for label, tokens in (("test", corpus.test), (f"test_first_{FIRST_TEST_TOKENS}", corpus.test[:FIRST_TEST_TOKENS])):
        ppl = math.exp(evaluate_loss(model, batchify(tokens, 1, cpu_device), spec["bptt"]))
        # the model predicts tokens 2..n of the stream: score the unigram on the same ones
        unigram = unigram_ppl(train, tokens[1:].numpy(), len(corpus.vocab))
        out[label] = {"ppl": round(ppl, 2), "unigram_ppl": round(unigram, 2), "ratio": round(ppl / unigram, 3)}
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit bench candidates", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True, help="full-vocabulary corpus cache (audit prepare)")
    parser.add_argument("--spec", action="append", required=True, help="a candidate, e.g. K=2000,d=64,lr=10")
    args = parser.parse_args(argv)
    specs = [parse_spec(text) for text in args.spec]   # every spec checked before any training
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="audit-candidates-") as work:
        for spec in specs:
            print(json.dumps(measure(spec, Path(args.corpus), Path(work))), flush=True)
    return 0
