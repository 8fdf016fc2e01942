"""One run's settings: exactly what a (corpus, head, seed) run of a study depends on.

``run_settings`` cuts them out of a checked study; ``train_settings`` of them is the train rule's
``params`` and their ``evaluate`` section the evaluate rule's, so that each rule reruns only when
its own settings change. ``settings_text`` is their canonical JSON.
"""

from __future__ import annotations

import json

from audit.config.arms import STUDY_WIDE_TRAIN_KEYS, head_entry, matches_capacity


# run-settings keys only the evaluate job reads: out of the train job's params (``train_settings``)
EVALUATE_KEYS = ("evaluate",)


def is_bpe(config: dict) -> bool:
    """Whether the study's runs train on a byte-level BPE vocabulary (``data.tokenizer: bpe``;
    the key is x-default ``word``, never written into a config, so older studies stay as they were)."""
    return config["data"].get("tokenizer", "word") == "bpe"


def run_settings(config: dict, corpus: str, name: str, seed: int) -> dict:
    """Everything one run's train and evaluate jobs depend on, as a JSON-serialisable dict (the
    jobs' resources are sized from it). The train job's params are ``train_settings`` of it, the
    evaluate job's ``settings["evaluate"]``. A run on a user corpus (``data.files``) also has
    ``user_corpus``: its files' SHA-256 and token counts (``audit.data.user.settings_entry``)."""
    from audit.data.user import is_user_corpus, settings_entry as user_settings_entry

    entry = head_entry(config, name)
    match = entry["options"].get("match") if matches_capacity(entry["head"]) else None
    settings = {
        "study": config["study"],
        "corpus": corpus,
        "name": name,
        "seed": int(seed),
        "head": entry["head"],
        "options": entry["options"],
        "model": {**config["model"], **entry.get("model", {})},
        "train": {k: v for k, v in {**config["train"], **entry.get("train", {})}.items()
                  if k not in STUDY_WIDE_TRAIN_KEYS},
        "max_tokens": config["data"]["max_tokens"],
        "evaluate": config["evaluate"],
    }
    if config["data"]["vocab_size"] is not None:  # only then, so full-vocabulary runs keep their settings
        settings["vocab_size"] = config["data"]["vocab_size"]
    if is_bpe(config):  # only then, so word-vocabulary runs keep their settings
        settings["tokenizer"] = "bpe"
    if is_user_corpus(config, corpus):  # only then, so the built-in corpora's runs keep their settings
        settings["user_corpus"] = user_settings_entry(config["data"]["files"][corpus])
    if "grid_point" in entry:  # only grid arms carry these, so other runs' settings stay as they were
        settings["grid_point"], settings["arm_group"] = entry["grid_point"], entry["arm_group"]
    if match:  # the capacity-matched softmax is solved against the named arm's model
        target = head_entry(config, match)
        settings["match"] = {"head": target["head"], "options": target["options"],
                             "model": {**config["model"], **target.get("model", {})}}
    return settings


def train_settings(settings: dict) -> dict:
    """``run_settings`` less what only evaluation reads (``EVALUATE_KEYS``): the train rule's params
    and the settings ``python -m audit train`` records, so that changing an ``evaluate:`` option
    reruns the evaluate jobs and never retrains a run."""
    return {k: v for k, v in settings.items() if k not in EVALUATE_KEYS}


def settings_text(settings: dict) -> str:
    """Run settings as canonical JSON: the same settings always give the same string."""
    return json.dumps(settings, sort_keys=True)


def settings_json(config: dict, corpus: str, name: str, seed: int) -> str:
    """The train rule's ``--settings``: ``train_settings`` of ``run_settings`` as canonical JSON."""
    return settings_text(train_settings(run_settings(config, corpus, name, int(seed))))
