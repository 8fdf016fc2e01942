"""GPU memory of one job, planned before the study starts: which runs fit on one GPU together.

Torch-free (rules/common.smk calls ``check_plan`` while Snakemake parses). The model counts the
peak live device bytes of one job, checked against the simulated CUDA device's peak-byte tracker
(tests/support/fake_cuda.py) for every head at two tiny sizes and for tiny Transformers
(tests/plan/test_memory.py: within ``MEASURED_FACTOR`` of the measured peak):

- training: the state (the body's ``state_copies`` x parameters x 4 bytes; AWD-LSTM: weights,
  gradients, ASGD average, best copy, weight drop's dropped copies; other bodies: weights,
  gradients and the optimiser's moments), the corpus on the device (int64) and one step's
  activations at the longest BPTT sequence (bptt + max_seq_len_delta) x batch tokens, each token
  holding the body's floats (its ``train_floats``: 14 per LSTM hidden unit per layer; a
  pre-LN Transformer's saved tensors per block, plus heads x T attention scores per block when
  attention takes the math path) and the head's ``vocab_floats`` per vocabulary entry (logits,
  log-softmax, their gradients, per mixture component), or, when larger, one validation chunk
  (the trainer validates every epoch: ``chunk_bytes``, with the state still alive). V is the
  vocabulary the run trains on (``data.vocab_size`` when set). Float32, except that a head whose
  bf16 run holds more than its fp32 one (MoS's float32 copy of the bf16 logits) declares the
  larger; a body's bf16 activations take half the bytes, so a bf16 run needs less than planned;
- evaluation: the model, the test split, one chunk's forward (``chunk_bytes``: the test split
  streams as one sequence, bptt tokens a chunk, no gradients, the head's ``eval_vocab_floats``
  per vocabulary entry; a body reads pieces in windows of its ``eval_window``: a Transformer's
  context_size tokens) and the spectrum: the
  float64 k x k Gram and the 512 MB row buffer while rows stream (audit/evaluate/spectrum.py),
  then ``EIGH_COPIES`` k x k doubles while the GPU's eigensolver runs (measured on an H200), or
  the buffered rows when m <= n.

A GPU's own overheads (CUDA context, cuDNN/cuBLAS workspaces, the caching allocator's
fragmentation) are not tensors: ``CONTEXT_BYTES`` per process and the ``margin`` cover them.
Heads and bodies answer through their planning traits (``audit.model.heads.traits``, ``audit.model.bodies.traits``); a body from
outside the project that declares no cost traits is planned by the stated conservative rule
(``audit.model.bodies.traits.BodyTraits``), and ``plan-memory`` prints a note saying so.
"""

from __future__ import annotations

from audit.plan import bodycost
from audit.errors import AuditError
from audit.model.heads.traits import head_traits
from audit.plan.resources import _dims, n_params, spectrum_shape, tokens, vocab_of

GB = 1e9
# Floats per vocabulary entry per training token are the head's ``train_vocab_floats``
# (audit/model/heads/traits.py): a plain log-softmax (softmax, MoC) keeps 3 (the simulated
# device's fit); the others are a real H200's figures (gpu-check's memory step, docs/gpus.md):
# SigSoftmax and GSS 4.5, PLIF 9, Mixtape 5, MoS 2.5 per component. A plan too large costs runs
# per GPU, one too small an out-of-memory retry. A forward without gradients holds the head's
# ``eval_vocab_floats`` (softmax 2, PLIF 7.5; MoS's full mixture 4 per component and log-P).
GRAM_BLOCK_BYTES = 1 << 29  # audit/evaluate/spectrum.py _BLOCK_BYTES
# k x k float64 matrices alive while torch.linalg.eigvalsh (cuSOLVER) solves the Gram on a GPU:
# the Gram and the solver's copies and workspace. Measured on an H200 (torch 2.11, CUDA 13;
# docs/gpu/NVIDIA-H200-2026-11-26.json): 4.98 GB at k = 10,000 and 53.4 GB at k = 33,278, both
# 6.0-6.1 k^2 doubles beyond the model and test split; the simulated device, whose eigensolver is
# the CPU's, cannot show it (the plan had 2: Gram and one copy, 2.9x too little for paper-wt2)
EIGH_COPIES = 6
CONTEXT_BYTES = 0.6 * GB  # CUDA context and library kernels per process (not a tensor)
MEASURED_FACTOR = 2.0     # the model is within this factor of the simulated device's peak


