"""Builders of the report tables and figures that ``audit.report.registry`` lists.

A builder takes a ``Sources`` (the inputs given on the command line, loaded on demand) and returns
a ``pandas.DataFrame`` (a table) or SVG text (a figure). Snakemake imports this module at parse
time (through the registry), so it imports only the standard library at the top: each builder
imports its implementation (``summary``, ``checks``, ``grid``, ``figures``) inside.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from audit.errors import AuditError


class Sources:
    """What a builder reads: the input paths given on the command line, loaded on demand.

    Args:
        paths: input key (of ``INPUTS``) -> path, or None when not given.
        run_dirs: run folders ``<corpus>/<head>/<seed>``.
        options: option name (of ``OPTIONS``) -> value, or None when not given.
    """

    def __init__(self, paths: dict[str, str | None], run_dirs: list[str] | None = None,
                 options: dict[str, Any] | None = None):
        self.paths = dict(paths)
        self.run_dirs = list(run_dirs or [])
        self.options = dict(options or {})

    def path(self, key: str) -> str | None:
        return self.paths.get(key)

    def option(self, name: str, default: Any = None) -> Any:
        value = self.options.get(name)
        return default if value is None else value

    def runs(self):
        """The runs table (``audit.stats.io.load_runs``)."""
        from audit.stats.io import load_runs

        if not self.path("runs"):
            raise AuditError("the runs table was not given (--runs)")
        return load_runs(self.path("runs"))

    def csv(self, key: str):
        """The CSV table of input ``key``; None when not given or empty (the builder says why)."""
        import pandas as pd

        path = self.path(key)
        if not path:
            return None
        if not Path(path).is_file():
            raise AuditError(f"table not found: {path}")
        table = pd.read_csv(path)
        return table if len(table) else None

    def yaml(self, key: str) -> dict:
        """The YAML mapping of input ``key``; {} when not given or empty."""
        import yaml

        path = self.path(key)
        return (yaml.safe_load(Path(path).read_text()) or {}) if path else {}

    def spectra(self, key: str = "log_p_sv") -> dict:
        """(corpus, head) -> singular-value arrays of that head's runs, read from each run folder's
        ``spectrum.npz`` in (corpus, head, seed) order; runs whose file lacks ``key`` (failed
        runs) are skipped."""
        import numpy as np

        def order(p: Path):
            return p.parent.parent.name, p.parent.name, int(p.name) if p.name.isdigit() else 0

        curves: dict[tuple[str, str], list] = {}
        for run_dir in sorted(map(Path, self.run_dirs), key=order):
            path = run_dir / "spectrum.npz"
            if not path.is_file():
                raise AuditError(f"missing {path}: the run was not evaluated")
            with np.load(path) as data:
                if key in data.files and data[key].size:
                    curves.setdefault((run_dir.parent.parent.name, run_dir.parent.name), []).append(data[key])
        return curves


def study_level(src: Sources) -> float:
    """The study's confidence level, 1 - ``stats.alpha`` of the statistics config (--config; the
    schema's default without one): the level of every interval a report table or figure draws,
    as ``audit.stats`` uses it for the comparisons and correlations."""
    from audit.stats.io import Settings

    return 1 - Settings.from_config(src.yaml("stats_config").get("stats"), str(src.path("stats_config"))).alpha


def results(src: Sources):
    from audit.report.summary import results_table

    return results_table(src.runs(), study_level(src))


def ranks(src: Sources):
    from audit.report.summary import ranks_table

    return ranks_table(src.runs())


def wordsim_rho(src: Sources):
    from audit.report.summary import wordsim_rho_table

    return wordsim_rho_table(src.runs(), study_level(src))


def wordsim_coverage(src: Sources):
    from audit.report.summary import coverage_table

    return coverage_table(src.run_dirs)


def topk(src: Sources):
    from audit.report.summary import topk_table

    return topk_table(src.run_dirs)


def warnings(src: Sources):
    from audit.report.checks import find_warnings

    return find_warnings(src.runs(), src.yaml("stats_config"), src.csv("comparisons"), src.csv("correlations"))


def cross_scale(src: Sources):
    """The verdict matrix (audit.report.scales): published, this study, each further runs table,
    each per-size claim under its base claim (audit.report.groups)."""
    from audit.evaluate.baselines import load_baselines
    from audit.report.scales import PUBLISHED_SCALE, cross_scale_table, evidence_scale, runs_scale
    from audit.stats.io import Settings, load_runs
    from audit.stats.sources import design_of

    baselines = load_baselines(src.path("baselines")) if src.path("baselines") else None
    config = src.yaml("stats_config")
    share = Settings.from_config(config.get("stats"), str(src.path("stats_config"))).max_failed_share
    sources = [("published", src.csv("published_claims"), PUBLISHED_SCALE, "pub-claim-")]
    if src.path("runs"):  # a study of the published record alone trains nothing
        sources.append(("this study", src.csv("claims"), runs_scale(src.runs(), baselines, share), "claim-",
                        design_of(src.runs())))
    further = src.csv("evidence_claims")
    for entry in config.get("evidence") or []:
        claims = further[further["evidence_source"] == entry["name"]] if further is not None else None
        runs = load_runs(entry["runs"])
        sources.append((entry["name"], claims, evidence_scale(entry, runs, baselines, share), "", design_of(runs)))
    return cross_scale_table(sources, config.get("claims"))


def sequential(src: Sources):
    """The group-sequential history (audit.stats.sequential.history.history_table) of the decisions
    file, each row with the guard's reason where an arm of it is not informative (audit.stats.guard)."""
    import json

    from audit.evaluate.baselines import load_baselines
    from audit.stats.guard import guard_history
    from audit.stats.io import Settings
    from audit.stats.sequential.history import history_table

    path = src.path("sequential")
    if not path or not Path(path).is_file():
        raise AuditError(f"the sequential decisions file was not found: {path}")
    baselines = load_baselines(src.path("baselines")) if src.path("baselines") else None
    settings = Settings.from_config(src.yaml("stats_config").get("stats"), str(src.path("stats_config")))
    return guard_history(history_table(json.loads(Path(path).read_text())), src.runs(), baselines,
                         settings.max_failed_share)


