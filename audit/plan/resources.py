"""Wall time and memory a SLURM job of the study needs, from the study's size alone.

Torch-free for built-in heads and bodies: rules/train.smk and rules/evaluate.smk call
``train_minutes``, ``train_mem_mb``, ``evaluate_minutes`` and ``evaluate_mem_mb`` as Snakemake
resource functions (``runtime`` in minutes, ``mem_mb`` in MB) while the DAG is planned, usually
on a login node. The user does not guess: the figures follow from epochs, tokens per epoch,
model size, corpus and what the head and body declare (their planning traits,
``audit.model.heads.traits``, ``audit.model.bodies.traits``: a head's timing family, output cost, components, order preservation and
parameters; a body's multiply-adds, activations and parameters), the same members for a head or
body from outside the project, whose undeclared ones take documented defaults.

Model (every constant below says where it comes from):

- GPU training: the published seconds per epoch on one V100 (LK Table 2, by corpus and head
  family, the head's ``timing_family``; shared/reference/protocol.md section 6), scaled by the tokens per epoch and by the
  multiply-adds per token of this model over those of the published one, never below a per-step
  floor (small models on a GPU are bound by kernel launches, not arithmetic). The body's share
  comes from ``audit/plan/bodycost.py``, the body's ``macs_per_token``: a Transformer's 6 N + 12 L T d FLOPs per
  token are thus run at the AWD-LSTM's V100 rate (about 2.4 TFLOP/s), which errs long for a
  body that keeps a GPU busier than an LSTM's time steps do.
- CPU training: seconds per token = overhead + multiply-adds x cost, both fitted to two runs
  measured on this project's CPU (the smoke model and a 2 x LSTM-200 PTB model); more threads
  are assumed to help only as sqrt(threads), which errs long.
- Evaluation: one forward pass over the test split plus the log-P spectrum, whose Gram matrix
  (audit/evaluate/spectrum.py) costs m n^2 + 2 k^3 flops at the rate measured by
  ``python -m audit bench spectrum`` (docs/benchmarks.md); the hidden-size gap repeats the
  forward pass over the spectrum's contexts and the spectrum (``evaluate.hidden_gap``), and so
  does the spectrum of the mapped logits f(l) (every built-in head has ``transformed_logits``);
  the gradient share costs its scored tokens x components x V (d + 1) (``python -m audit bench
  vocab``); the argmax test of the heads with an exact one (``order_preserving``) costs its cheap tiers (V^2 d) plus at most
  ``evaluate.argmax.lp_budget`` LPs per box, each at most its time bound and one round past it
  (``argmax_lp_seconds``: issue 49), that of the others (the witness search) at most
  ``evaluate.argmax.search_tokens`` tokens x (``search_steps`` + the starts) forward and
  backward passes of the head (``python -m audit bench argmax``).

Then a safety factor, a floor (short jobs still need imports and a queue slot) and a ceiling
(``AUDIT_SLURM_MAX_MINUTES``, default 1440 = 24 h, the usual partition limit): a run that needs
longer is ended by SLURM at the ceiling and resumes from its last epoch checkpoint on the next
attempt (the profile's ``retries``) or the next invocation.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import yaml

from audit.plan import bodycost
# the argmax test's figures (their own module), also read as resources.* by the tests and benches
from audit.plan.argmaxcost import (  # noqa: F401
    ARGMAX_BOXES, ARGMAX_CHEAP_PER_PAIR, ARGMAX_CHEAP_PER_TOKEN, ARGMAX_CHEAP_SECONDS, ARGMAX_LP_MAX_ROWS,
    ARGMAX_LP_ROW_ENTRY_SECONDS, ARGMAX_LP_SECONDS, ARGMAX_LP_VOCAB_ENTRY_SECONDS,
    ARGMAX_SEARCH_SECONDS_PER_MAC, ARGMAX_SEARCH_START_PASSES, ARGMAX_SEARCH_STEP_SECONDS,
    argmax_cheap_seconds, argmax_lp_seconds, argmax_search_seconds)
from audit.errors import AuditError
from audit.model.heads.traits import head_traits

# Tokens per split (with <eos>) and vocabulary of the pinned files; tests/plan/test_resources.py
# recounts them from the data mirror (WikiText-103, not in it: the WikiText paper's Table 1).
SPLIT_TOKENS = {
    "ptb": {"train": 929_589, "valid": 73_760, "test": 82_430},
    "wikitext-2": {"train": 2_088_628, "valid": 217_646, "test": 245_569},
    "wikitext-103": {"train": 103_227_021, "valid": 217_646, "test": 245_569},
}
VOCAB = {"ptb": 10_000, "wikitext-2": 33_278, "wikitext-103": 267_735}
# Subword tokens per word of a byte-level BPE of K tokens (data.tokenizer: bpe), for the split
# counts above, which are words: the largest over PTB's and WikiText-2's three splits, measured
# with audit.data.bpe (train_tokenizer, encode_lines) on the offline mirror, 2026-11-26. A run
# takes the figure of the largest K here not above its own (fewer merges, more tokens): it errs
# long. Text unlike these two (a user corpus) may split otherwise.
BPE_TOKENS_PER_WORD = {257: 5.45, 300: 3.57, 500: 2.46, 1000: 1.96, 2000: 1.65, 4000: 1.42,
                       8000: 1.24, 16_000: 1.11, 32_000: 1.03}

# LK-paper Table 2, "Time (/epoch)" on one V100 32 GB (protocol.md section 6), per corpus and
# timing family, and the model each figure was measured with where it is not LK's softmax-family
# model (``LK_MODEL``): published figures, so they live in a data file (published_costs.yaml)
_PUBLISHED = yaml.safe_load((Path(__file__).with_name("published_costs.yaml")).read_text())
V100_SECONDS_PER_EPOCH = _PUBLISHED["v100_seconds_per_epoch"]
PUBLISHED_MODEL = {(corpus, family): model for corpus, by_family in _PUBLISHED["measured_with"].items()
                   for family, model in by_family.items()}
LK_MODEL = _PUBLISHED["lk_model"]
# A head's published family (``timing_family``) and its output layer's cost relative to
# softmax's d' x V product (``output_cost``, ``python -m audit bench heads``) are its planning
# traits (audit/model/heads/traits.py): heads without a published time take the nearest family.
GPU_SECONDS_PER_STEP_FLOOR = 0.02  # assumed launch-bound floor per batch step (3-layer LSTM, weight drop)

# CPU anchors (tokens/s of training, one epoch): the smoke model (configs/smoke.yaml, 1 thread,
# 14,063 tok/s in a smoke run here) and pytorch/examples' 2 x LSTM-200 tied PTB model in our
# trainer (issue 12: 161 s per PTB epoch with 2 threads). Each as (model, threads, s/token).
CPU_ANCHORS = [
    ({"emb_size": 16, "hidden_size": 64, "last_size": None, "n_layers": 2, "experts": 1}, "ptb", 1, 1 / 14_063),
    ({"emb_size": 200, "hidden_size": 200, "last_size": None, "n_layers": 2, "experts": 1}, "ptb", 2,
     161 / 929_589),
]
# Spectrum: float64 Gram flops per second, from `audit bench spectrum` on PTB's 82,429 x 10,000
# (405.8 s on 2 busy cores; the WikiText-2 run was faster per flop, so this errs long).
GRAM_FLOPS = (82_429 * 10_000**2 + 2 * 10_000**3) / 405.8

STARTUP_SECONDS = 120  # imports, corpus load, model build, final save
# the gradient share (audit/evaluate/gradient_share.py): per scored token and component, the
# backward of the head's log-P to its logits and the float64 projection of that gradient onto
# col([W, 1]), V x (d + 1) multiply-adds; CPU seconds per V (d + 1) entry of one token's component,
# from `OMP_NUM_THREADS=1 python -m audit bench vocab` (V = 16,000, d = 64, 3,999 tokens, 2 busy
# cores): MoS (K = 15) 32.1 s, 5.2e-10 s an entry, the costliest per entry of the heads (softmax
# 1.0 s for its K = 1: 2.4e-10)
GRADIENT_SHARE_SECONDS_PER_ENTRY = 32.1 / (3999 * 15 * 16_000 * 65)
SAFETY = {"gpu": 1.5, "cpu": 2.0}  # V100 figures vary by GPU (K80 ~3x slower: SF README)
MIN_MINUTES = 10
DEFAULT_MAX_MINUTES = 24 * 60
BASE_MB = 800  # python + torch + numpy/scipy, resident
CUDA_HOST_MB = 2500  # CUDA context and libraries mapped on the host
MEM_SAFETY = 1.5


def max_minutes() -> int:
    """Ceiling of any job's runtime: AUDIT_SLURM_MAX_MINUTES (the partition's limit), else 24 h."""
    value = os.environ.get("AUDIT_SLURM_MAX_MINUTES")
    if not value:
        return DEFAULT_MAX_MINUTES
    try:
        minutes = int(value)
    except ValueError:
        raise AuditError(f"AUDIT_SLURM_MAX_MINUTES={value!r} is not a whole number of minutes") from None
    if minutes < MIN_MINUTES:
        raise AuditError(f"AUDIT_SLURM_MAX_MINUTES={minutes} is below the {MIN_MINUTES}-minute floor")
    return minutes


def _dims(settings: dict) -> dict:
    """The run's model sizes over the schema's defaults, with the mixture's K (``bodycost.model_sizes``)."""
    return bodycost.model_sizes(settings)


