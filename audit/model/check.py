"""The config check's model build: what would crash a train job stops the study when its config is read.

``check_models`` (called by ``audit.config.check_study``, so by ``snakemake -n`` and ``python -m
audit validate``) builds, on PyTorch's ``meta`` device (shapes only, no memory, no values):

- every arm whose head or body comes from outside the project (an import path), and runs one
  forward of a chunk of ``T`` tokens in ``B`` streams in training mode, then a second one in
  evaluation mode with the carried state, checking every shape the trainer and the evaluator
  rely on: the body's features (T, B, d_out) before and after its dropout, the head's log-P
  (T, B, V) and its ``target_log_probs`` (T, B) where it has them;
- every ``softmax_matched`` arm, solved against its target on every corpus of the study (the
  count depends on V), so that a size no d (nor H) reaches within ``options.tolerance`` is found
  here, not by the train job.

Each failure is one ``AuditError`` line naming the config key: the body's (``model.body`` or
``heads[i].model.body``), the head's (``heads[i].import`` or ``heads[i].head``) or the matched
arm's ``heads[i].options.tolerance``. Built-in heads on built-in bodies are tested in the suite
and are not built here: ``audit.config`` imports this module (and torch) only for a study that
has an outside part or a ``softmax_matched`` arm, so the other studies are still checked without
torch while Snakemake parses.
"""

from __future__ import annotations

import torch

from audit.errors import AuditError
from audit.model.language_model import LanguageModel, ModelConfig, detach_hidden
from audit.model.bodies import build_body
from audit.model.heads.traits import head_traits
from audit.model.importpath import is_import_path
from audit.model.params import MatchMissed, entry_model_config, vocab_size

T, B = 3, 2  # a chunk of 3 tokens in 2 streams: every shape of a run, none of its cost


def check_models(config: dict, source: str) -> None:
    """Build and run the arms of a checked study (``audit.config.check_study``) as described above.

    Raises:
        AuditError: ``<source>: config key <key>: <reason>``, one line, for the first arm that
            fails (outside parts first, in arm order, then the ``softmax_matched`` arms).
    """
    corpora = config["data"]["corpora"]
    if not corpora:  # no language-model runs (a synthetic-only study)
        return
    try:
        vocabs = {corpus: vocab_size(config, corpus) for corpus in corpora}
    except AuditError as err:
        raise AuditError(f"{source}: {err}") from None
    first = vocabs[corpora[0]]
    for i, entry in enumerate(config["heads"]):
        if not _matched(entry) and has_outside_part(config, entry):
            try:   # an outside body's body_options are checked against its Config here
                cfg = entry_model_config(config, entry, first)
            except AuditError as err:   # "model.<key>: ..." names a config key; others say their own
                key = "config key " if str(err).startswith("model.") else ""
                raise AuditError(f"{source}: {key}{err}") from None
            check_arm(cfg, _keys(entry, i, source))
    for i, entry in enumerate(config["heads"]):
        if _matched(entry):
            solved = {corpus: _solve(config, entry, i, source, corpus, vocab) for corpus, vocab in vocabs.items()}
            if has_outside_part(config, entry):
                check_arm(solved[corpora[0]], _keys(entry, i, source))


def has_outside_part(config: dict, entry: dict) -> bool:
    """Whether an arm's head or body is named by an import path."""
    body = {**config["model"], **entry.get("model", {})}.get("body", ModelConfig.body)
    return is_import_path(entry["head"]) or is_import_path(body)


def _matched(entry: dict) -> bool:
    """Whether an arm's sizes are solved to match another arm's count (the head's
    ``matches_capacity``, e.g. ``softmax_matched``)."""
    return bool(head_traits(entry["head"]).matches_capacity)


def _keys(entry: dict, i: int, source: str) -> dict:
    """The config keys an arm's failures name: its head's and its body's."""
    body = f"heads[{i}].model.body" if "body" in entry.get("model", {}) else "model.body"
    head = f"heads[{i}].{'import' if 'import' in entry else 'head'}"
    return {"head": f"{source}: config key {head}", "body": f"{source}: config key {body}"}


