"""``python -m audit train``: one run, or the seeds of one arm in one process.

``--settings`` is one run's JSON settings (``audit.config.run_settings``; ``audit.train.run``
trains it) or a JSON list of the seeds of one arm, each with its own ``--out-dir``
(``audit.train.group`` trains them in turn, issue 57).
"""

from __future__ import annotations

import argparse
import json

from audit.errors import AuditError
from audit.train.group import train_group
from audit.train.run import train


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit train", description=__doc__)
    parser.add_argument("--settings", required=True, help="JSON run settings (audit.config.run_settings); "
                        "a JSON list of the seeds of one arm trains them in this process (audit.train.group)")
    parser.add_argument("--corpus", required=True, help="corpus cache written by `audit prepare`")
    parser.add_argument("--out-dir", required=True, nargs="+",
                        help="run folder for model.pt, metrics.json, work/ (one per run of a list)")
    args = parser.parse_args(argv)
    try:
        settings = json.loads(args.settings)
    except json.JSONDecodeError as err:
        raise AuditError(f"--settings is not valid JSON: {err}") from None

    def log(message: str) -> None:
        print(message, flush=True)

    if isinstance(settings, list):
        runs = list(zip(settings, train_group(settings, args.corpus, args.out_dir, log)))
    elif len(args.out_dir) != 1:
        raise AuditError(f"--out-dir: one run, {len(args.out_dir)} folders")
    else:
        runs = [(settings, train(settings, args.corpus, args.out_dir[0], log))]
    for s, metrics in runs:
        print(f"{metrics['status']}: {s['name']} seed {s['seed']} valid ppl {metrics['valid_ppl']:.2f}")
    return 0
