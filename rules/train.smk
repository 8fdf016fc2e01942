# Train: one job per (corpus, head, seed). A killed job resumes from its last epoch checkpoint.
# With train.seeds_per_process = k > 1, each group of k seeds of an arm first trains in one job
# (rule train_group, audit/train/group.py); each run's train job then resumes its finished
# checkpoint and writes the run's files with the same numbers.
import json
import types

from audit.plan import resources as sizing  # SLURM runtime (minutes) and mem_mb from the study's size


def group_done(wildcards):
    """The marker of the group that trains this run ([] without groups)."""
    if SEEDS_PER_PROCESS == 1:
        return []
    group = _groups.group_of(int(wildcards.seed), list(config["seeds"]), SEEDS_PER_PROCESS)
    if len(group) == 1:
        return []   # a seed left alone trains in its own job, as without groups
    return f"{RESULTS}/runs/{wildcards.corpus}/{wildcards.head}/group-{_groups.label(group)}.done"


def group_members(wildcards):
    """The runs of a group job, each as a run's wildcards (corpus, head, seed)."""
    return [types.SimpleNamespace(corpus=wildcards.corpus, head=wildcards.head, seed=str(seed))
            for seed in _groups.seeds_of(wildcards.seeds)]


def group_settings(wildcards):
    """The group job's params: its runs' settings (as the train rule's), a JSON list."""
    return json.dumps([json.loads(train_settings(m)) for m in group_members(wildcards)])


def group_dirs(wildcards):
    return " ".join(RUN_DIR.format(**vars(m)) for m in group_members(wildcards))


def group_gpus(wildcards, attempt=1):
    """A slot per run of the group on its one GPU (train.runs_per_gpu >= the group's size: the
    memory plan holds that many runs of an arm); a retry, every slot of a GPU (train_gpus)."""
    first = group_members(wildcards)[0]
    return max(len(group_members(wildcards)) * train_gpus(first), train_gpus(first, attempt))


if SEEDS_PER_PROCESS > 1:

    rule train_group:
        input:
            corpus=corpus_input,
        output:
            done=touch(f"{RESULTS}/runs/{{corpus}}/{{head}}/group-{{seeds}}.done"),
        wildcard_constraints:
            seeds="[0-9]+(-[0-9]+)*",
        params:
            settings=group_settings,
            run_dirs=group_dirs,
        threads: lambda wc: train_threads(group_members(wc)[0])
        priority: lambda wc: round(sum(sizing.train_seconds(job_settings(m)) for m in group_members(wc)), 1)
        retries: JOB_RETRIES
        resources:
            # the group's runs share one process and one GPU: k runs' time and memory, at most
            gpu=group_gpus,
            runtime=lambda wc: sum(sizing.train_minutes(job_settings(m)) for m in group_members(wc)),
            mem_mb=lambda wc: sum(sizing.train_mem_mb(job_settings(m)) for m in group_members(wc)),
        log:
            f"logs/{STUDY}/train/{{corpus}}/{{head}}/group-{{seeds}}.log",
        shell:
            "AUDIT_GPU_SLOTS={resources.gpu} python -m audit train --settings {params.settings:q} "
            "--corpus {input.corpus} --out-dir {params.run_dirs} > {log} 2>&1"


rule train:
    input:
        corpus=corpus_input,
        group=group_done,
    output:
        metrics=f"{RUN_DIR}/metrics.json",
        model=f"{RUN_DIR}/model.pt",
    params:
        settings=train_settings,
        run_dir=RUN_DIR,
    threads: train_threads
    # longest first: the runs of a look end together, so fewer cores idle before the next look
    priority: lambda wc: round(sizing.train_seconds(job_settings(wc)), 1)
    retries: JOB_RETRIES  # out of GPU memory: rerun on a GPU of its own (train_gpus), resuming
    resources:
        gpu=train_gpus,
        runtime=lambda wc: sizing.train_minutes(job_settings(wc)),
        mem_mb=lambda wc: sizing.train_mem_mb(job_settings(wc)),
    log:
        f"logs/{STUDY}/train/{{corpus}}/{{head}}/{{seed}}.log",
    benchmark:  # wall s, peak memory, CPU s of the job (of its last attempt, if resumed); provenance.json
        f"{RUN_DIR}/benchmark_train.tsv"
    shell:
        "AUDIT_GPU_SLOTS={resources.gpu} python -m audit train --settings {params.settings:q} --corpus {input.corpus} "
        "--out-dir {params.run_dir} > {log} 2>&1"
