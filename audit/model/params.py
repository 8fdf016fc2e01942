"""Parameter counts of a study's heads, and the capacity-matched softmax's embedding size.

``head_counts`` gives ``(name, n_params, ModelConfig)`` per head entry of a study without
training, at the vocabulary the study's runs train on (``data.vocab_size``: K, else the corpus's
own); ``python -m audit params`` (``audit.plan.params``) prints them. Counts are exact: the model is built on PyTorch's ``meta`` device (shapes only, no
memory, about a millisecond) and its trainable parameters are summed as in
``audit.model.language_model.count_parameters`` (the tied embedding once, frozen PLIF slopes not at all).
"""

from __future__ import annotations

import torch

from audit.errors import AuditError
from audit.model.bodies.traits import body_traits
from audit.model.heads.traits import SoftmaxMatchedTraits, head_traits

# Vocabulary sizes of the pinned (checksummed) training files, used when no mirror is at hand;
# tests/model/test_params.py recounts them from the mirror (WikiText-103's: its paper's Table 1).
PINNED_VOCAB = {"ptb": 10000, "wikitext-2": 33278, "wikitext-103": 267735}
# softmax_matched must come within this relative gap of its target's count unless its
# options.tolerance says otherwise (the schema's $defs/softmax_matched_options: 0.5%)
MATCH_TOLERANCE = SoftmaxMatchedTraits.defaults["tolerance"]


class MatchMissed(AuditError):
    """No size of the capacity-matched softmax comes within its tolerance of the target count."""


def count_params(cfg) -> int:
    """Trainable parameters of ``LanguageModel(cfg)``, built on the meta device.

    Args:
        cfg: an ``audit.model.language_model.ModelConfig``.

    Returns:
        The number of trainable scalars.
    """
    from audit.model.language_model import LanguageModel, count_parameters

    with torch.device("meta"):
        model = LanguageModel(cfg)
    return count_parameters(model)


def solve_matched_size(target_params: int, base_cfg, tolerance: float | None = None):
    """The tied softmax model whose parameter count is closest to ``target_params``.

    Varies emb_size = last_size (d = d', as the softmax family requires) with every other
    field of ``base_cfg`` fixed; a Transformer's d moves in steps of its head count
    (``size_step``) and its MLP width then closes the gap. The count grows strictly with d (embedding V d, first and
    last LSTM layers, 4 d^2 + ... ), so a bisection finds the two integers around the target
    and the nearer one wins (ties go to the smaller model).

    One step of d moves the count by about V + 8 d (the embedding row and the LSTM layers), so
    at a small d (V = 10000, d = 16: ~5%) d alone may land nowhere within the tolerance. Then,
    on an AWD-LSTM of two or more layers (options.adjust_hidden, default true), d is the largest
    that keeps the model within the target and the hidden size H, whose step is about 8 (d + H),
    closes the gap, as the Transformer's MLP width does. A size d alone reaches keeps H, so a
    study that matched before this fallback existed solves to the same model.

    Args:
        target_params: the count to match, e.g. ``count_params`` of the MoS arm.
        base_cfg: ModelConfig of the softmax arm (hidden size, layers, vocabulary, head); its
            ``head_options`` may hold ``tolerance`` and ``adjust_hidden``.
        tolerance: largest accepted relative gap; None: ``head_options["tolerance"]``, else
            ``MATCH_TOLERANCE``.

    Returns:
        A ModelConfig copy with the solved emb_size (and hidden_size) and last_size None.

    Raises:
        MatchMissed: if no size comes within ``tolerance`` (e.g. the target is below the
            count of d = 1); the message names the closest size and its gap.
    """
    options = {**SoftmaxMatchedTraits.defaults, **base_cfg.head_options}
    tolerance = float(options["tolerance"]) if tolerance is None else tolerance
    step = size_step(base_cfg)
    if step == 1:
        best = _nearest(target_params, lambda d: base_cfg.replace(emb_size=d, last_size=None))
        if _gap(best, target_params) > tolerance and options["adjust_hidden"] and _hidden_grows(base_cfg):
            closed = _close_with(base_cfg, target_params, "hidden_size", 1)
            best = min(best, closed, key=lambda c: _gap(c, target_params))
    else:
        best = _close_with(base_cfg, target_params, "hidden_size", step)
    gap = _gap(best, target_params)
    if gap > tolerance:
        hidden, base_hidden = best.to_dict().get("hidden_size"), base_cfg.to_dict().get("hidden_size")
        second = f", H={hidden}" if hidden != base_hidden else ""
        raise MatchMissed(f"softmax_matched: closest size d={best.emb_size}{second} is {gap:.2%} away from "
                          f"{target_params} parameters (tolerance {tolerance * 100:g}%)")
    return best


def _gap(cfg, target: int) -> float:
    return abs(count_params(cfg) - target) / target


def _close_with(base_cfg, target: int, field: str, step: int):
    """The largest d (a multiple of ``step``) whose model stays within ``target``, then ``field``
    solved to the count nearest it: 2 d + 1 parameters per unit and block for a Transformer's
    MLP width, about 8 (d + H) per unit for an LSTM's hidden size."""
    k = _nearest(target, lambda k: base_cfg.replace(emb_size=k * step, last_size=None), below=True)
    fixed = base_cfg.replace(emb_size=k.emb_size, last_size=None)
    return _nearest(target, lambda x: fixed.replace(**{field: x}))


