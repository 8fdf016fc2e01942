# Evaluate: test perplexity, log-P spectrum and ranks, word similarity, unargmaxable tokens, the
# logit-gradient share, the hidden-size gap; then the runs table.
from audit.plan import resources as sizing  # SLURM runtime (minutes) and mem_mb from the study's size


rule evaluate:
    input:
        metrics=f"{RUN_DIR}/metrics.json",
        model=f"{RUN_DIR}/model.pt",
        corpus=corpus_input,
        wordsim=expand(f"{DATA}/wordsim/{{name}}", name=WORDSIM_FILES),
    output:
        result=f"{RUN_DIR}/eval.json",
        spectrum=f"{RUN_DIR}/spectrum.npz",
        sentences=f"{RUN_DIR}/sentences.npz",  # test NLL per line, for the multi-bootstrap
        pairs=f"{RUN_DIR}/wordsim_pairs.csv",
        topk=f"{RUN_DIR}/topk.csv",
        argmax=f"{RUN_DIR}/argmax_tokens.csv",  # unargmaxable / unresolved tokens, training counts
    params:
        run_dir=RUN_DIR,
        wordsim_dir=f"{DATA}/wordsim",
        options=evaluate_options,  # a change of evaluate options reruns this rule, not train
    threads: train_threads
    retries: JOB_RETRIES  # out of GPU memory: rerun on a GPU of its own (train_gpus), resuming
    resources:
        gpu=train_gpus,
        runtime=lambda wc: sizing.evaluate_minutes(job_settings(wc)),
        mem_mb=lambda wc: sizing.evaluate_mem_mb(job_settings(wc)),
    log:
        f"logs/{STUDY}/evaluate/{{corpus}}/{{head}}/{{seed}}.log",
    benchmark:  # wall s, peak memory, CPU s of the job; recorded in provenance.json
        f"{RUN_DIR}/benchmark_evaluate.tsv"
    shell:
        "AUDIT_GPU_SLOTS={resources.gpu} python -m audit evaluate --run-dir {params.run_dir} --corpus {input.corpus} "
        "--wordsim-dir {params.wordsim_dir} --options {params.options:q} > {log} 2>&1"


rule runs_table:
    input:
        metrics=run_files("metrics.json"),
        results=run_files("eval.json"),
        pairs=run_files("wordsim_pairs.csv"),
        sentences=run_files("sentences.npz"),
    output:
        runs=f"{REPORTS}/runs.csv",
        pairs=f"{RESULTS}/wordsim_pairs.csv",
        sentences=f"{RESULTS}/sentences.npz",
    params:
        run_dirs=run_dirs_param(),
        # how the seeds came, recorded in the table for a study that reads it as evidence
        design=_schedule.design_text(config),
    log:
        f"logs/{STUDY}/runs_table.log",
    shell:
        "python -m audit collect --runs {params.run_dirs} --out {output.runs} "
        "--pairs-out {output.pairs} --sentences-out {output.sentences} --design {params.design:q} > {log} 2>&1"
