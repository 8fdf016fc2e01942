# Report: every report table and figure is its own rule and file; the audit rule only assembles.
# The rules are generated from audit/report/registry.py (one entry per table or figure: its
# inputs, options, caption and the condition under which a study draws it); add a table or figure
# there, not here. Inputs are the runs table, the statistics tables and small per-run files
# (eval.json, spectrum.npz, topk.csv), never model.pt, so refreshing a table retrains nothing:
#   snakemake -f reports/<study>/tables/<name>.csv
# `snakemake --report` renders the same outputs (registered with report()) with Snakemake's
# own provenance and runtimes.
import os

from audit.plan import datafiles as _manifest
from audit.report import registry as _registry

_registry.check()


def reproduce_command():
    """The shell command that reruns this study: the config files given on the command line
    (none for the default study, which rules/common.smk loads by itself)."""
    files = []
    for f in workflow.overwrite_configfiles or []:
        path = os.path.abspath(str(f))
        files.append(os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else path)
    mirror = "" if config["data"]["mirror"] else os.environ.get("AUDIT_DATA_MIRROR", "")
    prefix = f"AUDIT_DATA_MIRROR={mirror} " if mirror else ""
    return prefix + "snakemake --cores all" + "".join(f" --configfile {f}" for f in files)


def data_files():
    """The verified data files the study read."""
    # the corpora's splits, and the word-similarity benchmarks when the study has runs (published and
    # synthetic studies read none): the list `python -m audit data-files` prints (audit/plan/datafiles.py)
    return [f"{DATA}/{name}" for name in _manifest.study_files(config)] + [
        paths[split] for paths in USER_FILES.values() for split in ("train", "valid", "test")]  # data.files


report: "../captions/workflow.rst"


rule resolved_config:
    output:
        f"{RESULTS}/config.resolved.yaml",
    params:
        config=dict(config),
    log:
        f"logs/{STUDY}/resolved_config.log",
    run:
        with open(log[0], "w") as handle:  # a run: rule writes its own log
            try:
                write_yaml(params.config, output[0])
            except Exception as err:
                print(f"error: {err}", file=handle)
                raise
            print(f"resolved config -> {output[0]}", file=handle)


for _entry in _registry.entries(made_by="report"):

    rule:
        name:
            _entry.rule
        input:
            **report_entry_inputs(_entry),
        output:
            report(_entry.path(REPORTS), caption=f"../captions/{_entry.caption_file}",
                   category=f"{_entry.kind.capitalize()}s", labels={_entry.kind: _entry.name}),
        params:  # fixed here: shell: is evaluated when the job runs, after the loop moved on
            kind=_entry.kind,
            name=_entry.name,
            arguments=report_entry_arguments(_entry),
        log:
            f"logs/{STUDY}/report/{_entry.kind}_{_entry.name}.log",
        shell:
            _registry.SHELL


rule report_provenance:
    input:
        config=f"{RESULTS}/config.resolved.yaml",
        metrics=run_files("metrics.json"),
        # after evaluation, so that the evaluate jobs' benchmark files are there to record
        results=run_files("eval.json"),
        data=data_files(),
    output:
        report(f"{REPORTS}/provenance.json", caption="../captions/provenance.rst",
               category="Provenance", labels={"file": "provenance.json"}),
    params:
        run_dirs=run_dirs_param(),
        command=reproduce_command(),
    log:
        f"logs/{STUDY}/report/provenance.log",
    shell:
        "python -m audit report provenance --config {input.config} --run-dirs {params.run_dirs} "
        "--data-dir {DATA} --data-files {input.data} --command {params.command:q} --out {output} > {log} 2>&1"


def report_tables():
    """Tables the page assembles: the registry's entries this study draws."""
    return [entry.path(REPORTS) for entry in _registry.drawn(config, "table")]


def report_figure_files():
    """Figures the page assembles: the registry's entries this study draws."""
    return [entry.path(REPORTS) for entry in _registry.drawn(config, "figure")]


rule report:
    input:
        runs=[f"{REPORTS}/runs.csv"] if study_has_runs() else [],
        config=f"{RESULTS}/config.resolved.yaml",
        tables=report_tables(),
        figures=report_figure_files(),
        provenance=f"{REPORTS}/provenance.json",
    output:
        report(f"{REPORTS}/audit.html", caption="../captions/audit.rst", category="Audit",
               labels={"file": "audit.html"}),
    params:
        runs=f"--runs {REPORTS}/runs.csv" if study_has_runs() else "",
    log:
        f"logs/{STUDY}/report.log",
    shell:
        "python -m audit report html {params.runs} --config {input.config} --tables {input.tables} "
        "--figures {input.figures} --provenance {input.provenance} --out {output} > {log} 2>&1"