def vocab_of(settings: dict) -> int:
    """V the run trains on: ``data.vocab_size`` (K, the restricted vocabulary: exactly K entries,
    ``<unk>`` among them) when set, else the corpus's: a user corpus's counted from its training
    file (the run settings' ``user_corpus``, ``audit.data.user.settings_entry``)."""
    corpus = settings["corpus"]
    if "user_corpus" in settings:
        return settings.get("vocab_size") or settings["user_corpus"]["vocab"]
    if corpus not in VOCAB:
        raise AuditError(f"no vocabulary size for corpus {corpus!r}; known: {sorted(VOCAB)}")
    return settings.get("vocab_size") or VOCAB[corpus]


def macs_per_token(dims: dict, vocab: int, head: str | None = None) -> float:
    """Multiply-adds of one forward step per token: the body (``bodycost.body_macs``: the LSTM
    gates, or a Transformer's weights and attention), the mixture's latent layer (d' -> K d) and
    the tied decoder (d x V, weighted by the head's measured cost, ``cost(K)``; no head: a plain
    softmax decoder, cost 1, as the CPU anchors and LK's model were measured)."""
    last, d, experts = dims.get("last_size") or dims["emb_size"], dims["emb_size"], dims["experts"]
    cost = head_traits(head).cost(experts) if head is not None else 1.0
    latent = last * experts * d if experts > 1 else 0
    return bodycost.body_macs(dims, vocab) + latent + d * vocab * cost


