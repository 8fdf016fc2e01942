# Data: verified copies of the corpora and benchmarks, then the tokenised id tensors.


rule fetch_corpus_file:
    output:
        f"{DATA}/{{corpus}}/{{split}}.txt",
    params:
        mirror=config["data"]["mirror"] or "",
    log:
        "logs/data/fetch/{corpus}/{split}.log",
    shell:
        "python -m audit fetch --dataset {wildcards.corpus} --file {wildcards.split}.txt "
        "--out {output} --mirror '{params.mirror}' > {log} 2>&1"


rule fetch_wordsim_file:
    output:
        f"{DATA}/wordsim/{{name}}.txt",
    params:
        mirror=config["data"]["mirror"] or "",
    log:
        "logs/data/fetch/wordsim/{name}.log",
    shell:
        "python -m audit fetch --dataset wordsim --file {wildcards.name}.txt "
        "--out {output} --mirror '{params.mirror}' > {log} 2>&1"


rule prepare_corpus:
    input:
        expand(f"{DATA}/{{{{corpus}}}}/{{split}}.txt", split=["train", "valid", "test"]),
    output:
        f"{DATA}/{{corpus}}/corpus.pt",
    log:
        "logs/data/prepare/{corpus}.log",
    shell:
        "python -m audit prepare --folder {DATA}/{wildcards.corpus} --out {output} > {log} 2>&1"


rule restrict_corpus:  # data.vocab_size: K most frequent training words, the rest -> <unk>
    input:
        f"{DATA}/{{corpus}}/corpus.pt",
    output:
        f"{DATA}/{{corpus}}/corpus_v{{vocab}}.pt",
    wildcard_constraints:
        vocab="[0-9]+",
    log:
        "logs/data/prepare/{corpus}_v{vocab}.log",
    shell:
        "python -m audit prepare --from-cache {input} --vocab-size {wildcards.vocab} --out {output} > {log} 2>&1"


rule prepare_corpus_bpe:  # data.tokenizer: bpe: a byte-level BPE of K tokens, trained on train.txt only
    input:
        expand(f"{DATA}/{{{{corpus}}}}/{{split}}.txt", split=["train", "valid", "test"]),
    output:
        corpus=f"{DATA}/{{corpus}}/corpus_bpe{{vocab}}.pt",
        tokenizer=f"{DATA}/{{corpus}}/corpus_bpe{{vocab}}.json",
    wildcard_constraints:
        vocab="[0-9]+",
    log:
        "logs/data/prepare/{corpus}_bpe{vocab}.log",
    shell:
        "python -m audit prepare --folder {DATA}/{wildcards.corpus} --tokenizer bpe --vocab-size {wildcards.vocab} "
        "--tokenizer-out {output.tokenizer} --out {output.corpus} > {log} 2>&1"


# A user corpus (data.files): its own files are the inputs, so editing one reruns what depends on it.
rule prepare_user_corpus:
    input:
        train=lambda wildcards: USER_FILES[wildcards.corpus]["train"],
        valid=lambda wildcards: USER_FILES[wildcards.corpus]["valid"],
        test=lambda wildcards: USER_FILES[wildcards.corpus]["test"],
    output:
        f"{RESULTS}/data/{{corpus}}/corpus.pt",
    log:
        f"logs/{STUDY}/data/prepare/{{corpus}}.log",
    shell:
        "python -m audit prepare --files {input.train:q} {input.valid:q} {input.test:q} --out {output} > {log} 2>&1"


# data.vocab_size on a user corpus, as restrict_corpus, but from the files in one step: a valid or
# test word never seen in training becomes <unk> like one past the K most frequent (the full
# cache, without a cap, refuses it: audit/data/corpus.py prepare_files)
rule restrict_user_corpus:
    input:
        train=lambda wildcards: USER_FILES[wildcards.corpus]["train"],
        valid=lambda wildcards: USER_FILES[wildcards.corpus]["valid"],
        test=lambda wildcards: USER_FILES[wildcards.corpus]["test"],
    output:
        f"{RESULTS}/data/{{corpus}}/corpus_v{{vocab}}.pt",
    wildcard_constraints:
        vocab="[0-9]+",
    log:
        f"logs/{STUDY}/data/prepare/{{corpus}}_v{{vocab}}.log",
    shell:
        "python -m audit prepare --files {input.train:q} {input.valid:q} {input.test:q} "
        "--vocab-size {wildcards.vocab} --out {output} > {log} 2>&1"


rule prepare_user_corpus_bpe:  # data.tokenizer: bpe on a user corpus, as prepare_corpus_bpe
    input:
        train=lambda wildcards: USER_FILES[wildcards.corpus]["train"],
        valid=lambda wildcards: USER_FILES[wildcards.corpus]["valid"],
        test=lambda wildcards: USER_FILES[wildcards.corpus]["test"],
    output:
        corpus=f"{RESULTS}/data/{{corpus}}/corpus_bpe{{vocab}}.pt",
        tokenizer=f"{RESULTS}/data/{{corpus}}/corpus_bpe{{vocab}}.json",
    wildcard_constraints:
        vocab="[0-9]+",
    log:
        f"logs/{STUDY}/data/prepare/{{corpus}}_bpe{{vocab}}.log",
    shell:
        "python -m audit prepare --files {input.train:q} {input.valid:q} {input.test:q} --tokenizer bpe "
        "--vocab-size {wildcards.vocab} --tokenizer-out {output.tokenizer} --out {output.corpus} > {log} 2>&1"
