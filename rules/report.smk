# Report: every report table and figure is its own rule and file; the audit rule only assembles.
# Inputs are the runs table, the statistics tables and small per-run files (metrics.json,
# eval.json, spectrum.npz), never model.pt, so refreshing a table retrains nothing.
# `snakemake --report` renders the same outputs (registered with report()) with Snakemake's
# own provenance and runtimes.
import os

REPORT_TABLES = ["results", "ranks", "wordsim_rho", "wordsim_coverage", "warnings", "topk"]


def report_figures():
    """Figures this study can draw: the wins heatmap needs two heads."""
    names = ["rank_decay", "rank_vs_ppl", "strip"]
    if config["evaluate"]["jacobian"]["contexts"]:
        names.append("jacobian")
    if len(config["heads"]) >= 2:
        names.append("wordsim_wins")
    return names


def grid_figures():
    """Grid-sweep figures (audit/report/grid.py): none unless some arm is a point of an expanded
    grid (only those entries carry `grid_point`); heatmaps only for a grid of exactly two options."""
    points = [entry["grid_point"] for entry in config["heads"] if entry.get("grid_point")]
    if not points:
        return []
    heatmaps = ["grid_heatmaps"] if any(len(point) == 2 for point in points) else []
    return ["grid_rank_vs_ppl"] + heatmaps + ["grid_lines"]


def grid_report_targets():
    """The grid table and figures of this study; empty without a grid."""
    names = grid_figures()
    if not names:
        return []
    return [f"{REPORTS}/tables/grid.csv"] + [f"{REPORTS}/figures/{name}.svg" for name in names]


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
    splits = [f"{DATA}/{c}/{s}.txt" for c in config["data"]["corpora"] for s in ("train", "valid", "test")]
    return splits + [f"{DATA}/wordsim/{name}" for name in WORDSIM_FILES]


report: "../report/workflow.rst"


rule resolved_config:
    output:
        f"{RESULTS}/config.resolved.yaml",
    params:
        config=dict(config),
    log:
        f"logs/{STUDY}/resolved_config.log",
    run:
        write_yaml(params.config, output[0])


for _table in ["results", "ranks", "wordsim_rho"]:

    rule:
        name:
            f"report_table_{_table}"
        input:
            runs=f"{REPORTS}/runs.csv",
        output:
            report(f"{REPORTS}/tables/{_table}.csv", caption=f"../report/table_{_table}.rst",
                   category="Tables", labels={"table": _table}),
        params:
            table=_table,
        log:
            f"logs/{STUDY}/report/table_{_table}.log",
        shell:
            "python -m audit report table --name {params.table} --runs {input.runs} --out {output} > {log} 2>&1"


rule report_table_wordsim_coverage:
    input:
        results=[f"{d}/eval.json" for d in run_dirs()],
    output:
        report(f"{REPORTS}/tables/wordsim_coverage.csv", caption="../report/table_wordsim_coverage.rst",
               category="Tables", labels={"table": "wordsim_coverage"}),
    params:
        run_dirs=run_dirs(),
    log:
        f"logs/{STUDY}/report/table_wordsim_coverage.log",
    shell:
        "python -m audit report table --name wordsim_coverage --run-dirs {params.run_dirs} "
        "--out {output} > {log} 2>&1"


rule report_table_topk:
    input:
        topk=[f"{d}/topk.csv" for d in run_dirs()],
    output:
        report(f"{REPORTS}/tables/topk.csv", caption="../report/table_topk.rst",
               category="Tables", labels={"table": "topk"}),
    params:
        run_dirs=run_dirs(),
    log:
        f"logs/{STUDY}/report/table_topk.log",
    shell:
        "python -m audit report table --name topk --run-dirs {params.run_dirs} --out {output} > {log} 2>&1"


rule report_figure_jacobian:
    input:
        spectra=[f"{d}/spectrum.npz" for d in run_dirs()],
    output:
        report(f"{REPORTS}/figures/jacobian.svg", caption="../report/figure_jacobian.rst",
               category="Figures", labels={"figure": "jacobian"}),
    params:
        run_dirs=run_dirs(),
        threshold=config["evaluate"]["jacobian"]["threshold"],
    log:
        f"logs/{STUDY}/report/figure_jacobian.log",
    shell:
        "python -m audit report figure --name jacobian --run-dirs {params.run_dirs} "
        "--threshold {params.threshold} --out {output} > {log} 2>&1"


rule report_table_warnings:
    input:
        runs=f"{REPORTS}/runs.csv",
        config=f"{RESULTS}/stats_config.yaml",
        comparisons=f"{REPORTS}/tables/comparisons.csv",
        correlations=f"{REPORTS}/tables/correlations.csv",
    output:
        report(f"{REPORTS}/tables/warnings.csv", caption="../report/table_warnings.rst",
               category="Tables", labels={"table": "warnings"}),
    log:
        f"logs/{STUDY}/report/table_warnings.log",
    shell:
        "python -m audit report table --name warnings --runs {input.runs} --config {input.config} "
        "--comparisons {input.comparisons} --correlations {input.correlations} --out {output} > {log} 2>&1"