def head_floats(settings: dict) -> float:
    """Floats per vocabulary entry one training token holds in the head (its ``vocab_floats``)."""
    return head_traits(settings["head"]).vocab_floats(settings.get("options", {}))


def eval_head_floats(settings: dict) -> float:
    """Floats per vocabulary entry one token holds in the head's forward without gradients."""
    return head_traits(settings["head"]).eval_vocab_floats(settings.get("options", {}))


def _state_bytes(settings: dict) -> float:
    return n_params(settings) * 4


def state_copies(settings: dict) -> int:
    """Parameter-sized tensors a training job keeps on the device (the body's ``state_copies``)."""
    return bodycost.body(_dims(settings)).state_copies(settings["train"])


def chunk_bytes(settings: dict, sequences: int) -> float:
    """Device bytes of one forward chunk without gradients: ``sequences`` x bptt tokens through
    the head, the body reading each piece in a window of its ``eval_window`` (a Transformer's
    context_size tokens). The trainer validates eval_batch_size sequences at once; the
    evaluation streams the test split as one (``audit.evaluate.run.stream_rows``)."""
    t, vocab, sizes = settings["train"], vocab_of(settings), _dims(settings)
    window = bodycost.body(sizes).eval_window(sizes, t["bptt"])
    body = window * bodycost.eval_floats(sizes, window, bodycost.math_attention(sizes, "cuda"))
    head = t["bptt"] * eval_head_floats(settings) * vocab
    return sequences * (body + head) * 4


def train_bytes(settings: dict, math_attention: bool | None = None) -> float:
    """Peak live device bytes of one training job: its state and corpus, and the larger of one
    step at the longest sequence and one validation chunk.

    ``math_attention``: whether a Transformer's attention keeps its scores; None decides as on a
    GPU (``bodycost.math_attention``). The simulated device runs the CPU's kernels: its tests say so.
    """
    t, vocab, sizes = settings["train"], vocab_of(settings), _dims(settings)
    window = t["bptt"] + (t.get("max_seq_len_delta", 0) if t.get("variable_bptt", True) else 0)
    unfused = bodycost.math_attention(sizes, "cuda") if math_attention is None else math_attention
    per_token = bodycost.train_floats(sizes, window, unfused) + head_floats(settings) * vocab
    corpus = (tokens(settings, "train") + tokens(settings, "valid")) * 8
    step = t["batch_size"] * window * per_token * 4
    return state_copies(settings) * _state_bytes(settings) + corpus + max(step, chunk_bytes(settings, t["eval_batch_size"]))


def evaluate_bytes(settings: dict) -> float:
    """Peak live device bytes of one evaluation job: a chunk's forward pass (``chunk_bytes`` of the
    one sequence the evaluation streams) and the spectrum."""
    chunk = chunk_bytes(settings, 1)
    m, n = spectrum_shape(settings)
    k = min(m, n)
    if m <= n:   # the buffered rows (float32 and their float64 copy), then the m x m eigensolve
        spectrum = m * n * 12 + EIGH_COPIES * k * k * 8
    else:        # accumulating: the Gram and one row block; then the eigensolve, rows gone
        spectrum = max(k * k * 8 + GRAM_BLOCK_BYTES, EIGH_COPIES * k * k * 8)
    return _state_bytes(settings) + tokens(settings, "test") * 8 + max(chunk, spectrum)


def job_bytes(settings: dict) -> dict:
    """{"train": bytes, "evaluate": bytes} of one run, each with the CUDA context added."""
    return {"train": train_bytes(settings) + CONTEXT_BYTES, "evaluate": evaluate_bytes(settings) + CONTEXT_BYTES}