def train_flops_per_token(dims: dict, vocab: int, head: str | None = None) -> float:
    """FLOPs of one training token: 2 per multiply-add, forward and backward (``bodycost.TRAIN_PASSES``);
    for a Transformer 6 N + 12 L T d (N the weights a token multiplies, the decoder's included)."""
    return 2 * bodycost.TRAIN_PASSES * macs_per_token(dims, vocab, head)


def run_flops_per_token(settings: dict) -> float:
    """``train_flops_per_token`` of one run, from its settings (its sizes, vocabulary and head)."""
    return train_flops_per_token(_dims(settings), vocab_of(settings), settings["head"])


def n_params(settings: dict) -> int:
    """Trainable parameters of the run's model as its settings describe it (a capacity-matched
    softmax at its configured sizes, not solved): the tied V x d embedding plus the counts the
    body and the head declare (``param_count``); when either declares none, the whole model
    counted on PyTorch's meta device (``audit.model.params.count_params``, exact for any part).
    tests/plan/test_resources.py checks the declared counts against that count for every built-in
    head on both bodies."""
    dims, vocab, options = _dims(settings), vocab_of(settings), settings.get("options", {})
    d = dims["emb_size"]
    head = head_traits(settings["head"]).param_count(dims.get("last_size") or d, d, vocab, options,
                                                    dims["decoder_bias"])
    body = bodycost.body(dims).param_count(dims, vocab)
    if head is None or body is None:
        return bodycost.meta_count(settings["head"], options, dims, vocab)
    return vocab * d + body + head


def _cpu_fit() -> tuple[float, float]:
    """(seconds per token of overhead, seconds per multiply-add), single-thread equivalent."""
    (m1, c1, t1, s1), (m2, c2, t2, s2) = CPU_ANCHORS
    x1, x2 = macs_per_token(m1, VOCAB[c1]), macs_per_token(m2, VOCAB[c2])
    y1, y2 = s1 * math.sqrt(t1), s2 * math.sqrt(t2)
    per_mac = (y2 - y1) / (x2 - x1)
    return y1 - per_mac * x1, per_mac


