"""``python -m audit report <sub-verb>``: one report table, figure, provenance record or the page.

    python -m audit report table --name NAME [--runs RUNS.csv] [--run-dirs D ...]
                                 [--config STATS.yaml] [--comparisons C.csv]
                                 [--correlations R.csv] [--wins W.csv] [--metric M] [--x X]
                                 [--threshold T] --out T.csv
    python -m audit report figure --name NAME ...the same inputs and options... --out F.svg
    python -m audit report provenance --config RESOLVED.yaml --run-dirs D ... --data-dir DIR
                                      --data-files F ... --command CMD --out provenance.json
    python -m audit report html --runs RUNS.csv --config RESOLVED.yaml --tables T.csv ...
                                --figures F.svg ... [--provenance P.json] --out audit.html

The tables and figures, their inputs and options are those of ``audit.report.registry``
(``--name`` chooses the entry, whose builder makes the file). Each Snakemake rule of
``rules/report.smk`` calls exactly one of these; every output is written atomically, so a failed
rule leaves no half-written file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from audit.errors import AuditError
from audit.report import registry


def _write(text: str, out: str) -> None:
    from audit.files import atomic_write_text

    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(text, path)


def sources(args) -> registry.Sources:
    """The inputs and options given on the command line, for a registry builder."""
    paths = {key: getattr(args, key, None) for key, spec in registry.INPUTS.items() if not spec.per_run}
    options = {name: getattr(args, name, None) for name in registry.OPTIONS}
    return registry.Sources(paths, args.run_dirs, options)


def build(kind: str, args) -> str:
    """CSV text of a table or SVG text of a figure, by the registry entry ``args.name``."""
    entry = registry.entry(kind, args.name)
    for key in entry.inputs:
        spec = registry.INPUTS[key]
        if spec.required and not getattr(args, key, None):
            raise AuditError(f"report {kind} --name {entry.name} needs {spec.flag}")
    made = entry.builder(sources(args))
    return made.to_csv(index=False) if kind == "table" else made


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m audit report", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    for kind, help_text in (("table", "one report table (CSV)"), ("figure", "one figure (SVG)")):
        p = sub.add_parser(kind, help=help_text)
        p.add_argument("--name", required=True, choices=[e.name for e in registry.entries(kind, "report")])
        flags = set()
        for key, spec in registry.INPUTS.items():
            if spec.per_run or spec.flag in flags:
                continue
            flags.add(spec.flag)
            p.add_argument(spec.flag, dest=key, help=spec.help)
        p.add_argument(registry.RUN_DIRS_FLAG, dest="run_dirs", nargs="*",
                       help="run folders <corpus>/<head>/<seed> (their eval.json, spectrum.npz, topk.csv)")
        for name, option in registry.OPTIONS.items():
            p.add_argument(f"--{name}", type=option.type, help=option.help)
        p.add_argument("--out", required=True)
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
    if args.verb in ("table", "figure"):
        text = build(args.verb, args)
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
