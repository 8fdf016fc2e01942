# Train: one job per (corpus, head, seed). A killed job resumes from its last epoch checkpoint.


rule train:
    input:
        corpus=f"{DATA}/{{corpus}}/corpus.pt",
    output:
        metrics=f"{RUN_DIR}/metrics.json",
        model=f"{RUN_DIR}/model.pt",
    params:
        settings=train_settings,
        run_dir=RUN_DIR,
    threads: train_threads
    resources:
        gpu=train_gpus,
    log:
        f"logs/{STUDY}/train/{{corpus}}/{{head}}/{{seed}}.log",
    shell:
        "python -m audit train --settings {params.settings:q} --corpus {input.corpus} "
        "--out-dir {params.run_dir} > {log} 2>&1"
