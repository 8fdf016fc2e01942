# Validation of the study config and the helpers that name every file of the DAG.
import functools
import os
import sys

from snakemake.utils import update_config

from audit.config import check_study, is_bpe, run_settings, settings_text, stats_sections, write_yaml
from audit.config import train_settings as _train_settings
from audit.data.user import builtin_corpora as _builtin_corpora, user_files as _user_files
from audit.plan import groups as _groups
from audit.plan.memory import check_plan as check_memory_plan
from audit.device import job_gpu_slots, job_gpus, pool_size
from audit.plan.datafiles import wordsim_files as _wordsim_files
from audit import yamlfile
from audit.errors import AuditError
from audit.report import registry as _report_registry
from audit.stats import tables as _stats_tables  # noqa: E402  (the statistics tables: audit/stats/tables.py)
from audit.stats.sequential import schedule as _schedule

# Rules call `python -m audit ...`: make `python` the interpreter running Snakemake (e.g. the one
# in .venv when started as .venv/bin/snakemake), not whichever python comes first on PATH.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

CONFIG_FILES = [str(f) for f in workflow.overwrite_configfiles or []]
if not CONFIG_FILES:  # the default study, with any --config key=value overrides on top
    CONFIG_FILES = ["configs/default.yaml"]
    _overrides = dict(config)
    config.clear()
    try:
        config.update(yamlfile.load(os.path.join(workflow.basedir, CONFIG_FILES[0])))
    except AuditError as err:
        sys.exit(f"error: {err}")
    update_config(config, _overrides)

try:  # one line naming the file and key, instead of a traceback
    for _path in workflow.overwrite_configfiles or []:
        yamlfile.load(_path)   # Snakemake kept the last of a key written twice: refused here
    # a user corpus's relative paths (data.files) resolve against the workflow directory
    _checked = check_study(config, ", ".join(CONFIG_FILES), base=workflow.basedir)
    # GPU memory planned before any job starts: runs_per_gpu jobs of each arm must fit one GPU
    check_memory_plan(_checked, ", ".join(CONFIG_FILES))
except AuditError as err:
    sys.exit(f"error: {err}")
config.clear()
config.update(_checked)

STUDY = config["study"]
RESULTS = f"results/{STUDY}"  # run artefacts (ignored by git)
REPORTS = f"reports/{STUDY}"  # the audit and its tables
DATA = "results/data"  # verified copies of the data, shared by all studies
RUN_DIR = RESULTS + "/runs/{corpus}/{head}/{seed}"
# the id tensors the runs train on: the full vocabulary, or its K most frequent words (data.vocab_size),
# or a byte-level BPE of K subword tokens (data.tokenizer: bpe; its tokenizer JSON lies beside it)
CORPUS_FILE = DATA + ("/{corpus}/corpus.pt" if config["data"]["vocab_size"] is None
                      else f"/{{corpus}}/corpus_bpe{config['data']['vocab_size']}.pt"
                      if is_bpe(config)
                      else f"/{{corpus}}/corpus_v{config['data']['vocab_size']}.pt")
# a user corpus (data.files): its files as the study gives them, so its cache is the study's own
USER_FILES = _user_files(config)  # {corpus: {split: absolute path}}
USER_CORPUS_FILE = CORPUS_FILE.replace(DATA, RESULTS + "/data", 1)


def corpus_file(corpus):
    """The id tensors the runs on ``corpus`` train on: a built-in corpus's (shared by all studies)
    or a user corpus's (under the study's results)."""
    return (USER_CORPUS_FILE if corpus in USER_FILES else CORPUS_FILE).format(corpus=corpus)


def corpus_input(wildcards):
    return corpus_file(wildcards.corpus)

# every table the stats verb writes from runs: the report registry's stats entries, which must be
# exactly the stats registry's (audit/stats/tables.py; tests/stats/test_tables.py checks it)
STATS_TABLES = [e.name for e in _report_registry.entries("table", "stats")]
WORDSIM_FILES = _wordsim_files()  # sources.yaml's wordsim: what `python -m audit data-files` lists


wildcard_constraints:
    corpus="|".join(_builtin_corpora() + list(USER_FILES)),  # names are [A-Za-z0-9_-]+ (the schema)
    split="train|valid|test",
    head="[A-Za-z0-9_.+-]+",
    seed="[0-9]+",


# `seeds:` a list is the fixed design (the runs are known when Snakemake parses); a mapping
# {initial, step, max} the group-sequential one (rules/sequential.smk), whose runs are known only
# as its interim analyses (checkpoints) decide them.
SEQUENTIAL = _schedule.is_sequential(config)

# train.seeds_per_process > 1: each group of an arm's seeds trains in one job (rule train_group)
try:
    SEEDS_PER_PROCESS = _groups.check(config)
except AuditError as err:
    sys.exit(f"error: {', '.join(CONFIG_FILES)}: {err}")


def study_has_runs():
    """Whether the study trains language models (a corpus and a head); known at parse time."""
    return bool(config["data"]["corpora"] and config["heads"])


def _evidence_inputs(config):
    """The runs tables of `evidence:`, each with the baselines and the per-sentence NLL beside it
    when there (the paths of audit.stats.sources.sibling_baselines and sibling_sentences, spelled
    here so parsing imports no pandas)."""
    paths = []
    for entry in config["evidence"]:
        folder = os.path.dirname(entry["runs"])
        siblings = [os.path.join(folder, "tables", "baselines.csv"), os.path.join(folder, "sentences.npz")]
        paths += [entry["runs"]] + [path for path in siblings if os.path.isfile(path)]
    return paths


