"""``python -m audit pretrained <step>``: the pretrained source's steps, one module each.

- ``evaluate``: measure one (model, seed, checkpoint) (``audit.pretrained.job``);
- ``collect``: the suite's checkpoints table, runs table, sentences and word pairs (``table``);
- ``plan``: every job's planned cost from the config alone, no checkpoint needed, or with
  ``--downloads`` the ``hf download`` line of every checkpoint and the disk they take (``plan``);
- ``claims``: write the per-size claims of a suite's config (``claims``);
- ``example``: build the constructed example suite (``example``).

Heavy imports (torch, transformers) happen inside the step that needs them, so ``plan`` and
``claims`` run on a login node without either.
"""

from __future__ import annotations

import argparse
import json


def _collect(args) -> int:
    from audit.pretrained import table

    runs = table.collect(json.loads(args.section), args.results, args.out, args.corpus)
    print(f"pretrained runs table -> {args.out}/runs.csv ({len(runs)} runs); checkpoints -> {args.out}/checkpoints.csv")
    return 0


def _plan(args) -> int:
    from audit.config import load_study
    from audit.pretrained import plan

    study = load_study(args.config)
    print(plan.downloads(study) if args.downloads else plan.render(study))
    return 0


def _claims(args) -> int:
    from audit.config import load_study
    from audit.pretrained import claims

    claims.write(load_study(args.config), args.out)
    print(f"claims -> {args.out}")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit pretrained", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    from audit.pretrained import job

    job.add_arguments(steps.add_parser("evaluate", help="measure one (model, seed, checkpoint)"))
    collect = steps.add_parser("collect", help="gather the suite's job folders into its tables")
    collect.add_argument("--section", required=True, help="the study's pretrained: section as JSON")
    collect.add_argument("--results", required=True, help="results/<study>")
    collect.add_argument("--corpus", required=True, help="the text's name (the runs table's corpus)")
    collect.add_argument("--out", required=True, help="reports/<study>/pretrained")
    plan = steps.add_parser("plan", help="every job's planned cost, from the config alone")
    plan.add_argument("config")
    plan.add_argument("--downloads", action="store_true", help="print the hf download line of every checkpoint instead")
    claims = steps.add_parser("claims", help="write the per-size claims of a suite")
    claims.add_argument("config")
    claims.add_argument("--out", required=True)
    example = steps.add_parser("example", help="build the constructed example suite", add_help=False)
    example.add_argument("rest", nargs=argparse.REMAINDER)
    if argv[:1] == ["example"]:
        from audit.pretrained import example as built

        return built.main(argv[1:])
    args = parser.parse_args(argv)
    return {"evaluate": job.main, "collect": _collect, "plan": _plan, "claims": _claims}[args.step](args)