def _solve(config: dict, entry: dict, i: int, source: str, corpus: str, vocab: int):
    """The ModelConfig of a softmax_matched arm on one corpus; a miss names options.tolerance."""
    try:
        return entry_model_config(config, entry, vocab)
    except MatchMissed as err:
        raise AuditError(f"{source}: config key heads[{i}].options.tolerance: matching arm "
                         f"{entry['options']['match']!r} on {corpus} (V={vocab}): {err}; raise the tolerance, "
                         f"or change the sizes") from None
    except AuditError as err:
        raise AuditError(f"{source}: config key heads[{i}].options.match: {err}") from None


def _reason(err: Exception) -> str:
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text if len(text) <= 300 else text[:297] + "..."


def check_arm(cfg, keys: dict) -> None:
    """Build ``LanguageModel(cfg)`` on the meta device and run its forward, checking the shapes.

    Args:
        cfg: the arm's ``ModelConfig`` (its V the study's first corpus's).
        keys: ``{"head": ..., "body": ...}``, the prefixes of the errors (``_keys``).

    Raises:
        AuditError: the first failure, under the key of the part that failed.
    """
    with torch.device("meta"):
        model = _build(cfg, keys)
        words = torch.zeros(T, B, dtype=torch.long)
        hidden = _step(model, words, keys, training=True)
        _step(model, words, keys, training=False, hidden=detach_hidden(hidden))


def _build(cfg, keys: dict) -> LanguageModel:
    try:
        return LanguageModel(cfg)
    except Exception as err:  # noqa: BLE001 - any failure of an outside class is a config error
        first = err
    try:  # which part failed: the body built alone, else the head
        build_body(cfg.body, cfg.body_config, torch.nn.Embedding(cfg.vocab_size, cfg.emb_size))
    except Exception as err:  # noqa: BLE001
        raise AuditError(f"{keys['body']}: building body {cfg.body!r} on torch's meta device failed "
                         f"(docs/bodies.md: the constructor must not read tensor values): {_reason(err)}") from None
    raise AuditError(f"{keys['head']}: building head {cfg.head!r} on torch's meta device failed "
                     f"(docs/heads.md: the constructor must not read tensor values): {_reason(first)}") from None


def _step(model: LanguageModel, words: torch.Tensor, keys: dict, training: bool, hidden=None):
    """One forward of ``words`` (T, B) through the body then the head; returns the new state."""
    mode = "training" if training else "evaluation"
    model.train(training)
    d_out, vocab = model.body.d_out, model.cfg.vocab_size
    try:
        if hidden is None:
            hidden = model.init_hidden(B)
        out = model.body(words, hidden)
        dropped, raw, hidden = out
    except Exception as err:  # noqa: BLE001
        raise AuditError(f"{keys['body']}: body {model.cfg.body!r} failed in a {mode} forward on torch's meta "
                         f"device (ids (T, B) = ({T}, {B}) to (dropped, raw, hidden)): {_reason(err)}") from None
    for name, features in (("dropped", dropped), ("raw", raw)):
        shape = tuple(getattr(features, "shape", ()))
        if not isinstance(features, torch.Tensor) or shape != (T, B, d_out):
            raise AuditError(f"{keys['body']}: body {model.cfg.body!r} returned {name} features of shape "
                             f"{shape or type(features).__name__} in {mode}, not (T, B, d_out) = ({T}, {B}, {d_out})")
    _check_head(model.head, dropped, words, keys["head"], model.cfg.head, mode, (T, B, vocab))
    return hidden


def _check_head(head, features: torch.Tensor, targets: torch.Tensor, key: str, name: str, mode: str,
                expected: tuple) -> None:
    """The head's log-P (T, B, V) and, where it has them, its log-P at the targets (T, B)."""
    for member, want in (("forward", expected), ("target_log_probs", expected[:2])):
        try:
            out = head(features) if member == "forward" else head.target_log_probs(features, targets)
        except Exception as err:  # noqa: BLE001
            raise AuditError(f"{key}: head {name!r}: {member} failed in a {mode} forward on torch's meta device "
                             f"(features of shape {tuple(features.shape)}): {_reason(err)}") from None
        if out is None and member == "target_log_probs":
            continue
        shape = tuple(getattr(out, "shape", ()))
        if not isinstance(out, torch.Tensor) or shape != want:
            raise AuditError(f"{key}: head {name!r}: {member} returned {shape or type(out).__name__} in {mode}, "
                             f"not {want}")
