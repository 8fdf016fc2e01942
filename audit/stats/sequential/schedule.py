"""The seeds schedule of a study: a fixed list, or a group-sequential mapping.

A study's ``seeds:`` is either a list (the fixed design: every arm trains exactly these seeds)
or a mapping ``{initial, step, max, first, spending, gamma, futility_power, alpha}`` (the
group-sequential design, docs/statistics.md "Sequential design"). With the mapping, stage k
has n_k = min(initial + (k - 1) step, max) seeds per arm, and an arm with n seeds trains the
consecutive seeds ``first, first + 1, ..., first + n - 1`` (first = 1 by default): stage 1 of
``{initial: 5, step: 5, max: 30}`` trains seeds 1..5, an arm that continues gets 6..10 at stage
2, and so on. So the seeds of a smaller stage are always a prefix of a larger one's, and an arm
that stops keeps the runs it has.

Torch-, pandas- and scipy-free: ``rules/common.smk`` imports it while Snakemake parses.
"""

from __future__ import annotations

from audit.schema import schema_defaults

from audit.errors import AuditError


def is_sequential(config: dict) -> bool:
    """Whether the study declares a group-sequential seeds mapping."""
    return isinstance(config.get("seeds"), dict)


def stage_sizes(spec: dict) -> list[int]:
    """Planned seeds per arm after each stage: initial, initial + step, ..., capped at max
    (the same as ``audit.stats.sequential.boundaries.stage_sizes``)."""
    initial, step, maximum = int(spec["initial"]), int(spec["step"]), int(spec["max"])
    if not (initial >= 2 and step >= 1 and maximum >= initial):
        raise AuditError(f"seeds: need initial >= 2, step >= 1 and max >= initial; got "
                         f"initial={initial}, step={step}, max={maximum}")
    return sorted(set(list(range(initial, maximum, step)) + [maximum]))


def seeds_for(spec: dict, n: int) -> list[int]:
    """The seeds of an arm with ``n`` seeds: first, ..., first + n - 1."""
    first = int(spec.get("first", 1))
    return list(range(first, first + int(n)))


def planned_seeds(config: dict) -> list[int]:
    """Every seed a run of the study may have: the fixed list, or the ``max`` seeds of the
    sequential schedule (an arm trains a prefix of them)."""
    spec = config["seeds"]
    return seeds_for(spec, spec["max"]) if is_sequential(config) else list(spec)


def design_settings(config: dict) -> dict:
    """The decision settings of a sequential study, with ``alpha`` from ``stats.alpha`` when the
    schedule does not set its own."""
    spec = config["seeds"]
    alpha = spec.get("alpha")
    if alpha is None:
        alpha = (config.get("stats") or {}).get("alpha", schema_defaults("stats")["alpha"])
    return {"initial": int(spec["initial"]), "step": int(spec["step"]), "max": int(spec["max"]),
            "first": int(spec.get("first", 1)), "spending": spec.get("spending", "hsd"),
            "futility_power": float(spec.get("futility_power", 0.1)), "alpha": float(alpha),
            "gamma": float(spec.get("gamma", 0.0))}  # the schema's defaults (stopping.Design's too)


def progress_seeds(config: dict, arm_dir) -> list[int]:
    """Seeds of one arm to show progress for (``python -m audit progress``): the fixed list, or
    stage 1's seeds plus every later seed of the schedule whose run folder exists (a seed the
    interim analyses gave the arm)."""
    from pathlib import Path

    if not is_sequential(config):
        return list(config["seeds"])
    spec = config["seeds"]
    return [s for i, s in enumerate(planned_seeds(config))
            if i < int(spec["initial"]) or (Path(arm_dir) / str(s)).is_dir()]


def design_text(config: dict) -> str:
    """How the study's seeds came, as the runs table records it (its ``design`` column, read by
    the verdict matrix for the runs tables named under ``evidence:``): 'fixed: 10 seeds per arm',
    or 'sequential: looks at 4, 7, 10 seeds per arm (initial 4, step 3, max 10)'."""
    spec = config["seeds"]
    if not is_sequential(config):
        return f"fixed: {len(list(spec))} seeds per arm"
    sizes = ", ".join(map(str, stage_sizes(spec)))
    return (f"sequential: looks at {sizes} seeds per arm (initial {int(spec['initial'])}, step {int(spec['step'])}, "
            f"max {int(spec['max'])})")
