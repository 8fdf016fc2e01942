"""A study's ``pretrained:`` section expanded into jobs, hub ids and folders (torch-free).

Snakemake parses with this module (rules/pretrained.smk), so it imports neither torch nor
transformers: planning a suite (``snakemake -n``, ``audit.pretrained.plan``) needs no checkpoint
on disk, because the section itself states each model's d, layers, parameters and V.

PolyPythias names its runs ``EleutherAI/pythia-{size}m`` (seed 0: the original run, data and
weight seed 1234) and ``EleutherAI/pythia-{size}m-seed{n}`` (n = 1..9), each checkpoint a Git
revision ``step<N>`` (``repo``, ``repo_seed0``). A checkpoint on disk lies at
``<root>/<repo id>/<revision>/`` in the Hugging Face layout (config.json, weights, tokenizer),
the layout ``hf download <repo> --revision <rev> --local-dir`` writes
(docs/pretrained.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from audit.errors import AuditError

_STEP = re.compile(r"^step(\d+)$")


@dataclass(frozen=True)
class Job:
    """One (model, seed, checkpoint): one Snakemake job, one row of the checkpoints table."""

    model: str
    seed: int
    revision: str


def section_of(config: dict) -> dict | None:
    """The study's ``pretrained:`` section (schema defaults filled), None when it has none."""
    return config.get("pretrained") or None


def step_of(revision: str) -> int:
    """The training step a revision names (``step143000`` -> 143000): the time axis of the
    saturation measures, so a revision that names none is refused."""
    found = _STEP.match(revision)
    if found is None:
        raise AuditError(f"pretrained checkpoint {revision!r}: names no training step (expected step<N>, "
                         "as PolyPythias' revisions)")
    return int(found.group(1))


def ordered(section: dict) -> list[str]:
    """The checkpoints in training order (by step): the order the late window reads."""
    return sorted(section["checkpoints"], key=step_of)


def final_revision(section: dict) -> str:
    """The checkpoint whose measurements the verdicts use: ``final``, or the latest step."""
    return section["final"] or ordered(section)[-1]


def model_entry(section: dict, name: str) -> dict:
    """The ``models`` entry of ``name``; a name the suite does not list is one line."""
    for entry in section["models"]:
        if entry["name"] == name:
            return entry
    raise AuditError(f"pretrained: model {name!r} is not in the suite's models "
                     f"({', '.join(m['name'] for m in section['models'])})")


def repo_id(section: dict, model: str, seed: int) -> str:
    """The hub id of (model, seed): ``repo_seed0`` for seed 0 when set, else ``repo``."""
    template = section["repo_seed0"] if seed == 0 and section["repo_seed0"] else section["repo"]
    return template.format(model=model, seed=seed)


def local_dir(section: dict, job: Job, base: str | Path = ".") -> Path:
    """Where the checkpoint lies on disk: ``<root>/<repo id>/<revision>`` (root resolved against
    ``base``, the workflow directory)."""
    return Path(base) / section["root"] / repo_id(section, job.model, job.seed) / job.revision


def jobs(section: dict) -> list[Job]:
    """Every (model, seed, checkpoint) of the suite, models in the section's order."""
    return [Job(m["name"], seed, rev) for m in section["models"] for seed in section["seeds"]
            for rev in ordered(section)]


def job_view(section: dict, job: Job) -> dict:
    """The section as one job depends on it: its own model, seed and checkpoint, the final one
    named (the argmax test runs there), the rest as is. A job's params (rules/pretrained.smk):
    adding a size, a seed or a checkpoint to the suite reruns no finished job."""
    final = final_revision(section)
    checkpoints = sorted({job.revision, final}, key=step_of)
    return {**section, "models": [model_entry(section, job.model)], "seeds": [job.seed], "checkpoints": checkpoints,
            "final": final}


def check(section: dict, source: str = "config", job_only: bool = False) -> None:
    """What the schema cannot say of a ``pretrained:`` section, one line naming the key
    (``job_only``: of a ``job_view``, whose late window is the suite's, not its own).

    Raises:
        AuditError: two models of one name, a checkpoint without a step, ``final`` not among the
            checkpoints, ``late`` longer than the checkpoints, ``stride`` not below ``window``, or
            ``contexts`` above a model's vocabulary (the streamed log-P spectrum uses the row
            Gram only while contexts <= V: beyond, a V x V float64 Gram, 20 GB at V = 50,304).
    """
    names = [m["name"] for m in section["models"]]
    if len(set(names)) != len(names):
        raise AuditError(f"{source}: config key pretrained.models: a model is named twice ({names})")
    for i, revision in enumerate(section["checkpoints"]):
        try:
            step_of(revision)
        except AuditError as err:
            raise AuditError(f"{source}: config key pretrained.checkpoints[{i}]: {err}") from None
    if section["final"] is not None and section["final"] not in section["checkpoints"]:
        raise AuditError(f"{source}: config key pretrained.final: {section['final']!r} is not among the checkpoints")
    if section["late"] > len(section["checkpoints"]) and not job_only:
        raise AuditError(f"{source}: config key pretrained.late: {section['late']} checkpoints, but only "
                         f"{len(section['checkpoints'])} are listed")
    if section["stride"] >= section["window"]:
        raise AuditError(f"{source}: config key pretrained.stride: {section['stride']} must be below window "
                         f"{section['window']} (the first token of a window is predicted from the one before it)")
    for entry in section["models"]:
        if section["contexts"] > entry["vocab"]:
            raise AuditError(f"{source}: config key pretrained.contexts: {section['contexts']} is above the "
                             f"vocabulary of {entry['name']} ({entry['vocab']}); lower it")


def describe(section: dict) -> str:
    """One line naming the suite, its sizes, seeds and the verdicts' checkpoint: the evidence
    column's design text (``audit.stats.sources.design_of``)."""
    sizes = ", ".join(f"{m['name']} (d = {m['d']})" for m in section["models"])
    seeds = section["seeds"]
    span = (f"{seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 1
            else ", ".join(map(str, seeds)))
    return (f"fixed: pretrained suite {section['suite']}: {sizes}; seeds {span} ({len(seeds)}); "
            f"checkpoint {final_revision(section)}; the suite's own seeds, none chosen here")
