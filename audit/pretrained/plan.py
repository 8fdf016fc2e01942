"""What each job of a pretrained suite costs, from the config alone (no checkpoint, no torch).

Snakemake asks this for every job's ``runtime`` and ``mem_mb`` (rules/pretrained.smk), and
``python -m audit pretrained plan CONFIG`` prints the table, so a suite is priced before any
checkpoint is fetched: the section states each model's parameters, d, layers and V.

A job's work (``audit.pretrained.measure``), in floating-point operations:

- forward passes: 2 x params per token of every window plus 4 x layers x d x window per token
  for attention, over ceil((N - window) / stride) + 1 windows, once over the text and once
  more over the first ``contexts`` positions (the hidden gap's double-centred rows);
- per scored position: the log-softmax and the gradient share's projection, 8 V (d + 1);
- the log-P spectra: two row Grams, contexts^2 V each, and their eigensolves, 10 contexts^3;
- the head's spectrum: 2 V d^2; the argmax test where asked (``audit.plan.argmaxcost``: the
  cheap tiers and ``lp_budget`` bounded LPs per box, two boxes, on the CPU even in a GPU job).

N, the text's tokens, is its UTF-8 bytes over ``BYTES_PER_TOKEN``, from the file when it is
there and from ``TEXT_BYTES`` (the pinned test files' sizes) for a built-in corpus not fetched
yet. The rates are stated assumptions, not measurements of a suite: ``CPU_FLOPS`` per thread
(a 1,024^2 float32 matmul ran 19 GFLOP/s on one thread of this project's 2-core machine at
load 6; a transformer's smaller products reach about half) and ``GPU_FLOPS`` (a third of an
H100's float32 rate), plus ``JOB_SECONDS`` of start-up (imports, loading).
"""

from __future__ import annotations

import math
from pathlib import Path

from audit.plan.argmaxcost import ARGMAX_BOXES, argmax_cheap_seconds, argmax_lp_seconds
from audit.pretrained import suite

BYTES_PER_TOKEN = 4.0          # GPT-2/GPT-NeoX BPE on English text: about four bytes a token
TEXT_BYTES = {"ptb": 449_945, "wikitext-2": 1_256_449, "wikitext-103": 1_256_449}   # test.txt (SHA-256 pinned)
CPU_FLOPS = 1.0e10             # per thread
GPU_FLOPS = 2.0e13
JOB_SECONDS = 30.0
MB = 2 ** 20
CHECKPOINT_BYTES_PER_PARAM = 2   # Pythia's revisions are stored in float16 (loaded here as float32)


def text_tokens(section: dict, path: str | Path | None) -> int:
    """The text's planned tokens (module docstring), at most ``max_lines`` lines' worth."""
    spec = section["text"]
    if path is not None and Path(path).is_file():
        size = Path(path).stat().st_size
        lines = sum(1 for _ in open(path, "rb"))
    else:
        size, lines = TEXT_BYTES.get(spec.get("corpus"), 1_000_000), None
    if spec["max_lines"] is not None and lines:
        size = size * min(1.0, spec["max_lines"] / lines)
    elif spec["max_lines"] is not None:
        size = min(size, spec["max_lines"] * 120)        # ~120 bytes a line (PTB 118, WikiText-2 ~290)
    return max(2, int(size / BYTES_PER_TOKEN))


def flops(section: dict, model: dict, tokens: int) -> float:
    """Floating-point operations of one job but the argmax test (module docstring)."""
    window, stride, contexts = section["window"], section["stride"], min(section["contexts"], tokens - 1)
    d, V = model["d"], model["vocab"]
    windows = math.ceil(max(0, tokens - window) / stride) + 1
    extra = math.ceil(max(0, contexts - window) / stride) + 1
    per_token = 2 * model["params"] + 4 * model["layers"] * d * window
    forward = (windows + extra) * min(window, tokens) * per_token
    return forward + 8 * tokens * V * (d + 1) + 2 * (contexts ** 2 * V + 10 * contexts ** 3) + 2 * V * d * d


