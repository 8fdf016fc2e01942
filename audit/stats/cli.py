"""``python -m audit stats``: write the statistics tables of a study from its runs table.

    python -m audit stats --runs RUNS.csv --config STUDY.yaml --out DIR
                          [--table NAME ...] [--wordsim-pairs PAIRS.csv]

Writes one CSV per table into DIR (``comparisons.csv``, ``correlations.csv``,
``wordsim_wins.csv``, ``wordsim_diffs.csv``, ``claims.csv``); ``--table`` restricts to the
named tables (Snakemake runs one rule per table). Each file is written atomically. A table
whose inputs are absent is still written with its header and zero rows, and a ``note:`` line
on stderr says why; the exit status is 0 in that case, 1 on bad input.
"""

from __future__ import annotations

import argparse

import pandas as pd

from audit.stats import claims, comparisons, correlations, wordsim
from audit.stats.io import (PAIR_COLUMNS, Settings, load_config, load_pairs, load_runs, note,
                             write_table)

TABLES = ("comparisons", "correlations", "wordsim_wins", "wordsim_diffs", "claims")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m audit stats", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", required=True, help="runs table CSV (one row per run)")
    p.add_argument("--config", required=True, help="study config YAML (comparisons/correlations/claims/stats)")
    p.add_argument("--out", required=True, help="directory to write <table>.csv into")
    p.add_argument("--table", action="append", choices=TABLES, metavar="NAME",
                   help=f"write only this table (repeatable): {', '.join(TABLES)}")
    p.add_argument("--wordsim-pairs", help="per-pair word-similarity CSV (needed by wordsim_diffs)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Compute and write the requested tables; returns the exit status."""
    args = build_parser().parse_args(argv)
    wanted = list(dict.fromkeys(args.table or TABLES))
    runs = load_runs(args.runs)
    config = load_config(args.config)
    source = str(args.config)
    settings = Settings.from_config(config.get("stats"), source)
    out = {}
    cache = {}

    def comp():
        if "comparisons" not in cache:
            cache["comparisons"] = comparisons.comparisons_table(runs, config, settings, source)
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
        else:
            out[name] = claims.claims_table(runs, config, settings, comp(), corr(), source)
            reason = "no claims in the study config or its claims_file"
        if out[name].empty:
            note(f"{name}.csv has no rows: {reason}")
    # compute everything first, then write: a failure above leaves no table half-updated
    for name, table in out.items():
        write_table(table, f"{args.out}/{name}.csv")
    return 0

