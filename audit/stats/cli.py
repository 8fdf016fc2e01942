"""``python -m audit stats``: write the statistics tables of a study from its runs table.

    python -m audit stats --runs RUNS.csv --config STUDY.yaml --out DIR
                          [--table NAME ...] [--wordsim-pairs PAIRS.csv] [--baselines B.csv]
                          [--sentences SENTENCES.npz]
    python -m audit stats --config STUDY.yaml --out DIR [--summaries SUMMARIES.csv]
                          [--table published_comparisons ...]

Writes one CSV per table into DIR (``comparisons.csv``, ``correlations.csv``,
``wordsim_wins.csv``, ``wordsim_diffs.csv``, ``claims.csv``; on request ``evidence_claims.csv``:
the claims on the config's further runs tables, ``audit.stats.sources``); ``--table`` restricts to the
named tables (Snakemake runs one rule per table). The ``published_*`` tables
(``audit.stats.published.evidence``) come from summary rows (corpus, head, metric, mean, sd, n, source) instead
of runs: ``--summaries``, else the config's ``published.data``, else the packaged
``audit/data/published.csv``; they need no runs table. Comparisons and claims drawn from an arm the
guard flags (no finite test perplexity, more than ``stats.max_failed_share`` of its runs failed;
with ``--baselines`` also no baseline for exactly its vocabulary and test tokens, or a median at
or above its unigram) get the verdict ``not_informative``, and correlations and word-similarity
wins over it a note: every table passes ``audit.stats.guard.guard_table``, the evidence tables on
their own runs, the published ones exempt (``guard.EXEMPT`` says why). With ``--sentences`` (``python -m audit collect --sentences-out``) the
comparisons and claims get the multi-bootstrap over seeds and test sentences
(``audit.stats.multiboot``). Each file is written atomically. A table
whose inputs are absent is still written with its header and zero rows, and a ``note:`` line
on stderr says why; the exit status is 0 in that case, 1 on bad input.
"""

from __future__ import annotations

import argparse

import pandas as pd

from audit.errors import AuditError
from audit.evaluate.baselines import load_baselines
from audit.stats import claims, comparisons, correlations, guard, multiboot, sources, wordsim
from audit.stats.published import evidence
from audit.stats.io import (PAIR_COLUMNS, Settings, load_config, load_pairs, load_runs, note,
                             write_table)

TABLES = ("comparisons", "correlations", "wordsim_wins", "wordsim_diffs", "claims")
EVIDENCE_TABLES = ("evidence_claims",)   # only on request: a study with an `evidence:` list
PUBLISHED_TABLES = ("published_comparisons", "published_claims", "published_untestable")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m audit stats", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", help="runs table CSV (one row per run); needed by all but the published_* tables")
    p.add_argument("--summaries", help="summary table CSV for the published_* tables (default: the config's "
                                       "published.data, else audit/data/published.csv)")
    p.add_argument("--config", required=True, help="study config YAML (comparisons/correlations/claims/stats)")
    p.add_argument("--out", required=True, help="directory to write <table>.csv into")
    p.add_argument("--table", action="append", choices=TABLES + EVIDENCE_TABLES + PUBLISHED_TABLES,
                   metavar="NAME", help=f"write only this table (repeatable): "
                                        f"{', '.join(TABLES + EVIDENCE_TABLES + PUBLISHED_TABLES)}")
    p.add_argument("--wordsim-pairs", help="per-pair word-similarity CSV (needed by wordsim_diffs)")
    p.add_argument("--baselines", help="baselines.csv (python -m audit baselines): comparisons and claims drawn "
                                       "from an arm without a baseline of its vocabulary and test tokens, or below its unigram, "
                                       "are labelled not informative (audit.stats.guard)")
    p.add_argument("--sentences", help="per-run test NLL per sentence (sentences.npz of `python -m audit collect`): "
                                       "the multi-bootstrap columns of comparisons and claims")
    return p


def main(argv: list[str] | None = None) -> int:
    """Compute and write the requested tables; returns the exit status."""
    args = build_parser().parse_args(argv)
    config = load_config(args.config)
    source = str(args.config)
    settings = Settings.from_config(config.get("stats"), source)
    default = (TABLES if args.runs else ()) + (PUBLISHED_TABLES if args.summaries or config.get("published") is not None else ())
    wanted = list(dict.fromkeys(args.table or default))
    out = {}
    if set(wanted) & set(PUBLISHED_TABLES):   # from summary rows: never mixed with the runs below
        tables = evidence.published_tables(config, settings, args.summaries, source)
        out.update({name: tables[name] for name in wanted if name in PUBLISHED_TABLES})
        wanted = [name for name in wanted if name not in PUBLISHED_TABLES]
    if wanted and not args.runs:
        raise AuditError(f"stats: table {wanted[0]!r} needs --runs")
    runs = load_runs(args.runs) if wanted else None
    baselines = load_baselines(args.baselines) if args.baselines else None
    sentences = multiboot.load(args.sentences) if args.sentences and wanted else None
    cache = {}

    def comp():
        if "comparisons" not in cache:
            cache["comparisons"] = comparisons.comparisons_table(runs, config, settings, source, sentences)
        return cache["comparisons"]

    def corr():
        if "correlations" not in cache:
            cache["correlations"] = correlations.correlations_table(runs, config, settings, source)
        return cache["correlations"]

    for name in wanted:
        if name == "comparisons":
            out[name] = comp()
            reason = "the study config declares no comparisons"
        elif name == "correlations":
            out[name] = corr()
            reason = "the study config declares no correlations"
        elif name == "wordsim_wins":
            out[name] = wordsim.wins_table(runs)
            reason = f"{args.runs} has no {wordsim.PREFIX}<benchmark> column"
        elif name == "wordsim_diffs":
            if args.wordsim_pairs:
                out[name] = wordsim.diffs_table(load_pairs(args.wordsim_pairs), settings, runs)
                reason = f"{args.wordsim_pairs} has no usable word pairs"
            else:
                out[name] = wordsim.diffs_table(pd.DataFrame(columns=list(PAIR_COLUMNS)), settings)
                reason = "no --wordsim-pairs table was given"
        elif name == "evidence_claims":
            out[name] = sources.evidence_claims_table(config, settings, baselines, source)
            reason = "the study config names no further runs table (evidence:)"
        else:
            # judged on the tests alone, then guarded below: the claims see the unguarded comparisons
            out[name] = claims.claims_table(runs, config, settings, comp(), corr(), source, sentences)
            reason = "no claims in the study config or its claims_file"
        if out[name].empty:
            note(f"{name}.csv has no rows: {reason}")
        if name not in guard.EXEMPT and name not in EVIDENCE_TABLES:
            # every table on this study's runs passes the one guard, chosen by the table's shape;
            # the evidence tables were guarded on their own runs (audit.stats.sources)
            out[name] = guard.guard_table(name, out[name], runs, baselines, config, settings.max_failed_share)
    # compute everything first, then write: a failure above leaves no table half-updated
    for name, table in out.items():
        write_table(table, f"{args.out}/{name}.csv")
    return 0