def runs_per_gpu_allowed(job: float, gpu_memory_gb: float, margin: float) -> int:
    """How many jobs of ``job`` bytes fit in (1 - margin) of the GPU's memory."""
    return int((1 - margin) * gpu_memory_gb * GB // job)


def plan(config: dict, gpu_runs_only: bool = True) -> list[dict]:
    """One row per corpus, arm and job (training, evaluation) of the study's GPU runs (seeds share
    sizes): peak GB and the runs per GPU it allows.

    Args:
        config: a checked study config (``train.gpu_memory_gb``, ``train.gpu_memory_margin``).
        gpu_runs_only: False plans every run as if on a GPU (a plan printed on a CPU host).
    """
    from audit.config import run_settings
    from audit.plan.resources import uses_gpu

    gpu, margin = config["train"]["gpu_memory_gb"], config["train"]["gpu_memory_margin"]
    # sizes do not depend on the seed: the first of a list, or a sequential schedule's first
    seeds = config["seeds"]
    seed = seeds[0] if isinstance(seeds, list) else seeds.get("first", 1)
    rows = []
    for corpus in config["data"]["corpora"] if config["heads"] and config["seeds"] else []:
        for entry in config["heads"]:
            settings = run_settings(config, corpus, entry["name"], seed)
            if gpu_runs_only and not uses_gpu(settings):
                continue
            note = bodycost.note(_dims(settings))
            for job, nbytes in job_bytes(settings).items():
                rows.append({"corpus": corpus, "arm": entry["name"], "job": job, "bytes": nbytes,
                             "gb": nbytes / GB, "runs_per_gpu": runs_per_gpu_allowed(nbytes, gpu, margin),
                             "note": note})
    return rows


def check_plan(config: dict, source: str) -> None:
    """Refuse a study whose ``train.runs_per_gpu`` jobs of some kind cannot share one GPU.

    ``runs_per_gpu: auto`` admits jobs by the GPU's free memory at run time: only a job that
    cannot fit alone is refused then.
    """
    t = config["train"]
    runs = 1 if t["runs_per_gpu"] == "auto" else int(t["runs_per_gpu"])
    usable = (1 - t["gpu_memory_margin"]) * t["gpu_memory_gb"]
    for row in sorted(plan(config), key=lambda r: -r["bytes"]):
        if runs * row["gb"] > usable:
            raise AuditError(
                f"{source}: {row['job']} job of {row['arm']} ({row['corpus']}) needs {row['gb']:.1f} GB of GPU "
                f"memory; {runs} per GPU (train.runs_per_gpu) need {runs * row['gb']:.1f} GB > {usable:.1f} GB "
                f"({1 - t['gpu_memory_margin']:.0%} of train.gpu_memory_gb = {t['gpu_memory_gb']:g}); set "
                f"train.runs_per_gpu <= {row['runs_per_gpu']}" + (" or a larger GPU" if row["runs_per_gpu"] < 1 else ""))


def format_table(rows: list[dict], gpu_memory_gb: float) -> str:
    """A markdown table of ``plan`` rows, largest first."""
    lines = [f"| corpus | arm | job | peak GB | runs per {gpu_memory_gb:g} GB GPU |", "|---|---|---|---|---|"]
    for row in sorted(rows, key=lambda r: (r["corpus"], -r["bytes"])):
        lines.append(f"| {row['corpus']} | {row['arm']} | {row['job']} | {row['gb']:.1f} | {row['runs_per_gpu']} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import argparse

    from audit.config import load_study

    parser = argparse.ArgumentParser(prog="python -m audit plan-memory", description=__doc__.split("\n")[0])
    parser.add_argument("configs", nargs="+", help="study config YAML(s); every run planned as a GPU run")
    args = parser.parse_args(argv)
    for path in args.configs:
        config = load_study(path)
        print(f"{path} (train.runs_per_gpu = {config['train']['runs_per_gpu']}, margin "
              f"{config['train']['gpu_memory_margin']:.0%}):")
        rows = plan(config, gpu_runs_only=False)
        print(format_table(rows, config["train"]["gpu_memory_gb"]))
        for note in sorted({row["note"] for row in rows if row["note"]}):
            print(note)
    return 0
