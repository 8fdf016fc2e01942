"""Load and validate the inputs of the statistics verb: runs table, study config, word pairs.

Every problem is reported as one ``AuditError`` line naming the file and the column or key,
so a malformed input never surfaces as a pandas traceback. Tables are written atomically
(temporary file in the target directory, then ``os.replace``), so a failed run leaves either
the previous file or none, never half a table.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from audit.config import check_section, check_stats_config, read_claims_file
from audit.schema import schema_defaults
from audit.errors import AuditError
from audit.files import write_table  # noqa: F401 (the stats modules write their tables through io)
from audit.stats.decision import Gate

STATUSES = ("ok", "failed")
RUN_KEY = ("corpus", "head", "seed")
CHECKPOINT_KEY = RUN_KEY + ("step",)   # a suite's checkpoints.csv (audit.stats.checkpoints)
PAIR_COLUMNS = ("corpus", "head", "seed", "benchmark", "word1", "word2", "gold", "cosine")
# non-metric columns of the runs table; everything else must be numeric
# text columns of a runs table; every other column must be numeric (the notes say why a
# measurement of the evaluate verb is absent: audit/evaluate/debate.py, run.py)
TEXT_COLUMNS = ("study", "corpus", "head", "seed", "status", "error", "design", "arm_group", "body", "argmax_note",
                "gradient_share_note", "hidden_gap_note", "f_logits_note", "output_spectrum_note",
                "revision", "suite")   # a pretrained checkpoint's revision and suite (audit/pretrained)


_STATS = schema_defaults("stats")   # configs/schema.yaml $defs/stats: the one place for these defaults
# stats.trajectory: x-default values, applied here and never written into a stats config
_TRAJECTORY = schema_defaults("stats_trajectory", unfilled=True)


@dataclass(frozen=True)
class Settings:
    """The ``stats:`` section of a study config; defaults and bounds: ``$defs/stats`` of the schema."""

    min_seeds: int = _STATS["min_seeds"]                      # fewer ok runs per arm than this: no verdict
    alpha: float = _STATS["alpha"]                            # test level; CIs are at 1 - alpha
    bootstrap_resamples: int = _STATS["bootstrap_resamples"]  # bootstrap resamples and permutations per row
    bootstrap_seed: int = _STATS["bootstrap_seed"]            # each row's Generator is default_rng(bootstrap_seed)
    power_target: float = _STATS["power_target"]             # power the "seeds needed" column solves for
    converged_gain: float = _STATS["converged_gain"]         # median last-epoch valid gain above it: far from converged
    max_failed_share: float = _STATS["max_failed_share"]     # more of an arm's planned runs failed: not informative
    held_share: float = _TRAJECTORY["held_share"]            # stats.trajectory.held_share: "held" over this last share

    @classmethod
    def from_config(cls, section: dict | None, source: str = "config") -> "Settings":
        """Build settings from a ``stats:`` mapping checked against the schema (None: all defaults).

        Raises:
            AuditError: one line naming ``source`` and the key (unknown key, value out of range).
        """
        section = check_section("stats", section, source)
        trajectory = section.pop("trajectory", None) or {}   # nested in YAML, one field here
        return cls(**{k: (int(v) if k in ("min_seeds", "bootstrap_resamples", "bootstrap_seed")
                          else float(v)) for k, v in section.items()},
                   **{k: float(v) for k, v in trajectory.items()})


def load_runs(path: str | os.PathLike, key: tuple[str, ...] = RUN_KEY) -> pd.DataFrame:
    """Read and validate a runs table.

    Args:
        path: CSV with at least ``head`` and ``seed``; ``corpus`` (default ``'all'``) and
            ``status`` (``ok`` or ``failed`` in every row; without the column every run is
            ``ok``) are optional; every other column except ``study`` and
            ``error`` must be numeric (empty cells are NaN).
        key: the columns naming one row: a run (corpus, head, seed), or a run at one of a suite's
            checkpoints (``CHECKPOINT_KEY`` adds ``step``, required and never empty).

    Returns:
        DataFrame with one row per ``key``; ``corpus``, ``head``, ``seed`` and ``status`` as str.
    """
    name = str(path)
    try:
        df = pd.read_csv(path, dtype={c: str for c in TEXT_COLUMNS}, keep_default_na=True)
    except FileNotFoundError:
        raise AuditError(f"{name}: runs table not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise AuditError(f"{name}: unreadable CSV ({str(err).splitlines()[0]})") from None
    for col in ("head", "seed"):
        if col not in df.columns:
            raise AuditError(f"{name}: missing required column {col!r}")
        if df[col].isna().any():
            raise AuditError(f"{name}: column {col!r} has an empty cell (row {int(df[col].isna().idxmax()) + 2})")
    df["head"] = df["head"].str.strip()
    df["seed"] = df["seed"].str.strip()
    df["corpus"] = df["corpus"].fillna("all").str.strip() if "corpus" in df else "all"
    if "status" in df:
        # a blank status is an unknown outcome, never a success: a run whose metrics.json lost
        # its status would otherwise enter every test as ok
        df["status"] = df["status"].fillna("").str.strip().str.lower()
        bad = ~df["status"].isin(STATUSES)
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            value = df["status"].iloc[row]
            raise AuditError(f"{name}: column 'status' has {'value ' + repr(value) if value else 'an empty cell'} "
                             f"(row {row + 2}); expected 'ok' or 'failed'")
    else:   # a table without the column (hand-made, published summaries) records no failures
        df["status"] = "ok"
    for col in df.columns:
        if col not in TEXT_COLUMNS:
            df[col] = numeric_column(df[col], name, col)
    for col in key[len(RUN_KEY):]:
        if col not in df.columns:
            raise AuditError(f"{name}: missing required column {col!r}")
        if df[col].isna().any():
            raise AuditError(f"{name}: column {col!r} has an empty cell (row {int(df[col].isna().idxmax()) + 2})")
    dup = df.duplicated(list(key))
    if dup.any():
        r = df[dup].iloc[0]
        raise AuditError(f"{name}: duplicate run " + " ".join(f"{k}={r[k]!r}" if k in RUN_KEY else f"{k}={r[k]:g}"
                                                                for k in key))
    return df


def numeric_column(values: pd.Series, name: str, col: str) -> pd.Series:
    """A CSV column as float: empty cells (NaN or '') become NaN, True/False become 1/0 (a
    boolean column such as ``hidden_gap_ok``), anything else must parse.

    The one parser of every numeric column the statistics read (runs, word pairs, summaries).

    Raises:
        AuditError: one line naming the file, the column, the value and its CSV row (header = 1).
    """
    text = values.astype(object)
    blank = text.isna() | (text.astype(str).str.strip() == "")
    # a boolean column (e.g. hidden_gap_ok) reaches the CSV as True/False: read as 1/0
    flags = text.astype(str).str.strip().str.lower().map({"true": 1.0, "false": 0.0})
    text = text.where(flags.isna(), flags)
    parsed = pd.to_numeric(text.where(~blank, np.nan), errors="coerce")
    bad = parsed.isna() & ~blank
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise AuditError(f"{name}: column {col!r} has non-numeric value {text.iloc[row]!r} (row {row + 2})")
    return parsed.astype(float)


# runs-table columns measured since issue 24 (the debate since 2021): a runs table made before
# has none of them, and a comparison or claim on one says "not run" there instead of failing
MEASURED_LATER = ("unargmaxable", "argmax_argmaxable", "argmax_unresolved", "gradient_share", "gradient_norm_share",
                  "hidden_gap_dim", "hidden_gap_ratio", "hidden_gap_ok",
                  # issue 33: the authors' box and the hidden-gap control's parts
                  "unargmaxable_box100", "argmax_unresolved_box100", "hidden_gap_expected", "hidden_gap_miss",
                  "hidden_gap_residual")


def absent_later(runs: pd.DataFrame, metric: str) -> str:
    """The "not run" reason when ``metric`` is one of ``MEASURED_LATER`` and the runs table lacks
    it; '' otherwise (present, or a name the audit never writes: ``require_metric`` fails on that)."""
    if metric in MEASURED_LATER and metric not in runs.columns:
        return Gate.NOT_RUN.because(f"the runs table has no column {metric!r} (runs made before it was measured)")
    return ""


def require_metric(runs: pd.DataFrame, metric: str, source: str, where: str) -> None:
    """Fail in one line if ``metric`` is not a numeric column of the runs table."""
    if metric not in runs.columns or metric in TEXT_COLUMNS:
        raise AuditError(f"{source}: no metric column {metric!r} (needed by {where})")


@dataclass
class Arm:
    """One (corpus, head) arm of a metric: the usable values and what was excluded."""

    values: np.ndarray      # shape (n,), finite metric values of ok runs
    n_failed: int           # runs with status 'failed'
    n_missing: int          # ok runs whose metric is NaN or infinite
    present: bool           # whether the head has any row in this corpus at all


def arm(runs: pd.DataFrame, corpus: str, head: str, metric: str) -> Arm:
    """Select one arm; failed runs and non-finite values are excluded and counted."""
    rows = runs[(runs["corpus"] == corpus) & (runs["head"] == head)]
    ok = rows[rows["status"] == "ok"]
    values = ok[metric].to_numpy(dtype=float)
    finite = np.isfinite(values)
    return Arm(values[finite], int((rows["status"] == "failed").sum()), int((~finite).sum()), len(rows) > 0)


def load_config(path: str | os.PathLike) -> dict:
    """Read a stats config (or a whole study config), check its statistics sections against
    the study schema (``audit.config.check_stats_config``: defaults filled in) and merge in the
    claims of its ``claims_file`` (if any), checked against the same schema.

    ``claims_file`` is resolved against the working directory first (Snakemake runs from the
    repository root), then against the config file's own directory. Claims from the file come
    after the config's own ``claims:``; a repeated claim id is an error.
    """
    name = str(path)
    cfg = check_stats_config(_read_yaml(path), name)
    ref = cfg["claims_file"]
    if ref:
        candidates = [Path(ref), Path(path).parent / ref]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise AuditError(f"{name}: claims_file {ref!r} not found")
        cfg["claims"] = cfg["claims"] + read_claims_file(found, taken=[c["id"] for c in cfg["claims"]])
    return cfg


def _read_yaml(path) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError:
        raise AuditError(f"{path}: config not found") from None
    except yaml.YAMLError as err:
        raise AuditError(f"{path}: malformed YAML ({str(err).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AuditError(f"{path}: expected a YAML mapping at top level")
    return data


def load_pairs(path: str | os.PathLike) -> pd.DataFrame:
    """Read the per-pair word-similarity table (columns ``PAIR_COLUMNS``).

    Returns:
        DataFrame with str ``corpus, head, seed, benchmark, word1, word2`` and float
        ``gold, cosine``; rows with a non-finite gold or cosine are dropped.
    """
    name = str(path)
    try:
        df = pd.read_csv(path, dtype={c: str for c in PAIR_COLUMNS[:6]}, keep_default_na=False)
    except FileNotFoundError:
        raise AuditError(f"{name}: word-pairs table not found") from None
    except pd.errors.EmptyDataError:  # a 0-byte file: no benchmark was scored, not an error
        return pd.DataFrame(columns=list(PAIR_COLUMNS))
    except pd.errors.ParserError as err:
        raise AuditError(f"{name}: unreadable CSV ({str(err).splitlines()[0]})") from None
    if "corpus" not in df.columns:
        df["corpus"] = "all"
    for col in PAIR_COLUMNS:
        if col not in df.columns:
            raise AuditError(f"{name}: missing required column {col!r}")
    for col in ("gold", "cosine"):
        df[col] = numeric_column(df[col], name, col)
    return df[np.isfinite(df["gold"]) & np.isfinite(df["cosine"])].reset_index(drop=True)


def note(message: str) -> None:
    """Print an informational line on stderr (e.g. why a table has no rows)."""
    print(f"note: {message}", file=sys.stderr)