def all_runs():
    """(corpus, head, seed) of every run of the study.

    Fixed design: every corpus x arm x seed of the list. Sequential design: the runs of the last
    stage (rules/sequential.smk), which exist only after the interim analyses: call it from an
    input or params function, where the checkpoints make Snakemake wait for them, never while
    the Snakefile is parsed (use study_has_runs() there)."""
    if SEQUENTIAL:
        return sequential_runs()
    return [
        (corpus, entry["name"], seed)
        for corpus in config["data"]["corpora"]
        for entry in config["heads"]
        for seed in config["seeds"]
    ]


def run_dirs():
    return [RUN_DIR.format(corpus=c, head=h, seed=s) for c, h, s in all_runs()]


def run_files(name):
    """<run dir>/<name> of every run as a rule input: a list (fixed design), or an input function
    that resolves the runs through the interim checkpoints (sequential design)."""
    if SEQUENTIAL:
        return lambda wildcards: [f"{d}/{name}" for d in run_dirs()]
    return [f"{d}/{name}" for d in run_dirs()]


def run_dirs_param():
    """run_dirs() as a rule's params: the list, or a function (sequential design; the rule's input
    must then hold run_files(...) so that the checkpoints are its inputs too)."""
    return (lambda wildcards: run_dirs()) if SEQUENTIAL else run_dirs()


def report_entry_inputs(entry):
    """The input: of a registry entry's rule (rules/report.smk): per-run inputs through run_files."""
    paths = entry.input_paths(REPORTS, RESULTS, [] if SEQUENTIAL else run_dirs(), config)
    if SEQUENTIAL:
        for key in paths:
            if _report_registry.INPUTS[key].per_run:
                paths[key] = run_files(_report_registry.INPUTS[key].path)
    return paths


def report_entry_arguments(entry):
    """The CLI arguments of a registry entry's rule: text, or a function when they list the runs
    of a sequential study."""
    if SEQUENTIAL and entry.per_run:
        return lambda wildcards: entry.arguments(config, REPORTS, RESULTS, run_dirs())
    return entry.arguments(config, REPORTS, RESULTS, [] if SEQUENTIAL else run_dirs())


@functools.lru_cache(maxsize=None)
def _run_settings(corpus, head, seed):
    """run_settings of one run, computed once per Snakemake process: each train and evaluate job
    asks for it up to six times (params, threads, gpu, runtime, mem_mb), each a deep copy of
    the study's sections (issue 21 counted it in the Snakemake process's ~700 CPU-s; not measured
    apart since). Callers must not mutate it."""
    return run_settings(config, corpus, head, int(seed))


def job_settings(wildcards):
    return _run_settings(wildcards.corpus, wildcards.head, int(wildcards.seed))


def train_settings(wildcards):
    """The train rule's params: the run settings less the evaluate options, so that a change of
    an `evaluate:` option reruns only the evaluate jobs (evaluate_options)."""
    return settings_text(_train_settings(job_settings(wildcards)))


def evaluate_options(wildcards):
    """The evaluate rule's params: the run's `evaluate:` options as canonical JSON."""
    return settings_text(job_settings(wildcards)["evaluate"])


def train_threads(wildcards):
    return job_settings(wildcards)["train"]["threads"]


def train_gpus(wildcards, attempt=1):
    """GPU slots of a run's job: 1 for `cuda` (decided from the config, so a plan made on a
    CPU-only login node still requests GPUs), for `auto` 1 when this host has a GPU, else 0.
    A retry (`retries:`, e.g. after running out of GPU memory) holds all train.runs_per_gpu
    slots of one GPU when Snakemake runs the jobs itself; the job reads the count from
    AUDIT_GPU_SLOTS (audit/device.py)."""
    return job_gpu_slots(job_settings(wildcards)["train"]["device"], config["train"]["runs_per_gpu"],
                         attempt, workflow.local_exec)


# Snakemake reruns a failed training or evaluation job this many times (train.oom_retries)
JOB_RETRIES = config["train"]["oom_retries"]


# GPUs: `--resources gpu=G` means G GPUs. Each GPU job holds one slot, so the pool becomes
# G x train.runs_per_gpu slots; the job itself picks a device (audit/device.py: Snakemake hands
# out counts, not device ids). Jobs inherit these variables from this process (not via params:
# a change of G must not make finished runs look out of date).
RUNS_PER_GPU = config["train"]["runs_per_gpu"]
os.environ["AUDIT_RUNS_PER_GPU"] = str(RUNS_PER_GPU)
# torch numbers GPUs fastest first by default, nvidia-smi by PCI bus: one order for both, so the
# free memory `runs_per_gpu: auto` reads is that of the GPU the slot names (mixed-GPU hosts)
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
if "gpu" in workflow.global_resources and isinstance(workflow.global_resources["gpu"].value, int):
    _gpus = workflow.global_resources["gpu"].value
    os.environ["AUDIT_GPU_COUNT"] = str(_gpus)
    workflow.global_resources["gpu"] = pool_size(_gpus, RUNS_PER_GPU)
    print(f"GPU pool: gpu={_gpus} GPU(s) x {RUNS_PER_GPU} run(s) per GPU = "
          f"{pool_size(_gpus, RUNS_PER_GPU)} concurrent GPU jobs", file=sys.stderr)
