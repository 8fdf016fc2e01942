# Dirichlet synthetic study (audit/synthetic/): one job per (head, d, alpha, seed) fit, then
# the per-fit table (+ summary over seeds) and one figure per metric. Defines no rule and no
# target unless the config has a `synthetic:` section; synthetic_targets() lists the outputs.
import json
import sys

from audit.synthetic import plan as _synthetic
from audit.errors import AuditError

SYNTHETIC_FIT = RESULTS + "/synthetic/{head}/d{d}/alpha{alpha}/seed{seed}.json"
SYNTHETIC_FIGURES = ["mode_match", "kl"]
SYNTHETIC_JOBS = []

if config.get("synthetic") is not None:
    try:
        _kept, _skipped = _synthetic.synthetic_heads(config)
        if _skipped:  # another head may not be registered yet: run the others, say which are left out
            from audit.model.heads.traits import HEAD_OPTIONS as _HEADS

            print(f"warning: synthetic: skipping heads not in the head registry: {', '.join(_skipped)} "
                  f"(known: {', '.join(sorted(_HEADS))})", file=sys.stderr)
        SYNTHETIC_JOBS = _synthetic.fit_jobs(config)
    except AuditError as err:
        sys.exit(f"error: {err}")


def synthetic_fits():
    """Fit records of every (head, d, alpha, seed) of the section."""
    return [SYNTHETIC_FIT.format(head=h, d=d, alpha=a, seed=s) for h, d, a, s in SYNTHETIC_JOBS]


def synthetic_targets():
    """Final outputs of the synthetic study; empty without a `synthetic:` section."""
    if not SYNTHETIC_JOBS:
        return []
    return [f"{REPORTS}/tables/synthetic.csv", f"{REPORTS}/tables/synthetic_summary.csv"] + [
        f"{REPORTS}/figures/synthetic_{m}.svg" for m in SYNTHETIC_FIGURES
    ]


def synthetic_settings(wildcards):
    settings = _synthetic.fit_settings(config, wildcards.head, int(wildcards.d), wildcards.alpha, int(wildcards.seed))
    return json.dumps(settings, sort_keys=True)


def synthetic_gpus(wildcards):
    """GPU slots of a fit: decided from the config (`cuda`: 1 even on a CPU-only planning host)."""
    return job_gpus(config["synthetic"]["device"])


if SYNTHETIC_JOBS:

    rule synthetic_fit:
        output:
            SYNTHETIC_FIT,
        params:
            settings=synthetic_settings,
        threads: config["synthetic"]["threads"]
        resources:
            gpu=synthetic_gpus,
        wildcard_constraints:
            d="[0-9]+",
            alpha="[0-9.e+-]+",
        log:
            f"logs/{STUDY}/synthetic/{{head}}/d{{d}}/alpha{{alpha}}/seed{{seed}}.log",
        benchmark:  # wall s, peak memory, CPU s of the fit
            RESULTS + "/synthetic/{head}/d{d}/alpha{alpha}/seed{seed}.benchmark.tsv"
        shell:
            "python -m audit synthetic fit --settings {params.settings:q} --out {output} > {log} 2>&1"

    rule synthetic_table:
        input:
            synthetic_fits(),
        output:
            table=f"{REPORTS}/tables/synthetic.csv",
            summary=f"{REPORTS}/tables/synthetic_summary.csv",
        log:
            f"logs/{STUDY}/synthetic/table.log",
        shell:
            "python -m audit synthetic table --inputs {input} --out {output.table} "
            "--summary-out {output.summary} > {log} 2>&1"

    rule synthetic_figure:
        input:
            table=f"{REPORTS}/tables/synthetic.csv",
        output:
            f"{REPORTS}/figures/synthetic_{{metric}}.svg",
        wildcard_constraints:
            metric="|".join(SYNTHETIC_FIGURES),
        log:
            f"logs/{STUDY}/synthetic/figure_{{metric}}.log",
        shell:
            "python -m audit synthetic figure --table {input.table} --metric {wildcards.metric} "
            "--out {output} > {log} 2>&1"
