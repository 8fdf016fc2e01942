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


# The published record (configs/published.yaml; a `published:` section in any study): three tables
# from the papers' own numbers, never from runs, so this rule needs no runs table.
PUBLISHED_TABLES = _stats_tables.names("published")   # audit/stats/tables.py: the one list


def published_data():
    """The summary table the published tables read: the study's published.data or the packaged one
    (from the installed package, as the stats verb itself reads it)."""
    from importlib.resources import files

    section = config.get("published") or {}
    return section.get("data") or str(files("audit") / "data" / "published.csv")


rule stats_published:
    input:
        config=f"{RESULTS}/stats_config.yaml",
        data=published_data(),
    output:
        [report(f"{REPORTS}/tables/{name}.csv", caption="../captions/table_published.rst",
                category="Published evidence", labels={"table": name}) for name in PUBLISHED_TABLES],
    params:
        tables=" ".join(f"--table {name}" for name in PUBLISHED_TABLES),
    log:
        f"logs/{STUDY}/stats/published.log",
    shell:
        "python -m audit stats --config {input.config} --summaries {input.data} --out {REPORTS}/tables "
        "{params.tables} > {log} 2>&1"


for _table in STATS_TABLES:
    if _table == "evidence_claims":   # reads no runs of this study: its own rule, below
        continue

    rule:
        name:
            f"stats_{_table}"
        input:
            runs=f"{REPORTS}/runs.csv",
            pairs=f"{RESULTS}/wordsim_pairs.csv",
            config=f"{RESULTS}/stats_config.yaml",
            baselines=f"{REPORTS}/tables/baselines.csv",
            # per-run test NLL per sentence: the multi-bootstrap columns (audit/stats/multiboot.py)
            sentences=[f"{RESULTS}/sentences.npz"] if _table in ("comparisons", "claims") else [],
        output:
            report(f"{REPORTS}/tables/{_table}.csv", caption="../captions/table_stats.rst",
                   category="Statistics", labels={"table": _table}),
        params:
            table=_table,
            sentences=f"--sentences {RESULTS}/sentences.npz" if _table in ("comparisons", "claims") else "",
        log:
            f"logs/{STUDY}/stats/{_table}.log",
        shell:
            "python -m audit stats --runs {input.runs} --config {input.config} "
            "--wordsim-pairs {input.pairs} --baselines {input.baselines} --out {REPORTS}/tables "
            "--table {params.table} {params.sentences} > {log} 2>&1"


# The study's claims on the further runs tables of `evidence:` (audit/stats/sources.py): it reads
# those tables and the baselines beside them, never this study's runs, so a study that trains
# nothing (configs/pythia.yaml, a pretrained suite's runs table alone) has its claims judged too.
rule stats_evidence_claims:
    input:
        config=f"{RESULTS}/stats_config.yaml",
        baselines=f"{REPORTS}/tables/baselines.csv",
        evidence=_evidence_inputs(config),   # rerun when one of them changes
    output:
        report(f"{REPORTS}/tables/evidence_claims.csv", caption="../captions/table_stats.rst",
               category="Statistics", labels={"table": "evidence_claims"}),
    log:
        f"logs/{STUDY}/stats/evidence_claims.log",
    shell:
        "python -m audit stats --config {input.config} --baselines {input.baselines} --out {REPORTS}/tables "
        "--table evidence_claims > {log} 2>&1"


def baselines_arguments():
    """--corpus NAME=FILE of every corpus (the runs' own id files) and the runs' token limits."""
    limits = config["data"]["max_tokens"] or {}
    parts = [f"--corpus {c}={corpus_file(c)}" for c in config["data"]["corpora"]]
    parts += [f"--max-{split} {limits[split]}" for split in ("valid", "test") if limits.get(split)]
    return " ".join(parts)


# The count baselines every run must beat (audit/evaluate/baselines.py), on the runs' own corpus
# files and test tokens; the comparisons and claims read it to label uninformative verdicts. A study
# with no corpus of its own writes it empty: the runs tables it names under `evidence:` are
# guarded by the baselines beside them (audit/stats/sources.py).
rule baselines:
    input:
        [corpus_file(c) for c in config["data"]["corpora"]],
    output:
        report(f"{REPORTS}/tables/baselines.csv", caption="../captions/table_baselines.rst",
               category="Statistics", labels={"table": "baselines"}),
    params:
        arguments=baselines_arguments(),
    log:
        f"logs/{STUDY}/stats/baselines.log",
    shell:
        "python -m audit baselines {params.arguments} --out {output} > {log} 2>&1"
