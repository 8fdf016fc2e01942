"""Plan of the Dirichlet synthetic study: its fit jobs and each fit's settings.

Torch-free, so that Snakemake parses the workflow without importing torch.
"""

from __future__ import annotations

from audit.errors import AuditError
from audit.evaluate.ranks import rank_keys
from audit.model.heads.traits import HEAD_OPTIONS

METRICS = ["mode_match", "ce", "entropy", "kl"] + rank_keys()
TRUE_RANKS = rank_keys("true_")
FIGURE_METRICS = {"mode_match": "mode matching (share of contexts)", "kl": "KL(P* || Q), nats",
                  "ce": "cross-entropy to P*, nats", "press_rank": "Press rank of log-P",
                  "entropy_rank": "entropy rank of log-P"}


def alpha_label(alpha: float) -> str:
    """The alpha as it appears in file names: shortest round-trip repr (0.01, 0.1, 1)."""
    text = format(float(alpha), "g")
    return text if float(text) == float(alpha) else repr(float(alpha))


def synthetic_heads(config: dict) -> tuple[list[dict], list[str]]:
    """The section's head entries whose registry head exists, and the labels of those that don't.

    Raises:
        AuditError: no ``synthetic`` section, or a duplicate head label.
    """
    section = config.get("synthetic")
    if section is None:
        raise AuditError("config has no synthetic section")
    labels = [entry["name"] for entry in section["heads"]]
    kept, skipped = [], []
    for i, entry in enumerate(section["heads"]):
        if labels.count(entry["name"]) > 1:
            raise AuditError(f"config key synthetic.heads[{i}].name: duplicate head name {entry['name']!r}")
        (kept if entry.get("head", entry["name"]) in HEAD_OPTIONS else skipped).append(entry)
    return kept, [e["name"] for e in skipped]


def fit_jobs(config: dict) -> list[tuple[str, int, str, int]]:
    """(head label, d, alpha label, seed) of every fit of the section, registered heads only."""
    section = config["synthetic"]
    kept, _ = synthetic_heads(config)
    return [(entry["name"], int(d), alpha_label(a), int(seed))
            for entry in kept for d in section["d"] for a in section["alpha"] for seed in section["seeds"]]


def fit_settings(config: dict, head: str, d: int, alpha: str | float, seed: int) -> dict:
    """Everything one fit depends on, as a JSON-serialisable dict (used as Snakemake params)."""
    section = config["synthetic"]
    entry = next((e for e in section["heads"] if e["name"] == head), None)
    if entry is None:
        raise AuditError(f"no head named {head!r} in config key synthetic.heads")
    values = {alpha_label(a): float(a) for a in section["alpha"]}
    label = alpha_label(float(alpha))
    if label not in values:
        raise AuditError(f"alpha {alpha} is not in config key synthetic.alpha")
    return {"study": config["study"], "head": head, "registry_head": entry.get("head", head),
            "options": entry.get("options", {}), "d": int(d), "alpha": values[label], "seed": int(seed),
            **{k: section[k] for k in ("contexts", "outcomes", "steps", "lr", "decoder_bias",
                                       "device", "threads")}}
