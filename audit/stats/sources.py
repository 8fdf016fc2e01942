"""The study's claims judged on further runs tables: one evidence source per ``evidence:`` entry.

A study config may name runs tables produced elsewhere (a GPU study's ``runs.csv``, a colleague's
runs)::

    evidence:
      - {name: gpu-ptb, runs: reports/paper-ptb/runs.csv, description: "paper-scale PTB, 10 seeds"}

Each is read with ``audit.stats.io.load_runs`` and judged with exactly this study's comparisons,
correlations and claims (``comparisons_table``, ``correlations_table``, ``claims_table``: the
same families, Holm corrections and settings, computed on that table alone, never pooled with
this study's runs), then guarded against this study's count baselines (``audit.stats.guard``: an arm
whose corpus, vocabulary size and test tokens match no baselines row is not informative), joined
by the baselines of the study that made the runs table when its audit lies beside it
(``sibling_baselines``): the default study's word runs, named as evidence of the subword study,
are guarded against their own unigram. The result is the claims table of every source stacked,
with the source's name in the first column ``evidence_source`` and how its seeds came in
``evidence_design`` (``design_of``: a group-sequential table's fixed-design verdicts are not
sequentially valid, and the page says so as it does for this study; a table that records no
design is marked "design unknown"). Where the per-sentence test NLL lies beside a runs table
(``sibling_sentences``: a pretrained suite's ``sentences.npz``, ``audit.pretrained.table``), its
comparisons and claims get the multi-bootstrap over seeds and test sentences
(``audit.stats.multiboot``; a claim with ``test: multibootstrap``), as this study's runs get it from
theirs.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from audit.evaluate.baselines import load_baselines
from audit.stats import claims, comparisons, correlations, guard, multiboot
from audit.stats.io import Settings, load_runs

# `source` of a claims row is the paper that made the claim: the runs table it was judged on is
# `evidence_source`
COLUMNS = ["evidence_source", "evidence_design"] + claims.COLUMNS
UNKNOWN_DESIGN = ("design unknown: the runs table does not record how its seeds came (made outside this "
                  "tool or before it recorded them), so its fixed-design tests may not be valid")


def design_of(runs: pd.DataFrame) -> str:
    """How a runs table's seeds came: its ``design`` column (``python -m audit collect --design``:
    'fixed: ...' or 'sequential: ...'), ``UNKNOWN_DESIGN`` when it has none or more than one."""
    values = set(runs["design"].dropna().astype(str)) - {""} if "design" in runs else set()
    return values.pop() if len(values) == 1 else UNKNOWN_DESIGN


def sibling_baselines(runs: str | Path) -> Path:
    """Where the baselines of the study that wrote the runs table ``runs`` lie: its audit's
    ``tables/baselines.csv`` beside ``reports/<study>/runs.csv`` (present or not)."""
    return Path(runs).parent / "tables" / "baselines.csv"


def sibling_sentences(runs: str | Path) -> Path:
    """Where the per-sentence test NLL of the runs table ``runs`` lies when its maker wrote it
    beside it (``python -m audit pretrained collect``: ``sentences.npz``; present or not). A
    trained study's lies under ``results/<study>/``, not here: its runs get no multi-bootstrap
    as evidence."""
    return Path(runs).parent / "sentences.npz"


def evidence_sentences(runs: str | Path) -> multiboot.Sentences | None:
    """The per-sentence test NLL beside the runs table ``runs`` (``sibling_sentences``), or None."""
    found = sibling_sentences(runs)
    return multiboot.load(found) if found.is_file() else None


def evidence_baselines(runs: str | Path, baselines: pd.DataFrame | None) -> pd.DataFrame | None:
    """This study's baselines joined by those beside the runs table ``runs``, when there are any.

    None stays None (no guard asked for). A vocabulary both tables hold must agree, or the guard
    finds no single unigram for it and says so.
    """
    sibling = sibling_baselines(runs)
    if baselines is None or not sibling.is_file():
        return baselines
    if baselines.empty:   # a study with no corpus of its own: its baselines table is the header alone
        return load_baselines(sibling)
    return pd.concat([baselines, load_baselines(sibling)], ignore_index=True).drop_duplicates()


def evidence_claims_table(config: dict, settings: Settings, baselines: pd.DataFrame | None,
                          source: str = "config") -> pd.DataFrame:
    """The claims of ``config`` on every runs table of its ``evidence:`` list, each guarded by
    ``baselines`` and the baselines beside it (``evidence_baselines``).

    Raises:
        AuditError: a runs table that is missing or malformed (one line naming the file), or a
            comparison metric it lacks.
    """
    tables = []
    for entry in config.get("evidence") or []:
        runs = load_runs(entry["runs"])
        sentences = evidence_sentences(entry["runs"])   # the final checkpoint's, for a suite: these runs'
        table = judge_evidence(runs, entry, config, settings, baselines, source, sentences)
        tables.append(table.assign(evidence_source=entry["name"], evidence_design=design_of(runs))[COLUMNS])
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=COLUMNS)


def judge_evidence(runs: pd.DataFrame, entry: dict, config: dict, settings: Settings,
                   baselines: pd.DataFrame | None, source: str = "config",
                   sentences: multiboot.Sentences | None = None) -> pd.DataFrame:
    """The guarded claims table of one ``evidence:`` entry's runs: ``runs`` is its runs table, or
    the same runs as one of its checkpoints measured them (``audit.stats.checkpoints``).
    ``sentences``: the per-sentence test NLL of exactly these runs, for the multi-bootstrap (never
    the final checkpoint's beside an earlier checkpoint's runs: its sums would not be theirs)."""
    label = f"{source}: evidence {entry['name']!r}"
    comp = comparisons.comparisons_table(runs, config, settings, label, sentences)
    corr = correlations.correlations_table(runs, config, settings, label)
    table = claims.claims_table(runs, config, settings, comp, corr, source, sentences)
    own = evidence_baselines(entry["runs"], baselines)
    return guard.guard_claims(table, runs, own, config, settings.max_failed_share)