def grid(src: Sources):
    from audit.report.grid import grid_table

    return grid_table(src.runs())


def rank_decay(src: Sources) -> str:
    from audit.report.figures import rank_decay

    return rank_decay(src.spectra())


def learning_curves(src: Sources) -> str:
    from audit.report.curves import learning_curves as draw, read_curves

    return draw(read_curves(src.run_dirs))


def saturation(src: Sources) -> str:
    from audit.report.saturation import read_saturation, saturation as draw

    return draw(read_saturation(src.run_dirs))


def rank_vs_ppl(src: Sources) -> str:
    from audit.report.figures import rank_vs_metric

    return rank_vs_metric(src.runs(), src.csv("correlations"), src.option("x", "press_rank"),
                          src.option("metric", "test_ppl"))


def strip(src: Sources) -> str:
    from audit.report.figures import seed_strip

    return seed_strip(src.runs(), src.option("metric", "test_ppl"), study_level(src))


def jacobian(src: Sources) -> str:
    from audit.report.figures import jacobian_spectra

    return jacobian_spectra(src.spectra("jacobian_mean_normalised_sv"), src.option("threshold"))


def wordsim_wins(src: Sources) -> str:
    from audit.report.figures import wins_heatmap

    return wins_heatmap(src.csv("wins"))


def forest(key: str, title: str) -> Callable[[Sources], str]:
    """The forest plot (audit.report.forest) of the comparisons table of input ``key``."""
    def build(src: Sources) -> str:
        from audit.report.forest import forest as draw

        return draw(src.csv(key), title)

    build.__name__ = f"forest_{key}"
    return build


def grid_figure(name: str) -> Callable[[Sources], str]:
    def build(src: Sources) -> str:
        from audit.report import grid

        return getattr(grid, name)(src.runs())

    build.__name__ = name
    return build


def _trajectory_inputs(src: Sources):
    """What the trajectory tables read (issue 56): the runs table, the statistics config and its
    settings, the runs' per-epoch logs (--run-dirs) and a group-sequential study's looks (--looks)."""
    from audit.stats.io import Settings, load_config
    from audit.stats.trajectory import read_epochs

    if not src.path("stats_config"):
        raise AuditError("the statistics config was not given (--config)")
    config = load_config(src.path("stats_config"))
    settings = Settings.from_config(config.get("stats"), str(src.path("stats_config")))
    looks = [int(n) for n in str(src.option("looks", "")).split(",") if n.strip()]
    return src.runs(), read_epochs(src.run_dirs), config, settings, looks


def trajectories(src: Sources):
    """Every traced verdict at every recorded budget (audit.stats.trajectory)."""
    from audit.evaluate.baselines import load_baselines
    from audit.stats.trajectory import trajectory_table

    runs, epochs, config, settings, looks = _trajectory_inputs(src)
    baselines = load_baselines(src.path("baselines")) if src.path("baselines") else None
    return trajectory_table(runs, epochs, config, settings, baselines, str(src.path("stats_config")), looks)


def trajectory_marks(src: Sources):
    """Held, changed or still moving, per traced verdict (audit.stats.trajectory_marks)."""
    import pandas as pd

    from audit.stats.trajectory import COLUMNS, best_so_far
    from audit.stats.trajectory_marks import marks_table

    runs, epochs, config, settings, looks = _trajectory_inputs(src)
    table = src.csv("trajectories")
    table = pd.DataFrame(columns=COLUMNS) if table is None else table
    return marks_table(table, best_so_far(epochs), runs, config, settings, looks)


def _stats_settings(src: Sources):
    """The statistics config and its settings (``--config``), for a table with no runs of its own."""
    from audit.stats.io import Settings, load_config

    if not src.path("stats_config"):
        raise AuditError("the statistics config was not given (--config)")
    config = load_config(src.path("stats_config"))
    return config, Settings.from_config(config.get("stats"), str(src.path("stats_config")))


def checkpoint_trajectories(src: Sources):
    """Each suite's claims at every checkpoint: the evidence runs tables with a checkpoints.csv
    beside them (audit.stats.checkpoints)."""
    from audit.evaluate.baselines import load_baselines
    from audit.stats.checkpoints import checkpoint_trajectories as table

    config, settings = _stats_settings(src)
    baselines = load_baselines(src.path("baselines")) if src.path("baselines") else None
    return table(config, settings, baselines, str(src.path("stats_config")))


def checkpoint_marks(src: Sources):
    """Held, changed or still moving over a suite's checkpoints (audit.stats.checkpoints)."""
    import pandas as pd

    from audit.stats.checkpoints import COLUMNS, checkpoint_marks as marks

    config, settings = _stats_settings(src)
    table = src.csv("checkpoint_trajectories")
    return marks(pd.DataFrame(columns=COLUMNS) if table is None else table, config, settings)


def trajectories_figure(src: Sources) -> str:
    from audit.report.trajectories import trajectory_figure
    from audit.stats.trajectory import best_so_far, read_epochs

    return trajectory_figure(src.csv("trajectories"), best_so_far(read_epochs(src.run_dirs)), src.runs(),
                             src.csv("trajectory_marks"))
