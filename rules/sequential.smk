# Group-sequential seeds (a `seeds: {initial, step, max}` mapping; docs/statistics.md "Sequential
# design", audit/stats/sequential/schedule.py). Stage 1 trains seeds first..first+initial-1 of every arm; the
# checkpoint `interim` analyses stage k (python -m audit sequential interim) and records, per arm,
# the seeds it gets at stage k + 1: the next `step` seeds when a comparison still running uses it,
# none otherwise. Stage k + 1's runs come from that record, so Snakemake re-plans after each
# analysis, and a rerun of the same command continues from the last recorded stage (finished runs
# are outputs already there; the analyses are recomputed from the same runs, deterministically).
# all_runs() (rules/common.smk) follows the stages to the last one. Defines nothing for a seeds list.
import json

SEQ_STAGE = RESULTS + "/sequential/stage{stage}.json"
SEQ_DECISIONS = RESULTS + "/sequential/decisions.json"

if SEQUENTIAL:
    SEQ_SIZES = _schedule.stage_sizes(config["seeds"])
    # what the analyses read from the study; a change reruns them (and only such a change)
    SEQ_DESIGN = json.dumps({k: config[k] for k in ("study", "seeds", "comparisons", "stats")}, sort_keys=True)


def _stage_record(stage):
    """The record of interim analysis `stage`; raises Snakemake's IncompleteCheckpointException
    (inside an input function: wait for that checkpoint) while it is not made yet."""
    with open(checkpoints.interim.get(stage=stage).output[0]) as handle:
        return json.load(handle)


def stage_runs(stage):
    """(corpus, head, seed) of stage `stage` (1-based): every arm's first `initial` seeds at stage 1,
    then the seeds the previous analysis gave each arm."""
    if stage == 1:
        counts = {}
    else:
        counts = {(a["corpus"], a["head"]): a["next"] for a in _stage_record(stage - 1)["arms"]}
    return [
        (corpus, entry["name"], seed)
        for corpus in config["data"]["corpora"]
        for entry in config["heads"]
        for seed in _schedule.seeds_for(config["seeds"], counts.get((corpus, entry["name"]), SEQ_SIZES[0]))
    ]


def stage_dirs(stage):
    return [RUN_DIR.format(corpus=c, head=h, seed=s) for c, h, s in stage_runs(stage)]


def last_stage():
    """The first stage whose analysis left no comparison running (the last planned one at most)."""
    for stage in range(1, len(SEQ_SIZES) + 1):
        if _stage_record(stage)["done"]:
            return stage
    raise AuditError(f"{SEQ_STAGE.format(stage=len(SEQ_SIZES))}: the last stage is not marked done")


def sequential_runs():
    """all_runs() of a sequential study: the runs of its last stage."""
    return stage_runs(last_stage())


def _stage_files(name):
    return lambda wildcards: [f"{d}/{name}" for d in stage_dirs(int(wildcards.stage))]


def _previous(wildcards):
    stage = int(wildcards.stage)
    return [SEQ_STAGE.format(stage=stage - 1)] if stage > 1 else []


if SEQUENTIAL:

    checkpoint interim:
        input:
            metrics=_stage_files("metrics.json"),
            results=_stage_files("eval.json"),
            pairs=_stage_files("wordsim_pairs.csv"),
            previous=_previous,
        output:
            SEQ_STAGE,
        params:
            design=SEQ_DESIGN,
            run_dirs=lambda wildcards: stage_dirs(int(wildcards.stage)),
            previous=lambda wildcards: " ".join(["--previous"] + _previous(wildcards)) if _previous(wildcards) else "",
        wildcard_constraints:
            stage="[1-9][0-9]*",
        log:
            f"logs/{STUDY}/sequential/stage{{stage}}.log",
        shell:
            "python -m audit sequential interim --design {params.design:q} --stage {wildcards.stage} "
            "--run-dirs {params.run_dirs} {params.previous} --out {output} > {log} 2>&1"

    rule sequential_decisions:
        input:
            lambda wildcards: SEQ_STAGE.format(stage=last_stage()),
        output:
            SEQ_DECISIONS,
        log:
            f"logs/{STUDY}/sequential/decisions.log",
        shell:
            "python -m audit sequential final --stage-file {input} --out {output} > {log} 2>&1"

    # seconds of work on small JSON files: on a cluster they run on the submitting host, so an
    # interim decision never waits in the queue behind the training jobs it schedules
    localrules: interim, sequential_decisions