def uses_gpu(settings: dict) -> bool:
    """Whether the job asks SLURM for a GPU: the same decision as its ``gpu`` resource."""
    from audit.device import job_gpus

    return job_gpus(settings["train"]["device"]) > 0


def tokens(settings: dict, split: str) -> int:
    """Tokens of a split the run reads (``<eos>`` included): the pinned counts of a built-in
    corpus, a user corpus's counted from its file (``user_corpus``), in words, times
    ``bpe_tokens_per_word`` under a subword vocabulary; cut to ``max_tokens``."""
    corpus = settings["corpus"]
    if "user_corpus" in settings:
        n = settings["user_corpus"]["files"][split]["tokens"]
    elif corpus not in SPLIT_TOKENS:
        raise AuditError(f"no token counts for corpus {corpus!r}; known: {sorted(SPLIT_TOKENS)}")
    else:
        n = SPLIT_TOKENS[corpus][split]
    if settings.get("tokenizer") == "bpe":
        n = math.ceil(n * bpe_tokens_per_word(settings["vocab_size"]))
    limit = (settings.get("max_tokens") or {}).get(split)
    n = min(n, limit) if limit else n
    if split == "train" and settings["train"].get("epoch_tokens"):
        n = settings["train"]["epoch_tokens"]
    return n


def bpe_tokens_per_word(vocab: int) -> float:
    """Subword tokens per word at a BPE of ``vocab`` tokens (``BPE_TOKENS_PER_WORD``: the figure
    of the largest measured K not above ``vocab``)."""
    return BPE_TOKENS_PER_WORD[max(k for k in BPE_TOKENS_PER_WORD if k <= max(vocab, min(BPE_TOKENS_PER_WORD)))]


def seconds_per_token(settings: dict, gpu: bool) -> float:
    """Training seconds per token (forward, backward, update) on the job's device."""
    corpus, head, vocab = settings["corpus"], settings["head"], vocab_of(settings)
    dims = _dims(settings)
    if gpu:
        family = head_traits(head).timing_family
        # a user corpus has no published time: PTB's per-token rate, scaled to this model and V
        corpus = corpus if corpus in V100_SECONDS_PER_EPOCH else "ptb"
        ref = PUBLISHED_MODEL.get((corpus, family), LK_MODEL)  # measured at the full vocabulary
        published = V100_SECONDS_PER_EPOCH[corpus][family] / SPLIT_TOKENS[corpus]["train"]
        scaled = published * macs_per_token(dims, vocab, head) / macs_per_token(ref, VOCAB[corpus], head)
        t = settings["train"]
        return max(scaled, GPU_SECONDS_PER_STEP_FLOOR / (t["batch_size"] * t["bptt"]))
    overhead, per_mac = _cpu_fit()
    return (overhead + per_mac * macs_per_token(dims, vocab, head)) / math.sqrt(settings["train"]["threads"])


def _minutes(seconds: float, gpu: bool) -> int:
    minutes = math.ceil((seconds + STARTUP_SECONDS) * SAFETY["gpu" if gpu else "cpu"] / 60)
    return min(max(minutes, MIN_MINUTES), max_minutes())


def train_seconds(settings: dict) -> float:
    """Expected seconds of a training job's epochs (training and validation passes), no margin."""
    per_token = seconds_per_token(settings, uses_gpu(settings))
    epoch = per_token * (tokens(settings, "train") + tokens(settings, "valid") / 3)  # forward only: ~1/3
    return settings["train"]["epochs"] * epoch


def train_minutes(settings: dict) -> int:
    """SLURM ``runtime`` of a training job: every epoch's training and validation pass."""
    return _minutes(train_seconds(settings), uses_gpu(settings))


def scored_positions(settings: dict, contexts) -> int:
    """Test positions an evaluation option of ``contexts`` ("all" or a count) covers: the first
    ``contexts`` of the test split's predicted positions."""
    m = tokens(settings, "test") - 1
    return m if contexts == "all" else min(int(contexts), m)


