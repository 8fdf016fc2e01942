"""The one list of report tables and figures: what each is, what it reads, when a study draws it.

Both ``rules/report.smk`` (one Snakemake rule per entry, ``report_table_<name>`` or
``report_figure_<name>``) and ``python -m audit report table|figure`` (``audit.report.cli``) read
``REGISTRY``; neither keeps a list of its own. Snakemake imports this module while it parses the
Snakefile, so it imports only the standard library and ``audit.report.builders`` (the builder
functions, which import what they need inside).

Each entry is an ``Output``:

- ``name``, ``kind``: a ``table`` is written to ``reports/<study>/tables/<name>.csv`` (the builder
  returns a ``pandas.DataFrame``), a ``figure`` to ``reports/<study>/figures/<name>.svg`` (the
  builder returns SVG text).
- ``inputs``: keys of ``INPUTS``, the files its rule needs (the runs table, the statistics config
  and tables, or per-run files such as ``spectrum.npz``, which reach the CLI as ``--run-dirs``).
- ``options``: ``config -> {option: value}`` of extra CLI options (keys of ``OPTIONS``), e.g. the
  Jacobian threshold from the study config.
- ``when``: ``config -> bool``, whether the study draws it (e.g. the Jacobian figure only when
  ``evaluate.jacobian.contexts > 0``); the page assembles exactly the entries whose ``when`` holds.
- ``caption``: the reStructuredText caption under ``captions/`` (``<kind>_<name>.rst`` by default)
  that ``snakemake --report`` shows.
- ``builder``: ``Sources -> DataFrame | str``. ``Sources`` hands it the loaded inputs.
- ``made_by``: ``report`` (the default: ``rules/report.smk`` generates its rule and the CLI builds
  it); ``stats`` and ``synthetic`` entries are made by ``rules/stats.smk`` and
  ``rules/synthetic.smk`` and are listed here only so that the page knows every table.

How to add a table or figure
----------------------------
1. Write the builder in ``audit/report/builders.py``: ``def my_table(src: Sources) -> pd.DataFrame``
   that imports its implementation inside the function (keep both modules torch- and pandas-free
   at import) and reads its inputs through ``src.runs()``, ``src.csv(key)``, ``src.yaml(key)``,
   ``src.run_dirs``, ``src.spectra(...)`` or ``src.path(key)``; options through
   ``src.option(name, default)``.
2. Add one ``Output("my_table", "table", b.my_table, inputs, ...)`` to ``REGISTRY`` below, with
   its options and condition (``when``).
3. Write its caption ``report/<kind>_<name>.rst``.
A new input file is one line in ``INPUTS`` (its CLI flag and path); a new option one line in
``OPTIONS``. Nothing else changes: the rule, the CLI choice and the page's input list follow, and
``tests/report/test_registry.py`` checks the entry (caption exists, inputs and options known).
The page (``audit.report.render``) shows a table or figure only in a section that reads it by name.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Callable

from audit.errors import AuditError
from audit.report import builders as b
from audit.report.builders import Sources

KINDS = {"table": ("tables", "csv"), "figure": ("figures", "svg")}
# The shell command of every generated report rule (rules/report.smk); params from the entry.
SHELL = "python -m audit report {params.kind} --name {params.name} {params.arguments} --out {output} > {log} 2>&1"
MAKERS = ("report", "stats", "synthetic", "published", "baselines")


@dataclass(frozen=True)
class Input:
    """A file a report rule reads and the CLI flag that passes it.

    ``path`` is a template with ``{reports}`` (``reports/<study>``) and ``{results}``
    (``results/<study>``); for ``per_run`` inputs it is a file name inside every run folder, and the
    CLI gets the run folders (``--run-dirs``). ``required``: the CLI refuses to build without it.
    """

    flag: str
    path: str
    per_run: bool = False
    required: bool = False
    help: str = ""


INPUTS = {
    "runs": Input("--runs", "{reports}/runs.csv", required=True, help="runs table CSV"),
    "stats_config": Input("--config", "{results}/stats_config.yaml",
                          help="statistics config YAML (stats, comparisons)"),
    "comparisons": Input("--comparisons", "{reports}/tables/comparisons.csv", help="comparisons.csv"),
    "correlations": Input("--correlations", "{reports}/tables/correlations.csv", help="correlations.csv"),
    "wins": Input("--wins", "{reports}/tables/wordsim_wins.csv", help="wordsim_wins.csv"),
    "eval": Input("--run-dirs", "eval.json", per_run=True),
    "spectrum": Input("--run-dirs", "spectrum.npz", per_run=True),
    "topk": Input("--run-dirs", "topk.csv", per_run=True),
    "metrics": Input("--run-dirs", "metrics.json", per_run=True),
    "sequential": Input("--sequential", "{results}/sequential/decisions.json",
                        help="decisions.json of a sequential study (rules/sequential.smk)"),
    "claims": Input("--claims", "{reports}/tables/claims.csv", help="claims.csv"),
    "published_comparisons": Input("--published-comparisons", "{reports}/tables/published_comparisons.csv",
                                   help="published_comparisons.csv"),
    "published_claims": Input("--published-claims", "{reports}/tables/published_claims.csv",
                              help="published_claims.csv"),
    "evidence_claims": Input("--evidence-claims", "{reports}/tables/evidence_claims.csv",
                             help="evidence_claims.csv (the config's further runs tables)"),
    "baselines": Input("--baselines", "{reports}/tables/baselines.csv", help="baselines.csv"),
    "trajectories": Input("--trajectories", "{reports}/tables/trajectories.csv", help="trajectories.csv"),
    "trajectory_marks": Input("--trajectory-marks", "{reports}/tables/trajectory_marks.csv",
                              help="trajectory_marks.csv"),
    "checkpoint_trajectories": Input("--checkpoint-trajectories", "{reports}/tables/checkpoint_trajectories.csv",
                                     help="checkpoint_trajectories.csv"),
}
RUN_DIRS_FLAG = "--run-dirs"  # every per-run input reaches the CLI as the run folders


@dataclass(frozen=True)
class Option:
    """An extra CLI option of ``report table|figure`` (``--<name>``); ``None`` when not given."""

    type: Callable[[str], Any] = str
    help: str = ""


OPTIONS = {
    "metric": Option(str, "y column (strip, rank_vs_ppl); default test_ppl"),
    "x": Option(str, "x column of rank_vs_ppl; default press_rank"),
    "threshold": Option(float, "degeneracy threshold drawn on the jacobian figure"),
    "looks": Option(str, "a group-sequential study's seeds per arm at each look, e.g. 4,7,10 (trajectories)"),
}


def _no_options(config: dict) -> dict:
    return {}


def always(config: dict) -> bool:
    return True


def has_runs(config: dict) -> bool:
    """The study trains language models: at least one (corpus, head, seed)."""
    return bool(config["data"]["corpora"] and config["heads"] and config["seeds"])


def jacobian_on(config: dict) -> bool:
    return has_runs(config) and bool(config["evaluate"]["jacobian"]["contexts"])


def two_heads(config: dict) -> bool:
    """Head-vs-head word-similarity wins need two heads."""
    return has_runs(config) and len(config["heads"]) >= 2


def grid_points(config: dict) -> list[dict]:
    """Option values of every arm that is a point of an expanded grid (only those carry
    ``grid_point``)."""
    return [entry["grid_point"] for entry in config["heads"] if entry.get("grid_point")]


def has_grid(config: dict) -> bool:
    return bool(grid_points(config))


def has_grid_pairs(config: dict) -> bool:
    """Heatmaps need a grid over exactly two options."""
    return any(len(point) == 2 for point in grid_points(config))


def sequential_design(config: dict) -> bool:
    """The study schedules its seeds group-sequentially (a ``seeds:`` mapping)."""
    return has_runs(config) and isinstance(config["seeds"], dict)


def look_sizes(config: dict) -> dict:
    """The trajectories' option: a group-sequential study's seeds per arm at each look (each look's
    runs are traced), none for a fixed design."""
    if not sequential_design(config):
        return {}
    from audit.stats.sequential.schedule import stage_sizes   # torch-free, read when the rule is made

    return {"looks": ",".join(str(n) for n in stage_sizes(config["seeds"]))}


def has_published(config: dict) -> bool:
    """The study audits the published record (a ``published:`` section; configs/published.yaml)."""
    return config.get("published") is not None


def has_evidence(config: dict) -> bool:
    """The study names further runs tables (``evidence:``) to judge its claims on, whether or
    not it trains runs of its own (configs/pythia.yaml judges a pretrained suite's runs alone)."""
    return bool(config.get("evidence"))


def cross_scale_inputs(config: dict) -> tuple[str, ...]:
    """The cross-scale table's inputs that exist only in some studies: this study's runs and
    claims (a study that trains), the published claims, the further runs tables' claims, and the
    baselines whenever runs are judged (the evidence columns' scale reads them with the ones
    beside each runs table, as their guard did)."""
    return (("runs", "claims") if has_runs(config) else ()) + (
        ("baselines",) if has_runs(config) or has_evidence(config) else ()) + (
        ("published_claims",) if has_published(config) else ()) + (
        ("evidence_claims",) if has_evidence(config) else ())


def has_verdicts(config: dict) -> bool:
    """The study has claims to put in the verdict matrix: its own runs', the papers' or a
    further runs table's."""
    return has_runs(config) or has_published(config) or has_evidence(config)


def _no_inputs(config: dict) -> tuple[str, ...]:
    return ()


def has_synthetic(config: dict) -> bool:
    """The study has a ``synthetic:`` section with at least one fit."""
    if config.get("synthetic") is None:
        return False
    from audit.synthetic.plan import fit_jobs  # torch-free

    return bool(fit_jobs(config))


@dataclass(frozen=True)
class Output:
    """One report table or figure (see the module docstring)."""

    name: str
    kind: str
    builder: Callable[[Sources], Any] | None = None
    inputs: tuple[str, ...] = ()
    options: Callable[[dict], dict] = _no_options
    when: Callable[[dict], bool] = has_runs
    caption: str | None = None
    made_by: str = "report"
    # config -> further keys of INPUTS, for inputs that only some studies make (never per-run)
    extra_inputs: Callable[[dict], tuple[str, ...]] = _no_inputs

    def path(self, reports: str) -> str:
        """The file this entry writes under ``reports/<study>``."""
        folder, ext = KINDS[self.kind]
        return f"{reports}/{folder}/{self.name}.{ext}"

    @property
    def rule(self) -> str:
        """The Snakemake rule that makes it."""
        return {"report": f"report_{self.kind}_{self.name}", "stats": f"stats_{self.name}",
                "synthetic": f"synthetic_{self.kind}", "published": "stats_published",
                "baselines": "baselines"}[self.made_by]

    @property
    def caption_file(self) -> str | None:
        """File name under ``captions/``; None for entries whose rule registers no caption."""
        if self.caption is not None:
            return self.caption or None
        return f"{self.kind}_{self.name}.rst"

    def input_keys(self, config: dict | None = None) -> tuple[str, ...]:
        """``inputs`` and, given the study config, its ``extra_inputs``."""
        return self.inputs + (tuple(self.extra_inputs(config)) if config is not None else ())

    def input_paths(self, reports: str, results: str, run_dirs: list[str],
                    config: dict | None = None) -> dict[str, str | list[str]]:
        """Snakemake ``input:`` of the rule: key -> path, or per-run paths (the extra inputs
        only when the study config is given)."""
        paths: dict[str, str | list[str]] = {}
        for key in self.input_keys(config):
            spec = INPUTS[key]
            if spec.per_run:
                paths[key] = [f"{d}/{spec.path}" for d in run_dirs]
            else:
                paths[key] = spec.path.format(reports=reports, results=results)
        return paths

    def arguments(self, config: dict, reports: str, results: str, run_dirs: list[str]) -> str:
        """The CLI arguments of its rule, shell-quoted: the run folders (for per-run inputs), one
        flag per other input and the options, e.g. ``--runs reports/s/runs.csv --metric test_ppl``.

        Rules generated in a loop cannot name the entry in ``shell:`` (Snakemake evaluates that
        expression when the job runs, after the loop has moved on), so the rule passes this text
        as a parameter fixed when the rule is defined and uses the constant ``SHELL``.
        """
        parts = []
        if self.per_run:
            parts += [RUN_DIRS_FLAG, *map(shlex.quote, run_dirs)]
        paths = self.input_paths(reports, results, run_dirs, config)
        for key in self.input_keys(config):
            if not INPUTS[key].per_run:
                parts += [INPUTS[key].flag, shlex.quote(paths[key])]
        for name, value in self.options(config).items():
            parts += [f"--{name}", shlex.quote(str(value))]
        return " ".join(parts)

    @property
    def per_run(self) -> bool:
        """Whether it reads files inside the run folders (then its rule passes --run-dirs)."""
        return any(INPUTS[k].per_run for k in self.inputs)


_STATS = dict(made_by="stats", caption="table_stats.rst")
_SYNTHETIC = dict(made_by="synthetic", caption="", when=has_synthetic)
# the published record (rules/stats.smk, rule stats_published: python -m audit stats --table published_*)
_PUBLISHED = dict(made_by="published", caption="table_published.rst", when=has_published)

# In page order within each kind.
REGISTRY: tuple[Output, ...] = (
    # the verdict matrix: every claim, one column per evidence source with its scale; top of the page
    Output("cross_scale", "table", b.cross_scale, ("stats_config",), when=has_verdicts,
           extra_inputs=cross_scale_inputs),
    # the published record, from the papers' own numbers (audit/stats/published/evidence.py); first on the page
    Output("published_comparisons", "table", **_PUBLISHED),
    Output("published_claims", "table", **_PUBLISHED),
    Output("published_untestable", "table", **_PUBLISHED),
    # unigram and add-k bigram perplexity per corpus and vocabulary (rules/stats.smk, rule baselines:
    # python -m audit baselines); the statistics read it for the guard (audit/stats/guard.py)
    Output("baselines", "table", made_by="baselines", caption="table_baselines.rst"),
    # statistics tables (rules/stats.smk, python -m audit stats)
    Output("comparisons", "table", **_STATS),
    Output("correlations", "table", **_STATS),
    Output("wordsim_wins", "table", **_STATS),
    Output("wordsim_diffs", "table", **_STATS),
    Output("claims", "table", **_STATS),
    Output("evidence_claims", "table", **{**_STATS, "when": has_evidence}),
    # report tables
    Output("results", "table", b.results, ("runs", "stats_config")),   # stats_config: the intervals' level
    Output("ranks", "table", b.ranks, ("runs",)),
    Output("wordsim_rho", "table", b.wordsim_rho, ("runs", "stats_config")),
    Output("wordsim_coverage", "table", b.wordsim_coverage, ("eval",)),
    Output("warnings", "table", b.warnings, ("runs", "stats_config", "comparisons", "correlations")),
    Output("topk", "table", b.topk, ("topk",)),
    # every verdict on a metric recorded per epoch, at every budget, from the runs' logs (issue 56)
    Output("trajectories", "table", b.trajectories, ("runs", "stats_config", "metrics", "baselines"),
           options=look_sizes),
    Output("trajectory_marks", "table", b.trajectory_marks, ("runs", "stats_config", "metrics", "trajectories"),
           options=look_sizes),
    # a suite's claims over its checkpoints (audit.stats.checkpoints): checkpoints.csv lies beside an
    # evidence runs table and is written with it, so evidence_claims orders the rule after it and reruns it
    Output("checkpoint_trajectories", "table", b.checkpoint_trajectories, ("stats_config", "baselines", "evidence_claims"),
           when=has_evidence),
    Output("checkpoint_marks", "table", b.checkpoint_marks, ("stats_config", "checkpoint_trajectories"),
           when=has_evidence),
    Output("grid", "table", b.grid, ("runs",), when=has_grid),
    Output("sequential", "table", b.sequential, ("sequential", "runs", "stats_config", "baselines"),
           when=sequential_design),
    # figures
    Output("rank_decay", "figure", b.rank_decay, ("spectrum",)),
    Output("learning_curves", "figure", b.learning_curves, ("metrics",), when=has_runs),
    Output("saturation", "figure", b.saturation, ("metrics",), when=has_runs),
    Output("rank_vs_ppl", "figure", b.rank_vs_ppl, ("runs", "correlations"),
           options=lambda config: {"x": "press_rank", "metric": "test_ppl"}),
    Output("strip", "figure", b.strip, ("runs", "stats_config"), options=lambda config: {"metric": "test_ppl"}),
    Output("trajectories", "figure", b.trajectories_figure, ("runs", "metrics", "trajectories", "trajectory_marks")),
    Output("jacobian", "figure", b.jacobian, ("spectrum",), when=jacobian_on,
           options=lambda config: {"threshold": config["evaluate"]["jacobian"]["threshold"]}),
    Output("wordsim_wins", "figure", b.wordsim_wins, ("wins",), when=two_heads),
    # a forest plot per comparison family: the study's comparisons, and the published record's
    Output("forest", "figure", b.forest("comparisons", "this study's comparisons"), ("comparisons",)),
    Output("published_forest", "figure", b.forest("published_comparisons", "the published record (papers' own numbers)"),
           ("published_comparisons",), when=has_published),
    Output("grid_rank_vs_ppl", "figure", b.grid_figure("grid_rank_vs_ppl"), ("runs",), when=has_grid),
    Output("grid_heatmaps", "figure", b.grid_figure("grid_heatmaps"), ("runs",), when=has_grid_pairs),
    Output("grid_lines", "figure", b.grid_figure("grid_lines"), ("runs",), when=has_grid),
    # the Dirichlet synthetic study (rules/synthetic.smk); its per-fit synthetic.csv is an
    # intermediate table the page does not show
    Output("synthetic_summary", "table", **_SYNTHETIC),
    Output("synthetic_mode_match", "figure", **_SYNTHETIC),
    Output("synthetic_kl", "figure", **_SYNTHETIC),
)


def entries(kind: str | None = None, made_by: str | None = None) -> list[Output]:
    """Registry entries, optionally of one kind and/or one maker, in registry order."""
    return [e for e in REGISTRY if (kind is None or e.kind == kind) and (made_by is None or e.made_by == made_by)]


def entry(kind: str, name: str) -> Output:
    """The entry of a report table or figure; AuditError naming the known ones otherwise."""
    for e in entries(kind, "report"):
        if e.name == name:
            return e
    known = ", ".join(e.name for e in entries(kind, "report"))
    raise AuditError(f"unknown report {kind} {name!r}; known: {known}")


def drawn(config: dict, kind: str | None = None, made_by: str | None = None) -> list[Output]:
    """The entries a (validated) study config draws, in registry order."""
    return [e for e in entries(kind, made_by) if e.when(config)]


def check() -> None:
    """Invariants of the registry itself (run by the tests and at import in rules/report.smk)."""
    seen = set()
    for e in REGISTRY:
        if e.kind not in KINDS or e.made_by not in MAKERS:
            raise AuditError(f"report registry: {e.name}: kind {e.kind!r} / made_by {e.made_by!r} unknown")
        if (e.kind, e.name) in seen:
            raise AuditError(f"report registry: {e.kind} {e.name} is listed twice")
        seen.add((e.kind, e.name))
        if (e.builder is None) != (e.made_by != "report"):
            raise AuditError(f"report registry: {e.name}: a builder exactly when made_by is 'report'")
        unknown = [k for k in e.inputs if k not in INPUTS]
        if unknown:
            raise AuditError(f"report registry: {e.name}: unknown inputs {unknown}; known: {', '.join(INPUTS)}")
