# Train: one job per (corpus, head, seed). A killed job resumes from its last epoch checkpoint.
from audit.plan import resources as sizing  # SLURM runtime (minutes) and mem_mb from the study's size


rule train:
    input:
        corpus=corpus_input,
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