rule report_figure_rank_decay:
    input:
        spectra=[f"{d}/spectrum.npz" for d in run_dirs()],
    output:
        report(f"{REPORTS}/figures/rank_decay.svg", caption="../report/figure_rank_decay.rst",
               category="Figures", labels={"figure": "rank_decay"}),
    params:
        run_dirs=run_dirs(),
    log:
        f"logs/{STUDY}/report/figure_rank_decay.log",
    shell:
        "python -m audit report figure --name rank_decay --run-dirs {params.run_dirs} --out {output} > {log} 2>&1"


rule report_figure_rank_vs_ppl:
    input:
        runs=f"{REPORTS}/runs.csv",
        correlations=f"{REPORTS}/tables/correlations.csv",
    output:
        report(f"{REPORTS}/figures/rank_vs_ppl.svg", caption="../report/figure_rank_vs_ppl.rst",
               category="Figures", labels={"figure": "rank_vs_ppl"}),
    log:
        f"logs/{STUDY}/report/figure_rank_vs_ppl.log",
    shell:
        "python -m audit report figure --name rank_vs_ppl --runs {input.runs} "
        "--correlations {input.correlations} --x press_rank --metric test_ppl --out {output} > {log} 2>&1"


rule report_figure_strip:
    input:
        runs=f"{REPORTS}/runs.csv",
    output:
        report(f"{REPORTS}/figures/strip.svg", caption="../report/figure_strip.rst",
               category="Figures", labels={"figure": "strip"}),
    log:
        f"logs/{STUDY}/report/figure_strip.log",
    shell:
        "python -m audit report figure --name strip --runs {input.runs} --metric test_ppl --out {output} > {log} 2>&1"


rule report_figure_wordsim_wins:
    input:
        wins=f"{REPORTS}/tables/wordsim_wins.csv",
    output:
        report(f"{REPORTS}/figures/wordsim_wins.svg", caption="../report/figure_wordsim_wins.rst",
               category="Figures", labels={"figure": "wordsim_wins"}),
    log:
        f"logs/{STUDY}/report/figure_wordsim_wins.log",
    shell:
        "python -m audit report figure --name wordsim_wins --wins {input.wins} --out {output} > {log} 2>&1"


rule report_table_grid:
    input:
        runs=f"{REPORTS}/runs.csv",
    output:
        report(f"{REPORTS}/tables/grid.csv", caption="../report/table_grid.rst",
               category="Tables", labels={"table": "grid"}),
    log:
        f"logs/{STUDY}/report/table_grid.log",
    shell:
        "python -m audit report table --name grid --runs {input.runs} --out {output} > {log} 2>&1"


for _figure in ["grid_rank_vs_ppl", "grid_heatmaps", "grid_lines"]:

    rule:
        name:
            f"report_figure_{_figure}"
        input:
            runs=f"{REPORTS}/runs.csv",
        output:
            report(f"{REPORTS}/figures/{_figure}.svg", caption=f"../report/figure_{_figure}.rst",
                   category="Figures", labels={"figure": _figure}),
        params:
            figure=_figure,
        log:
            f"logs/{STUDY}/report/figure_{_figure}.log",
        shell:
            "python -m audit report figure --name {params.figure} --runs {input.runs} --out {output} > {log} 2>&1"


rule report_provenance:
    input:
        config=f"{RESULTS}/config.resolved.yaml",
        metrics=[f"{d}/metrics.json" for d in run_dirs()],
        data=data_files(),
    output:
        report(f"{REPORTS}/provenance.json", caption="../report/provenance.rst",
               category="Provenance", labels={"file": "provenance.json"}),
    params:
        run_dirs=run_dirs(),
        command=reproduce_command(),
    log:
        f"logs/{STUDY}/report/provenance.log",
    shell:
        "python -m audit report provenance --config {input.config} --run-dirs {params.run_dirs} "
        "--data-dir {DATA} --data-files {input.data} --command {params.command:q} --out {output} > {log} 2>&1"


def report_tables():
    """Tables the page assembles: those of the language-model runs (if any) and the synthetic study."""
    names = STATS_TABLES + REPORT_TABLES if all_runs() else []
    tables = [f"{REPORTS}/tables/{name}.csv" for name in names]
    tables += [t for t in grid_report_targets() if t.endswith(".csv")]
    return tables + [t for t in synthetic_targets() if t.endswith("_summary.csv")]


def report_figure_files():
    names = report_figures() if all_runs() else []
    figures = [f"{REPORTS}/figures/{name}.svg" for name in names]
    figures += [t for t in grid_report_targets() if t.endswith(".svg")]
    return figures + [t for t in synthetic_targets() if t.endswith(".svg")]


rule report:
    input:
        runs=[f"{REPORTS}/runs.csv"] if all_runs() else [],
        config=f"{RESULTS}/config.resolved.yaml",
        tables=report_tables(),
        figures=report_figure_files(),
        provenance=f"{REPORTS}/provenance.json",
    output:
        report(f"{REPORTS}/audit.html", caption="../report/audit.rst", category="Audit",
               labels={"file": "audit.html"}),
    params:
        runs=f"--runs {REPORTS}/runs.csv" if all_runs() else "",
    log:
        f"logs/{STUDY}/report.log",
    shell:
        "python -m audit report html {params.runs} --config {input.config} --tables {input.tables} "
        "--figures {input.figures} --provenance {input.provenance} --out {output} > {log} 2>&1"
