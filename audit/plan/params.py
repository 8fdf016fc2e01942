"""``python -m audit params <config.yaml>``: ``<name> <n_params>`` per head entry of a study.

The counts are ``audit.model.params.head_counts`` (exact, on PyTorch's meta device); this verb
reads the study, so it lives with the other planning verbs above ``audit.config``.
"""

from __future__ import annotations

import argparse

from audit.config import load_study
from audit.model.params import head_counts


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit params",
                                     description="Print '<head> <n_params>' for each head of a study.")
    parser.add_argument("config", help="study config YAML")
    parser.add_argument("--corpus", help="corpus to size the vocabulary (default: the study's first)")
    parser.add_argument("--vocab-size", type=int,
                        help="use this V instead of the study's (data.vocab_size, else the corpus's)")
    parser.add_argument("--sizes", action="store_true", help="also print d, H and d' of each head")
    args = parser.parse_args(argv)
    study = load_study(args.config)
    corpus = args.corpus or study.get("data", {}).get("corpora", ["ptb"])[0]
    for name, count, cfg in head_counts(study, corpus, args.vocab_size):
        extra = f" d={cfg.emb_size} H={cfg.to_dict().get('hidden_size')} d'={cfg.d_out}" if args.sizes else ""
        print(f"{name} {count}{extra}")
    return 0
