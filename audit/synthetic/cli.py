"""``python -m audit synthetic fit|table|figure``: one fit, the table of fits, one figure."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from audit.errors import AuditError
from audit.synthetic.plan import FIGURE_METRICS


def main(argv: list[str]) -> int:
    from audit.files import atomic_write_text

    parser = argparse.ArgumentParser(prog="python -m audit synthetic", description="The Dirichlet synthetic study (after Ganea et al. 2019)")
    sub = parser.add_subparsers(dest="command", required=True)
    p_fit = sub.add_parser("fit", help="fit one (head, d, alpha, seed) and write its record")
    p_fit.add_argument("--settings", required=True, help="JSON settings of the fit (see fit_settings)")
    p_fit.add_argument("--out", required=True, help="record JSON to write")
    p_table = sub.add_parser("table", help="gather fit records into a CSV table")
    p_table.add_argument("--inputs", nargs="+", required=True, help="fit record JSON files")
    p_table.add_argument("--out", required=True, help="per-fit table CSV")
    p_table.add_argument("--summary-out", help="optional per-(head, alpha, d) summary CSV")
    p_fig = sub.add_parser("figure", help="draw one metric against d")
    p_fig.add_argument("--table", required=True, help="per-fit table CSV")
    p_fig.add_argument("--metric", required=True, choices=sorted(FIGURE_METRICS))
    p_fig.add_argument("--out", required=True, help="SVG to write")
    args = parser.parse_args(argv)
    if args.command == "fit":
        try:
            settings = json.loads(args.settings)
        except ValueError as err:
            raise AuditError(f"synthetic fit: --settings is not valid JSON ({err.msg})") from None
        from audit.model.heads.traits import HEAD_OPTIONS as HEADS

        if settings.get("registry_head") not in HEADS:
            raise AuditError(f"synthetic fit: head {settings.get('registry_head')!r} is not in the head "
                             f"registry; known heads: {', '.join(sorted(HEADS))}")
        from audit.synthetic.fit import fit

        record = fit(settings, log=lambda line: print(line, file=sys.stderr))
        atomic_write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", Path(args.out))
    elif args.command == "table":
        from audit.synthetic.tables import collect, summarise

        table = collect(args.inputs)
        atomic_write_text(table.to_csv(index=False, float_format="%.10g"), Path(args.out))
        if args.summary_out:
            atomic_write_text(summarise(table).to_csv(index=False, float_format="%.10g"), Path(args.summary_out))
    else:
        import pandas as pd

        from audit.synthetic.tables import figure

        table = pd.read_csv(args.table)
        atomic_write_text(figure(table, args.metric), Path(args.out))
    return 0


if __name__ == "__main__":  # `python -m audit synthetic` is the entry point; this one serves debugging
    sys.exit(main(sys.argv[1:]))
