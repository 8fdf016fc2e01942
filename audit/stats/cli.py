"""``python -m audit stats``: write the statistics tables of a study from its runs table.

    python -m audit stats --runs RUNS.csv --config STUDY.yaml --out DIR
                          [--table NAME ...] [--wordsim-pairs PAIRS.csv] [--baselines B.csv]
                          [--sentences SENTENCES.npz]
    python -m audit stats --config STUDY.yaml --out DIR [--summaries SUMMARIES.csv]
                          [--table published_comparisons ...]
    python -m audit stats --config STUDY.yaml --out DIR --table evidence_claims [--baselines B.csv]

Writes one CSV per table into DIR (``comparisons.csv``, ``correlations.csv``,
``wordsim_wins.csv``, ``wordsim_diffs.csv``, ``claims.csv``; on request ``evidence_claims.csv``:
the claims on the config's further runs tables, ``audit.stats.sources``); ``--table`` restricts to the
named tables (Snakemake runs one rule per table); ``evidence_claims`` reads the runs tables the
config names, so it needs no ``--runs``. The ``published_*`` tables
(``audit.stats.published.evidence``) come from summary rows (corpus, head, metric, mean, sd, n, source) instead
of runs: ``--summaries``, else the config's ``published.data``, else the packaged
``audit/data/published.csv``; they need no runs table. Comparisons and claims drawn from an arm the
guard flags (no finite test perplexity, more than ``stats.max_failed_share`` of its runs failed;
with ``--baselines`` also no baseline for exactly its vocabulary and test tokens, or a median at
or above its unigram) get the verdict ``not_informative``, and correlations and word-similarity
wins over it a note: every table passes the guard its registry entry names, the evidence tables on
their own runs, the published ones exempt (each table's entry in ``audit.stats.tables`` names its guard or why it
is exempt). With ``--sentences`` (``python -m audit collect --sentences-out``) the
comparisons and claims get the multi-bootstrap over seeds and test sentences
(``audit.stats.multiboot``). Each file is written atomically. A table
whose inputs are absent is still written with its header and zero rows, and a ``note:`` line
on stderr says why; the exit status is 0 in that case, 1 on bad input.
"""

from __future__ import annotations

import argparse

from audit.errors import AuditError
from audit.evaluate.baselines import load_baselines
from audit.stats import multiboot, tables as registry
from audit.stats.io import Settings, load_config, load_runs, note, write_table

# the registry's names (audit.stats.tables): the one list of the verb's tables
TABLES = tuple(registry.names("runs"))
EVIDENCE_TABLES = tuple(registry.names("evidence"))      # only on request: a study with an `evidence:` list
PUBLISHED_TABLES = tuple(registry.names("published"))
CHOICES = tuple(t.name for t in registry.TABLES)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m audit stats", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", help="runs table CSV (one row per run); needed by all but the published_* tables")
    p.add_argument("--summaries", help="summary table CSV for the published_* tables (default: the config's "
                                       "published.data, else audit/data/published.csv)")
    p.add_argument("--config", required=True, help="study config YAML (comparisons/correlations/claims/stats)")
    p.add_argument("--out", required=True, help="directory to write <table>.csv into")
    p.add_argument("--table", action="append", choices=CHOICES, metavar="NAME",
                   help=f"write only this table (repeatable): {', '.join(CHOICES)}")
    p.add_argument("--wordsim-pairs", help="per-pair word-similarity CSV (needed by wordsim_diffs)")
    p.add_argument("--baselines", help="baselines.csv (python -m audit baselines): comparisons and claims drawn "
                                       "from an arm without a baseline of its vocabulary and test tokens, or below its unigram, "
                                       "are labelled not informative (audit.stats.guard)")
    p.add_argument("--sentences", help="per-run test NLL per sentence (sentences.npz of `python -m audit collect`): "
                                       "the multi-bootstrap columns of comparisons and claims")
    return p


def _wanted(args, config: dict) -> list[str]:
    """The tables asked for (``--table``), else the default ones the inputs allow."""
    if args.table:
        return list(dict.fromkeys(args.table))
    published = args.summaries or config.get("published") is not None
    return [t.name for t in registry.TABLES if t.default
            and ((t.source == "runs" and args.runs) or (t.source == "published" and published))]


def main(argv: list[str] | None = None) -> int:
    """Compute and write the requested tables; returns the exit status."""
    args = build_parser().parse_args(argv)
    config = load_config(args.config)
    source = str(args.config)
    settings = Settings.from_config(config.get("stats"), source)
    wanted = _wanted(args, config)
    # evidence tables read the runs tables the config names, not --runs: a study that trains
    # nothing (a pretrained suite's runs table alone) has its claims judged on them
    on_runs = [n for n in wanted if registry.table(n).source == "runs"]
    if on_runs and not args.runs:
        raise AuditError(f"stats: table {on_runs[0]!r} needs --runs")
    inputs = registry.Inputs(
        config=config, settings=settings, source=source, summaries=args.summaries, pairs_path=args.wordsim_pairs,
        runs=load_runs(args.runs) if on_runs else None,
        baselines=load_baselines(args.baselines) if args.baselines else None,
        sentences=multiboot.load(args.sentences) if args.sentences and on_runs else None)
    out = {}
    for name in wanted:   # each built and guarded as its registry entry says
        out[name], empty = registry.table(name).make(inputs)
        if empty:
            note(f"{name}.csv has no rows: {empty}")
    # compute everything first, then write: a failure above leaves no table half-updated
    for name, table in out.items():
        write_table(table, f"{args.out}/{name}.csv")
    return 0
