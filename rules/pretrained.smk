# A pretrained multi-seed suite (issue 55; docs/pretrained.md): one job per (model, seed, checkpoint),
# then the suite's tables. Only wiring: the logic is audit/pretrained/.
from audit.pretrained import plan as _pretrained_plan, suite as _suite

PRETRAINED = _suite.section_of(config)
PRETRAINED_DIR = RESULTS + "/pretrained/{model}/{seed}/{revision}"
PRETRAINED_TABLES = REPORTS + "/pretrained"


def pretrained_text():
    """The text the suite is evaluated on: a built-in corpus's test split, or the user's file."""
    spec = PRETRAINED["text"]
    return f"{DATA}/{spec['corpus']}/test.txt" if spec.get("corpus") else os.path.join(workflow.basedir, spec["file"])


def pretrained_targets():
    return [f"{PRETRAINED_TABLES}/runs.csv"] if PRETRAINED else []


def _pretrained_job(wildcards):
    return _suite.Job(wildcards.model, int(wildcards.seed), wildcards.revision)


def _pretrained_gpus(wildcards, attempt=1):
    return job_gpu_slots(PRETRAINED["device"], config["train"]["runs_per_gpu"], attempt, workflow.local_exec)


def _pretrained_cost(wildcards, attempt=1):
    return _pretrained_plan.job_cost(PRETRAINED, config["evaluate"], _pretrained_job(wildcards),
                                     _pretrained_plan.text_tokens(PRETRAINED, None),
                                     _pretrained_gpus(wildcards, attempt) > 0)


if PRETRAINED:
    try:   # what the schema cannot say (audit/pretrained/suite.py check): one line, before any job
        _suite.check(PRETRAINED, ", ".join(CONFIG_FILES))
    except AuditError as err:
        sys.exit(f"error: {err}")
    print(_pretrained_plan.render(config), file=sys.stderr)   # every job's cost, before any runs

    rule pretrained_evaluate:
        input:
            text=pretrained_text(),
            wordsim=expand(f"{DATA}/wordsim/{{name}}", name=WORDSIM_FILES) if PRETRAINED["wordsim"] else [],
        output:
            result=f"{PRETRAINED_DIR}/eval.json",
            spectrum=f"{PRETRAINED_DIR}/spectrum.npz",
            sentences=f"{PRETRAINED_DIR}/sentences.npz",
            pairs=f"{PRETRAINED_DIR}/wordsim_pairs.csv",
            argmax=f"{PRETRAINED_DIR}/argmax_tokens.csv",
        wildcard_constraints:
            model="|".join(m["name"] for m in PRETRAINED["models"]),
            revision="|".join(PRETRAINED["checkpoints"]),
        params:
            # what this job depends on (audit/pretrained/suite.py job_view): a change reruns it, a new seed does not
            section=lambda wc: settings_text(_suite.job_view(PRETRAINED, _pretrained_job(wc))),
            options=settings_text(config["evaluate"]),
            wordsim_dir=f"--wordsim-dir {DATA}/wordsim" if PRETRAINED["wordsim"] else "",
            out=lambda wc: PRETRAINED_DIR.format(model=wc.model, seed=wc.seed, revision=wc.revision),
        threads: PRETRAINED["threads"]
        retries: JOB_RETRIES
        resources:
            gpu=_pretrained_gpus,
            runtime=lambda wc, attempt: max(1, int(_pretrained_cost(wc, attempt)["seconds"] / 60) + 1),
            mem_mb=lambda wc, attempt: _pretrained_cost(wc, attempt)["mem_mb"],
        log:
            f"logs/{STUDY}/pretrained/{{model}}/{{seed}}/{{revision}}.log",
        benchmark:
            f"{PRETRAINED_DIR}/benchmark.tsv"
        shell:
            "OMP_NUM_THREADS={threads} AUDIT_GPU_SLOTS={resources.gpu} python -m audit pretrained evaluate --section {params.section:q} "
            "--options {params.options:q} --model {wildcards.model} --seed {wildcards.seed} "
            "--revision {wildcards.revision} --text {input.text:q} {params.wordsim_dir} "
            "--base {workflow.basedir:q} --out {params.out} > {log} 2>&1"

    rule pretrained_collect:
        input:
            [PRETRAINED_DIR.format(model=j.model, seed=j.seed, revision=j.revision) + "/eval.json"
             for j in _suite.jobs(PRETRAINED)],
        output:
            runs=f"{PRETRAINED_TABLES}/runs.csv",
            checkpoints=f"{PRETRAINED_TABLES}/checkpoints.csv",
            sentences=f"{PRETRAINED_TABLES}/sentences.npz",
            pairs=f"{PRETRAINED_TABLES}/wordsim_pairs.csv",
            baselines=f"{PRETRAINED_TABLES}/tables/baselines.csv",   # the guard's unigram, beside the runs table
        params:
            section=lambda wc: settings_text(PRETRAINED),   # a function: the repo templates hold braces
            corpus=PRETRAINED["text"].get("corpus") or "text",
        log:
            f"logs/{STUDY}/pretrained/collect.log",
        shell:
            "python -m audit pretrained collect --section {params.section:q} --results {RESULTS} "
            "--corpus {params.corpus} --out {PRETRAINED_TABLES} > {log} 2>&1"
