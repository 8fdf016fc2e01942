"""``python -m audit report <sub-verb>``: one report table, figure, provenance record or the page.

    python -m audit report table --name NAME --runs RUNS.csv [--run-dirs D ...]
                                 [--config STATS.yaml] [--comparisons C.csv]
                                 [--correlations R.csv] --out T.csv
    python -m audit report figure --name NAME --runs RUNS.csv [--run-dirs D ...]
                                  [--correlations R.csv] [--wins W.csv] [--metric M] --out F.svg
    python -m audit report provenance --config RESOLVED.yaml --run-dirs D ... --data-dir DIR
                                      --data-files F ... --command CMD --out provenance.json
    python -m audit report html --runs RUNS.csv --config RESOLVED.yaml --tables T.csv ...
                                --figures F.svg ... [--provenance P.json] --out audit.html

Each Snakemake rule of ``rules/report.smk`` calls exactly one of these; every output is written
atomically, so a failed rule leaves no half-written file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from audit.errors import AuditError
from audit.stats.io import load_runs

TABLES = ("results", "ranks", "wordsim_rho", "wordsim_coverage", "warnings", "topk", "grid")
GRID_FIGURES = ("grid_rank_vs_ppl", "grid_heatmaps", "grid_lines")  # audit.report.grid, from --runs
FIGURES = ("rank_decay", "rank_vs_ppl", "strip", "wordsim_wins", "jacobian") + GRID_FIGURES


def _write(text: str, out: str) -> None:
    from audit.files import atomic_write_text

    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(text, path)


def _optional_csv(path: str | None):
    import pandas as pd

    if not path:
        return None
    if not Path(path).is_file():
        raise AuditError(f"table not found: {path}")
    table = pd.read_csv(path)
    return table if len(table) else None


def spectra(run_dirs: list[str], key: str = "log_p_sv") -> dict[tuple[str, str], list[np.ndarray]]:
    """(corpus, head) -> singular-value arrays of that head's runs, from ``<corpus>/<head>/<seed>``
    run folders; runs whose ``spectrum.npz`` lacks ``key`` (failed runs) are skipped."""
    curves: dict[tuple[str, str], list[np.ndarray]] = {}
    for run_dir in sorted(map(Path, run_dirs), key=lambda p: (p.parent.parent.name, p.parent.name,
                                                              int(p.name) if p.name.isdigit() else 0)):
        path = run_dir / "spectrum.npz"
        if not path.is_file():
            raise AuditError(f"missing {path}: the run was not evaluated")
        with np.load(path) as data:
            if key in data.files and data[key].size:
                curves.setdefault((run_dir.parent.parent.name, run_dir.parent.name), []).append(data[key])
    return curves


def make_table(args) -> str:
    from audit.report import checks, summary

    if args.name == "wordsim_coverage":
        return summary.coverage_table(args.run_dirs or []).to_csv(index=False)
    if args.name == "topk":
        return summary.topk_table(args.run_dirs or []).to_csv(index=False)
    runs = load_runs(args.runs)
    if args.name == "results":
        table = summary.results_table(runs)
    elif args.name == "ranks":
        table = summary.ranks_table(runs)
    elif args.name == "wordsim_rho":
        table = summary.wordsim_rho_table(runs)
    elif args.name == "grid":
        from audit.report.grid import grid_table

        table = grid_table(runs)
    else:
        import yaml

        config = yaml.safe_load(Path(args.config).read_text()) if args.config else {}
        table = checks.find_warnings(runs, config or {}, _optional_csv(args.comparisons),
                                     _optional_csv(args.correlations))
    return table.to_csv(index=False)


def make_figure(args) -> str:
    from audit.report import figures

    if args.name == "rank_decay":
        return figures.rank_decay(spectra(args.run_dirs or []))
    if args.name == "wordsim_wins":
        return figures.wins_heatmap(_optional_csv(args.wins))
    if args.name == "jacobian":
        return figures.jacobian_spectra(spectra(args.run_dirs or [], "jacobian_mean_normalised_sv"), args.threshold)
    runs = load_runs(args.runs)
    if args.name in GRID_FIGURES:
        from audit.report import grid

        return getattr(grid, args.name)(runs)
    if args.name == "strip":
        return figures.seed_strip(runs, args.metric or "test_ppl")
    return figures.rank_vs_metric(runs, _optional_csv(args.correlations), args.x, args.metric or "test_ppl")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m audit report", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    table = sub.add_parser("table", help="one report table (CSV)")
    table.add_argument("--name", required=True, choices=TABLES)
    figure = sub.add_parser("figure", help="one figure (SVG)")
    figure.add_argument("--name", required=True, choices=FIGURES)
    figure.add_argument("--metric", help="y column (strip, rank_vs_ppl); default test_ppl")
    figure.add_argument("--x", default="press_rank", help="x column of rank_vs_ppl")
    figure.add_argument("--wins", help="wordsim_wins.csv")
    figure.add_argument("--threshold", type=float, help="degeneracy threshold drawn on the jacobian figure")
    for p in (table, figure):
        p.add_argument("--runs", help="runs table CSV")
        p.add_argument("--run-dirs", nargs="*", help="run folders <corpus>/<head>/<seed>")
        p.add_argument("--correlations", help="correlations.csv")
        p.add_argument("--out", required=True)
    table.add_argument("--config", help="statistics config YAML (stats, comparisons)")
    table.add_argument("--comparisons", help="comparisons.csv")
    prov = sub.add_parser("provenance", help="provenance.json")
    prov.add_argument("--config", required=True, help="resolved study config YAML")
    prov.add_argument("--run-dirs", nargs="*", default=[])
    prov.add_argument("--data-dir", required=True)
    prov.add_argument("--data-files", nargs="*", default=[])
    prov.add_argument("--command", required=True, help="command line that reproduces the study")
    prov.add_argument("--repo", default=".", help="working tree whose git state is recorded")
    prov.add_argument("--out", required=True)
    html = sub.add_parser("html", help="the audit page")
    html.add_argument("--runs", help="runs table CSV (absent for a study without language-model runs)")
    html.add_argument("--config", required=True, help="resolved study config YAML")
    html.add_argument("--tables", nargs="*", default=[], help="CSV tables (named by file stem)")
    html.add_argument("--figures", nargs="*", default=[], help="SVG figures (named by file stem)")
    html.add_argument("--provenance", help="provenance.json")
    html.add_argument("--out", required=True)
    return parser


def main(argv: list[str]) -> int:
    """Run one sub-verb; returns the exit status (bad input raises AuditError)."""
    args = build_parser().parse_args(argv)
    if args.verb in ("table", "figure") and args.name not in ("wordsim_coverage", "topk", "rank_decay", "wordsim_wins", "jacobian") \
            and not args.runs:
        raise AuditError(f"report {args.verb} --name {args.name} needs --runs")
    if args.verb == "table":
        text = make_table(args)
    elif args.verb == "figure":
        text = make_figure(args)
    elif args.verb == "provenance":
        from audit.report import provenance

        record = provenance.collect(Path(args.config), [Path(d) for d in args.run_dirs],
                                    [Path(f) for f in args.data_files], Path(args.data_dir),
                                    args.command, Path(args.repo))
        text = json.dumps(record, indent=1, sort_keys=False, default=str) + "\n"
    else:
        from audit.report.render import render

        text = render(args.runs, args.config, args.tables, args.figures, args.provenance)
    _write(text, args.out)
    print(f"report {args.verb} -> {args.out}")
    return 0