def spectrum_shape(settings: dict) -> tuple[int, int]:
    """(contexts m, vocabulary n) of the run's log-P matrix."""
    return scored_positions(settings, settings["evaluate"]["contexts"]), vocab_of(settings)


def evaluate_minutes(settings: dict) -> int:
    """SLURM ``runtime`` of an evaluation job: test and validation forward passes, spectrum, the
    hidden-gap pass (a second forward over the spectrum's contexts and a second spectrum), the
    f(l) pass (a third: audit/evaluate/run.py runs it for every head with ``transformed_logits``,
    all the built-in ones; an outside head without one errs long), the gradient share and the
    argmax test."""
    gpu = uses_gpu(settings)
    options = settings["evaluate"]
    m, n = spectrum_shape(settings)
    k = min(m, n)
    passes = (2 if options["hidden_gap"] else 1) + 1
    forward = seconds_per_token(settings, gpu) / 3 * (tokens(settings, "test") + tokens(settings, "valid")
                                                      + (passes - 1) * m)
    return _minutes(forward + passes * (m * n * k + 2 * k**3) / GRAM_FLOPS + gradient_share_seconds(settings)
                    + argmax_seconds(settings), gpu)


def gradient_share_seconds(settings: dict) -> float:
    """CPU seconds of the gradient share: the first ``evaluate.gradient_share.contexts`` test
    positions, each K gradients (the head's ``components``) of V entries projected onto d + 1
    directions. Every head is counted, Mixtape too, which the evaluation skips (errs long); on a
    GPU the share runs there, faster than this CPU figure."""
    d = _dims(settings)["emb_size"]
    scored = scored_positions(settings, settings["evaluate"]["gradient_share"]["contexts"])
    experts = head_traits(settings["head"]).components(settings.get("options", {}))
    return GRADIENT_SHARE_SECONDS_PER_ENTRY * scored * experts * vocab_of(settings) * (d + 1)


def argmax_seconds(settings: dict) -> float:
    """CPU seconds of the argmax test at most: a head that declares ``order_preserving`` gets the
    cheap tiers and at most ``lp_budget`` LPs over each of its two boxes, each LP within its
    bound (``argmax_lp_seconds``), any other the witness search (over the body's box alone)."""
    n = vocab_of(settings)
    if head_traits(settings["head"]).order_preserving:
        d = _dims(settings)["emb_size"]
        lps = min(n, settings["evaluate"]["argmax"]["lp_budget"])
        return ARGMAX_BOXES * (argmax_cheap_seconds(n, d) + lps * argmax_lp_seconds(n, d))
    return argmax_search_seconds(settings, n)


def _mb(n_bytes: float, gpu: bool) -> int:
    total = BASE_MB + (CUDA_HOST_MB if gpu else 0) + n_bytes / 1e6
    return int(math.ceil(total * MEM_SAFETY / 256) * 256)


def train_mem_mb(settings: dict) -> int:
    """SLURM ``mem_mb`` of a training job (host memory; on a GPU the activations live there)."""
    gpu, vocab, dims, t = uses_gpu(settings), vocab_of(settings), _dims(settings), settings["train"]
    state = n_params(settings) * 4 * 12  # weights, grads, ASGD average, best copy, checkpoint buffers
    corpus = sum(tokens(settings, s) for s in ("train", "valid", "test")) * 8 * 2
    activations = 0
    if not gpu:
        window = t["bptt"] + t.get("max_seq_len_delta", 0)
        body = bodycost.body(dims).host_train_floats(dims, window)
        activations = t["batch_size"] * window * (body + 3 * dims["experts"] * vocab) * 4
    return _mb(state + corpus + activations, gpu)


def evaluate_mem_mb(settings: dict) -> int:
    """SLURM ``mem_mb`` of an evaluation job: the model, the Gram matrix and its eigensolver."""
    gpu = uses_gpu(settings)
    m, n = spectrum_shape(settings)
    k = min(m, n)
    # the Gram (float64) plus the eigensolver's half-size workspace: 1.5 x k^2 x 8 bytes matches the
    # 13.22 GB peak of `audit bench spectrum --wt2` (k = 33,278); buffered rows when m <= n; blocks
    gram = 1.5 * k * k * 8 + (m * n * 8 if m <= n else 0) + (1 << 29)
    return _mb(n_params(settings) * 4 * 3 + gram, gpu)
