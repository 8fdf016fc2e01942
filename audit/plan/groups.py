"""Which seeds of an arm train in one process (``train.seeds_per_process``, issue 57).

A fixed design's seeds are cut, in the order the config lists them, into groups of
``seeds_per_process``; each group is one Snakemake job (``rule train_group``) that trains its seeds
in turn (``audit.train.group``), and each run keeps its own ``train`` job, which resumes the
group's finished checkpoint and writes the run's files, so the DAG, the runs table and
``snakemake -f <one run's metrics.json>`` look as they do without groups. A group's label joins
its seeds with '-' ("1-2-3"). A sequential design adds seeds stage by stage: refused (one line).
"""

from __future__ import annotations

from audit.errors import AuditError


def groups(seeds: list[int], k: int) -> list[list[int]]:
    """``seeds`` (in the config's order) cut into consecutive groups of ``k`` (the last may be shorter)."""
    if k < 1:
        raise AuditError(f"train.seeds_per_process must be at least 1, got {k}")
    return [list(seeds[i:i + k]) for i in range(0, len(seeds), k)]


def label(group: list[int]) -> str:
    return "-".join(str(s) for s in group)


def seeds_of(text: str) -> list[int]:
    """The seeds a group's label names."""
    return [int(s) for s in text.split("-")]


def group_of(seed: int, seeds: list[int], k: int) -> list[int]:
    """The group that trains ``seed``."""
    found = [g for g in groups(seeds, k) if seed in g]
    if not found:
        raise AuditError(f"seed {seed} is not one of the study's seeds {seeds}")
    return found[0]


def check(config: dict) -> int:
    """The study's ``train.seeds_per_process`` (1: no groups); one line when a design cannot group."""
    k = int(config["train"].get("seeds_per_process", 1))
    if k > 1 and isinstance(config.get("seeds"), dict):
        raise AuditError("train.seeds_per_process: seeds on demand (a sequential `seeds:` mapping) add seeds "
                         "stage by stage; grouping needs a fixed seed list")
    graphs = bool(config["train"].get("cuda_graphs")) or any(
        (entry.get("train") or {}).get("cuda_graphs") for entry in config["heads"])
    if k > 1 and graphs:
        raise AuditError("train.seeds_per_process: train.cuda_graphs is not supported in a group yet")
    per_gpu = config["train"].get("runs_per_gpu", 1)
    if isinstance(per_gpu, int) and k > per_gpu:
        raise AuditError(f"train.seeds_per_process ({k}) exceeds train.runs_per_gpu ({per_gpu}): a group holds "
                         f"its {k} runs on one GPU; set runs_per_gpu to at least {k} (the memory plan then "
                         f"checks that {k} runs of each arm fit one GPU)")
    return k