def argmax_seconds(section: dict, options: dict, model: dict) -> float:
    """CPU seconds of the argmax test of one checkpoint at most: both boxes' cheap tiers and LPs."""
    V, d = model["vocab"], model["d"]
    return ARGMAX_BOXES * (argmax_cheap_seconds(V, d) + options["argmax"]["lp_budget"] * argmax_lp_seconds(V, d))


def job_cost(section: dict, options: dict, job: suite.Job, tokens: int, gpu: bool) -> dict:
    """{"seconds", "mem_mb"} of one job: planned wall seconds on ``section["threads"]`` CPU
    threads or one GPU, and peak host memory (weights twice, three V-wide float32 blocks of a
    window, the buffered float32 and float64 log-P rows, 1 GiB for the libraries)."""
    model = suite.model_entry(section, job.model)
    rate = GPU_FLOPS if gpu else CPU_FLOPS * section["threads"]
    seconds = JOB_SECONDS + flops(section, model, tokens) / rate
    if section["argmax"] == "all" or (section["argmax"] == "final" and job.revision == suite.final_revision(section)):
        seconds += argmax_seconds(section, options, model)
    V = model["vocab"]
    mem = 8 * model["params"] + 12 * section["window"] * V + 12 * min(section["contexts"], tokens) * V + 1024 * MB
    return {"seconds": seconds, "mem_mb": int(math.ceil(mem / MB))}


def render(config: dict, text_path: str | Path | None = None) -> str:
    """The plan of every model of the suite: jobs, planned minutes per job on the CPU and on a
    GPU (an argmax checkpoint apart), and the totals."""
    section, options = suite.section_of(config), config["evaluate"]
    if section is None:
        return "no pretrained: section in this study"
    tokens = text_tokens(section, text_path)
    lines = [f"suite {section['suite']}: {len(suite.jobs(section))} jobs, text ~{tokens:,} tokens "
             f"(window {section['window']}, stride {section['stride']}, contexts {section['contexts']})",
             f"{'model':<16}{'jobs':>6}{'cpu min/job':>13}{'gpu min/job':>13}{'argmax cpu min':>16}"]
    total = {False: 0.0, True: 0.0}
    for model in section["models"]:
        mine = [j for j in suite.jobs(section) if j.model == model["name"]]
        plain = suite.Job(model["name"], mine[0].seed, "step0")
        cost = {g: job_cost(section, options, plain, tokens, g)["seconds"] for g in (False, True)}
        for g in total:
            total[g] += sum(job_cost(section, options, j, tokens, g)["seconds"] for j in mine)
        lines.append(f"{model['name']:<16}{len(mine):>6}{cost[False] / 60:>13.1f}{cost[True] / 60:>13.2f}"
                     f"{argmax_seconds(section, options, model) / 60:>16.1f}")
    lines.append(f"total: {total[False] / 3600:.1f} CPU-hours on {section['threads']} thread(s) a job, or "
                 f"{total[True] / 3600:.1f} GPU-hours (--resources gpu=1); rates assumed, audit/pretrained/plan.py")
    return "\n".join(lines)


def downloads(config: dict) -> str:
    """One ``hf download`` line per (model, seed, checkpoint) into the folder the jobs read
    (``suite.local_dir``), and the disk it takes at ``CHECKPOINT_BYTES_PER_PARAM`` (planned from
    the parameter counts, not measured): the list to run where the hub is reachable."""
    section = suite.section_of(config)
    lines, total = [], 0
    for job in suite.jobs(section):
        repo = suite.repo_id(section, job.model, job.seed)
        lines.append(f"hf download {repo} --revision {job.revision} --local-dir {suite.local_dir(section, job)}")
        total += CHECKPOINT_BYTES_PER_PARAM * suite.model_entry(section, job.model)["params"]
    lines.append(f"# {len(suite.jobs(section))} checkpoints, about {total / 1e9:.1f} GB on disk")
    return "\n".join(lines)
