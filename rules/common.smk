# Validation of the study config and the helpers that name every file of the DAG.
import os
import sys

import yaml
from snakemake.utils import update_config

from audit.config import check_study, run_settings, settings_json, stats_sections, write_yaml
from audit.device import job_gpus, pool_size
from audit.errors import AuditError
from audit.report import registry as _report_registry

# Rules call `python -m audit ...`: make `python` the interpreter running Snakemake (e.g. the one
# in .venv when started as .venv/bin/snakemake), not whichever python comes first on PATH.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

CONFIG_FILES = [str(f) for f in workflow.overwrite_configfiles or []]
if not CONFIG_FILES:  # the default study, with any --config key=value overrides on top
    CONFIG_FILES = ["configs/default.yaml"]
    _overrides = dict(config)
    config.clear()
    with open(os.path.join(workflow.basedir, CONFIG_FILES[0])) as _handle:
        config.update(yaml.safe_load(_handle))
    update_config(config, _overrides)

try:  # one line naming the file and key, instead of a traceback
    _checked = check_study(config, ", ".join(CONFIG_FILES))
except AuditError as err:
    sys.exit(f"error: {err}")
config.clear()
config.update(_checked)

STUDY = config["study"]
RESULTS = f"results/{STUDY}"  # run artefacts (ignored by git)
REPORTS = f"reports/{STUDY}"  # the audit and its tables
DATA = "results/data"  # verified copies of the data, shared by all studies
RUN_DIR = RESULTS + "/runs/{corpus}/{head}/{seed}"
STATS_TABLES = [e.name for e in _report_registry.entries("table", "stats")]  # audit/report/registry.py
WORDSIM_FILES = [
    "EN-MC-30.txt", "EN-MEN-TR-3k.txt", "EN-MTurk-287.txt", "EN-MTurk-771.txt",
    "EN-RG-65.txt", "EN-RW-STANFORD.txt", "EN-SIMLEX-999.txt", "EN-SimVerb-3500.txt",
    "EN-VERB-143.txt", "EN-WS-353-ALL.txt", "EN-WS-353-REL.txt", "EN-WS-353-SIM.txt",
    "EN-YP-130.txt",
]


wildcard_constraints:
    corpus="ptb|wikitext-2",
    split="train|valid|test",
    head="[A-Za-z0-9_.+-]+",
    seed="[0-9]+",


def all_runs():
    """(corpus, head, seed) of every run of the study."""
    return [
        (corpus, entry["name"], seed)
        for corpus in config["data"]["corpora"]
        for entry in config["heads"]
        for seed in config["seeds"]
    ]


def run_dirs():
    return [RUN_DIR.format(corpus=c, head=h, seed=s) for c, h, s in all_runs()]


def train_settings(wildcards):
    return settings_json(config, wildcards.corpus, wildcards.head, int(wildcards.seed))


def train_threads(wildcards):
    return run_settings(config, wildcards.corpus, wildcards.head, int(wildcards.seed))["train"]["threads"]


def train_gpus(wildcards):
    """GPU slots of a run's job: 1 for `cuda` (decided from the config, so a plan made on a
    CPU-only login node still requests GPUs), for `auto` 1 when this host has a GPU, else 0."""
    return job_gpus(run_settings(config, wildcards.corpus, wildcards.head, int(wildcards.seed))["train"]["device"])


# GPUs: `--resources gpu=G` means G GPUs. Each GPU job holds one slot, so the pool becomes
# G x train.runs_per_gpu slots; the job itself picks a device (audit/device.py: Snakemake hands
# out counts, not device ids). Jobs inherit these variables from this process (not via params:
# a change of G must not make finished runs look out of date).
RUNS_PER_GPU = config["train"]["runs_per_gpu"]
os.environ["AUDIT_RUNS_PER_GPU"] = str(RUNS_PER_GPU)
if "gpu" in workflow.global_resources and isinstance(workflow.global_resources["gpu"].value, int):
    _gpus = workflow.global_resources["gpu"].value
    os.environ["AUDIT_GPU_COUNT"] = str(_gpus)
    workflow.global_resources["gpu"] = pool_size(_gpus, RUNS_PER_GPU)
    print(f"GPU pool: gpu={_gpus} GPU(s) x {RUNS_PER_GPU} run(s) per GPU = "
          f"{pool_size(_gpus, RUNS_PER_GPU)} concurrent GPU jobs", file=sys.stderr)
