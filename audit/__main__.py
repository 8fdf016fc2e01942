"""Command-line entry point: ``python -m audit <verb> [options]``.

Each verb lives in its own module and exposes ``main(argv) -> int``; this file only
dispatches, so that importing one verb never imports the heavy dependencies of another.
"""

import importlib
import sys

# verb -> module whose ``main(argv)`` runs it
VERBS = {
    "fetch": "audit.data.fetch",          # obtain and checksum one data file
    "data-files": "audit.plan.datafiles", # the mirror files a study reads, checked and sized
    "prepare": "audit.data.corpus",       # tokenise a corpus and cache its id tensors
    "train": "audit.train.cli",           # train one (corpus, head, seed) run, or one arm's seeds in turn
    "progress": "audit.report.progress",  # epochs done, best valid ppl, s/epoch, ETA of a study's runs
    "evaluate": "audit.evaluate.run",     # test perplexity, log-P spectrum, word similarity
    "collect": "audit.stats.runs_table",  # gather per-run metrics into the runs table
    "stats": "audit.stats.cli",           # one statistics table from the runs table
    "baselines": "audit.evaluate.baselines",  # unigram and add-k bigram perplexity of each corpus
    "sequential": "audit.stats.sequential.interim",  # interim analysis of a group-sequential seeds schedule
    "report": "audit.report.cli",         # report tables, figures, provenance and the HTML audit
    "params": "audit.plan.params",        # print parameter counts of a config's heads
    "bench": "audit.bench",               # benchmarks that print figures
    "plan-memory": "audit.plan.memory",   # peak GPU memory per job of a config, runs per GPU
    "validate": "audit.config",           # validate a study config and print it resolved
    "synthetic": "audit.synthetic.cli",   # the Dirichlet synthetic study (fits, table, figures)
    "gpu-check": "audit.gpucheck.cli",    # GPU acceptance: correctness, syncs, memory, speed, the DAG
    "pretrained": "audit.pretrained.cli", # a pretrained suite (PolyPythias): evaluate, collect, plan, claims, example
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in VERBS:
        verbs = "\n".join(f"  {verb:11s} {mod}" for verb, mod in VERBS.items())
        print(f"usage: python -m audit <verb> [options]\n\nverbs:\n{verbs}", file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    from audit.errors import AuditError

    module = importlib.import_module(VERBS[argv[0]])
    try:
        return int(module.main(argv[1:]) or 0)
    except AuditError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except Exception as err:
        if type(err).__name__ == "OutOfMemoryError":  # torch.cuda's, by name: no torch import here
            # not a crash of the code: the job exits non-zero and Snakemake's retries rerun it
            print(f"error: out of GPU memory in {argv[0]}: {' '.join(str(err).split())[:300]}", file=sys.stderr)
            return 1
        # a crash: keep the traceback for the log, then end it with one line
        import traceback

        traceback.print_exc()
        message = " ".join(f"{type(err).__name__}: {err}".split())
        print(f"error: {argv[0]} crashed: {message}", file=sys.stderr)  # the line the console shows
        return 1


if __name__ == "__main__":
    sys.exit(main())
