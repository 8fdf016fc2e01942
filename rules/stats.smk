# Statistics: one rule per table, each reading only the runs table (and word-similarity pairs).
# Refresh one table without retraining: snakemake -f reports/<study>/tables/<table>.csv


rule stats_config:
    output:
        f"{RESULTS}/stats_config.yaml",
    params:
        sections=stats_sections(config),
    log:
        f"logs/{STUDY}/stats_config.log",
    run:
        with open(log[0], "w") as handle:  # a run: rule writes its own log
            try:
                write_yaml(params.sections, output[0])
            except Exception as err:
                print(f"error: {err}", file=handle)
                raise
            print(f"stats config -> {output[0]}", file=handle)


for _table in STATS_TABLES:

    rule:
        name:
            f"stats_{_table}"
        input:
            runs=f"{REPORTS}/runs.csv",
            pairs=f"{RESULTS}/wordsim_pairs.csv",
            config=f"{RESULTS}/stats_config.yaml",
        output:
            report(f"{REPORTS}/tables/{_table}.csv", caption="../report/table_stats.rst",
                   category="Statistics", labels={"table": _table}),
        params:
            table=_table,
        log:
            f"logs/{STUDY}/stats/{_table}.log",
        shell:
            "python -m audit stats --runs {input.runs} --config {input.config} "
            "--wordsim-pairs {input.pairs} --out {REPORTS}/tables --table {params.table} > {log} 2>&1"
