"""The statistics tables: one registry entry per table, each naming how it is built and its guard.

``python -m audit stats`` (``audit.stats.cli``), ``rules/stats.smk`` and the guard read this list;
none keeps a copy (issue 53: the published tables' names had been written in three places and a
table's guard chosen by guessing from its column names). An entry that names neither a guard nor
an exemption saying why none applies cannot be made (``Table.__post_init__``), so no table
reaches a CSV unguarded by oversight.

Each entry:

- ``build``: ``Inputs -> DataFrame`` (``Inputs`` loads the runs table, config and side files
  once and caches the tables others are judged on);
- ``guard``: ``(table, Inputs) -> DataFrame``, the guard of ``audit.stats.guard`` that reaches its
  rows (a verdict relabelled ``not_informative``, a note in front of a row without a verdict),
  or ``None`` with ``exempt``: why none of the guard's checks applies (no runs stand behind it,
  or it is guarded on its own runs while it is built);
- ``source``: ``runs`` (needs ``--runs``), ``published`` (the papers' summaries) or ``evidence``
  (the config's further runs tables); ``default``: written when no ``--table`` is named;
- ``empty``: ``Inputs -> str``, why the table can have no rows (the ``note:`` the verb prints).

This module imports the statistics lazily (Snakemake reads ``names`` while parsing the Snakefile).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from audit.errors import AuditError

SOURCES = ("runs", "published", "evidence")


@dataclass
class Inputs:
    """What the tables read, loaded once: the parsed command line of the stats verb."""

    config: dict
    settings: Any
    source: str
    runs: Any = None
    baselines: Any = None
    sentences: Any = None
    pairs_path: str | None = None
    summaries: str | None = None
    cache: dict = field(default_factory=dict)

    def once(self, key: str, make: Callable[[], Any]):
        """``make()`` the first time ``key`` is asked for; the same object after."""
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]


@dataclass(frozen=True)
class Table:
    """One statistics table (module docstring)."""

    name: str
    build: Callable[[Inputs], Any]
    guard: Callable[[Any, Inputs], Any] | None
    empty: Callable[[Inputs], str]
    source: str = "runs"
    default: bool = True
    exempt: str = ""

    def __post_init__(self):
        if self.source not in SOURCES:
            raise AuditError(f"stats table registry: {self.name}: source {self.source!r} not one of {SOURCES}")
        if (self.guard is None) == (not self.exempt):
            raise AuditError(f"stats table registry: {self.name}: name its guard, or an exemption saying why "
                             f"none applies (not both)")

    def make(self, inputs: Inputs):
        """The table, guarded (or exempt), and why it is empty ('' when it has rows)."""
        table = self.build(inputs)
        if self.guard is not None:
            table = self.guard(table, inputs)
        return table, (self.empty(inputs) if table.empty else "")


# ---------------------------------------------------------------- builders (imports inside)
def _comparisons(i: Inputs):
    from audit.stats import comparisons
    return i.once("comparisons", lambda: comparisons.comparisons_table(i.runs, i.config, i.settings, i.source,
                                                                       i.sentences))


def _correlations(i: Inputs):
    from audit.stats import correlations
    return i.once("correlations", lambda: correlations.correlations_table(i.runs, i.config, i.settings, i.source))


def _wins(i: Inputs):
    from audit.stats import wordsim
    return wordsim.wins_table(i.runs)


def _diffs(i: Inputs):
    import pandas as pd

    from audit.stats import wordsim
    from audit.stats.io import PAIR_COLUMNS, load_pairs
    if not i.pairs_path:
        return wordsim.diffs_table(pd.DataFrame(columns=list(PAIR_COLUMNS)), i.settings)
    return wordsim.diffs_table(load_pairs(i.pairs_path), i.settings, i.runs)


def _claims(i: Inputs):
    from audit.stats import claims
    # judged on the unguarded comparisons and correlations, then guarded as a claims table
    return claims.claims_table(i.runs, i.config, i.settings, _comparisons(i), _correlations(i), i.source,
                               i.sentences)


def _evidence(i: Inputs):
    from audit.stats import sources
    return sources.evidence_claims_table(i.config, i.settings, i.baselines, i.source)


def _published(name: str) -> Callable[[Inputs], Any]:
    def build(i: Inputs):
        from audit.stats.published import evidence
        return i.once("published", lambda: evidence.published_tables(i.config, i.settings, i.summaries,
                                                                     i.source))[name]
    return build


# ---------------------------------------------------------------- guards (audit.stats.guard)
def _guard_comparisons(table, i: Inputs):
    from audit.stats import guard
    return guard.guard_comparisons(table, i.runs, i.baselines, i.settings.max_failed_share)


def _guard_claims(table, i: Inputs):
    from audit.stats import guard
    return guard.guard_claims(table, i.runs, i.baselines, i.config, i.settings.max_failed_share)


def _guard_correlations(table, i: Inputs):
    from audit.stats import guard
    return guard.guard_correlations(table, i.runs, i.baselines, i.config, i.settings.max_failed_share)


def _guard_wins(table, i: Inputs):
    from audit.stats import guard
    return guard.guard_wins(table, i.runs, i.baselines, i.settings.max_failed_share)


def _because(text: str) -> Callable[[Inputs], str]:
    return lambda i: text


def _no_pairs(i: Inputs) -> str:
    return f"{i.pairs_path} has no usable word pairs" if i.pairs_path else "no --wordsim-pairs table was given"


_SUMMARIES = "the papers' printed mean, SD and n per arm: no runs whose status, test perplexity or vocabulary the guard could check"
TABLES: tuple[Table, ...] = (
    Table("comparisons", _comparisons, _guard_comparisons, _because("the study config declares no comparisons")),
    Table("correlations", _correlations, _guard_correlations, _because("the study config declares no correlations")),
    Table("wordsim_wins", _wins, _guard_wins, lambda i: "the runs table has no wordsim_<benchmark> column"),
    Table("wordsim_diffs", _diffs, _guard_comparisons, _no_pairs),
    Table("claims", _claims, _guard_claims, _because("no claims in the study config or its claims_file")),
    Table("evidence_claims", _evidence, None, _because("the study config names no further runs table (evidence:)"),
          source="evidence", default=False,
          exempt="guarded while it is built, each runs table against its own runs and baselines (audit.stats.sources)"),
    Table("published_comparisons", _published("published_comparisons"), None,
          _because("no printed p-value, declared family or claim comparison"), source="published",
          exempt=_SUMMARIES),
    Table("published_claims", _published("published_claims"), None,
          _because("no claim the published multi-seed numbers test"), source="published",
          exempt="judged on the published comparisons (the papers' printed numbers), not on runs"),
    Table("published_untestable", _published("published_untestable"), None,
          _because("every claim has published numbers with spread"), source="published",
          exempt="lists the claims the printed numbers cannot test: no p-value, no verdict"),
)
BY_NAME = {t.name: t for t in TABLES}


def names(source: str | None = None, default: bool | None = None) -> list[str]:
    """Table names in registry order, optionally of one source and/or default flag."""
    return [t.name for t in TABLES if (source is None or t.source == source)
            and (default is None or t.default == default)]


def table(name: str) -> Table:
    """The entry of ``name``; one line naming the known tables otherwise."""
    if name not in BY_NAME:
        raise AuditError(f"stats: unknown table {name!r}; known: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def guard_table(name: str, frame, runs, baselines, config: dict, max_failed_share: float | None = None):
    """Table ``name`` of the stats verb guarded by the guard its entry names; an exempt table as it
    is (one line naming the known tables for a name the registry does not hold)."""
    from audit.stats.io import Settings

    entry = table(name)
    if entry.guard is None:
        return frame
    settings = Settings() if max_failed_share is None else Settings(max_failed_share=max_failed_share)
    inputs = Inputs(config=config, settings=settings, source="guard", runs=runs, baselines=baselines)
    return entry.guard(frame, inputs)