def _hidden_grows(cfg) -> bool:
    """Whether the count grows strictly with the hidden size, as the body declares (the
    AWD-LSTM with an inner layer; an outside body promises nothing)."""
    return bool(body_traits(cfg.body).hidden_grows(cfg.to_dict()))


def size_step(cfg) -> int:
    """The grain of the embedding size, as the body declares: 1, or the Transformer's head count
    (twice it for rotary positions, whose head size must be even)."""
    return int(body_traits(cfg.body).size_step(cfg.to_dict()))


def _nearest(target: int, sized, below: bool = False):
    """``sized(x)`` for the integer x >= 1 whose count is nearest ``target`` (ties: the smaller
    x), or the largest x whose count does not exceed it when ``below`` (x = 1 at least). The
    count grows strictly with x, so a doubling search then a bisection find the two integers
    around the target."""
    lo, hi = 1, 2
    while count_params(sized(hi)) < target:
        lo, hi = hi, hi * 2
        if hi > 1 << 20:
            raise AuditError(f"softmax_matched: no size reaches {target} parameters")
    while hi - lo > 1:  # invariant: count(lo) < target <= count(hi), or lo == 1
        mid = (lo + hi) // 2
        if count_params(sized(mid)) < target:
            lo = mid
        else:
            hi = mid
    if below:
        return sized(hi if count_params(sized(hi)) == target else lo)
    return sized(min((lo, hi), key=lambda x: (abs(count_params(sized(x)) - target), x)))


def corpus_vocab_size(study: dict, corpus: str) -> int:
    """V of a corpus: a user corpus's counted from its training file (``data.files``); a
    built-in one's counted from the mirror's train.txt when there is one, else pinned."""
    from audit.data.corpus import tokenise
    from audit.data.fetch import resolve_mirror
    from audit.data.text import summarise

    files = study.get("data", {}).get("files") or {}
    if corpus in files:
        return summarise(files[corpus]["train"]).types
    mirror = resolve_mirror(study.get("data", {}).get("mirror"))
    train = mirror / corpus / "train.txt" if mirror else None
    if train is not None and train.is_file():
        return len(set(tokenise(train)))
    if corpus not in PINNED_VOCAB:
        raise AuditError(f"corpus {corpus!r}: no mirror to count its vocabulary and no pinned size")
    return PINNED_VOCAB[corpus]


def vocab_size(study: dict, corpus: str) -> int:
    """V the study's runs train on: K = ``data.vocab_size`` when set, else the corpus's own.

    The workflow's ``restrict_corpus`` rule (``audit.data.corpus.restrict_vocab``) keeps exactly K
    entries: the K most frequent training words, or the K - 1 most frequent and ``<unk>`` when
    ``<unk>`` is not among them; ``<eos>`` counts as a word. No special is added beyond K. With
    ``data.tokenizer: bpe`` V is K, the byte-level BPE's exact size (``audit.data.bpe``).

    Raises:
        AuditError: K outside 2..V of the corpus (the error restrict_vocab would give later).
    """
    size = study.get("data", {}).get("vocab_size")
    if study.get("data", {}).get("tokenizer") == "bpe":  # K subword tokens, exactly (audit/data/bpe.py)
        return size
    full = corpus_vocab_size(study, corpus)
    if size is None:
        return full
    if not 2 <= size <= full:
        raise AuditError(f"config key data.vocab_size: {size} must be between 2 and the corpus's {full:,} words")
    return size


def entry_model_config(study: dict, entry: dict, vocab: int):
    """ModelConfig of one head entry: study ``model`` + the entry's overrides + its head.

    A ``softmax_matched`` entry gets the embedding size solved against the entry named by its
    ``options.match`` (its own model section gives the fixed sizes, e.g. hidden_size).

    Args:
        study: a validated study (``audit.config.load_study``).
        entry: one element of ``study["heads"]``.
        vocab: vocabulary size V.
    """
    from audit.model.language_model import MODEL_KEYS, ModelConfig

    head = entry.get("head", entry["name"])
    sizes = {**study.get("model", {}), **entry.get("model", {})}
    unknown = sorted(set(sizes) - MODEL_KEYS)
    if unknown:
        raise AuditError(f"head {entry['name']!r}: unknown model setting {unknown[0]!r}")
    cfg = ModelConfig.of(vocab_size=vocab, head=head, head_options=dict(entry.get("options", {})), **sizes)
    if head_traits(head).matches_capacity:
        target_name = cfg.head_options.get("match")
        targets = [e for e in study["heads"] if e["name"] == target_name and e is not entry]
        if not targets:
            raise AuditError(f"head {entry['name']!r}: options.match must name another head, got {target_name!r}")
        if head_traits(targets[0].get("head", targets[0]["name"])).matches_capacity:
            raise AuditError(f"head {entry['name']!r}: cannot match another softmax_matched arm")
        cfg = solve_matched_size(count_params(entry_model_config(study, targets[0], vocab)), cfg)
    return cfg


def head_counts(study: dict, corpus: str, vocab: int | None = None) -> list[tuple[str, int, object]]:
    """(name, trainable parameters, ModelConfig) for every head entry of a study."""
    vocab = vocab_size(study, corpus) if vocab is None else vocab
    rows = []
    for entry in study["heads"]:
        cfg = entry_model_config(study, entry, vocab)
        rows.append((entry["name"], count_params(cfg), cfg))
    return rows
