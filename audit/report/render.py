"""Assemble the self-contained HTML audit from files other rules wrote.

The HTML rule only reads: the runs table, the statistics and report tables, the SVG figures and
``provenance.json``. It computes nothing but formatting. A section whose input was not given (or
is empty) is left out. Every string from a config or a table goes through jinja2's autoescaping;
the only unescaped content is the figures' SVG, which matplotlib writes with its text escaped.

``python -m audit report <sub-verb>`` is dispatched by ``audit.report.cli.main`` (re-exported
here as ``main`` because ``audit/__main__.py`` maps the verb to this module).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import jinja2
import pandas as pd
import yaml

from audit.errors import AuditError
from audit.plots import EMPTY_MARK
from audit.report import counts, levels
from audit.report.scales import page_matrix as cross_scale   # the verdict matrix's page view
from audit.report.trajectories import page_marks
from audit.stats.decision import CONTROLS, Verdict

SECTION_TITLES = [  # anchor -> table-of-contents entry, in page order
    ("scales", "Every claim at every scale"), ("published", "Published evidence"), ("verdicts", "Verdicts"), ("results", "Results per corpus"), ("comparisons", "Comparisons"),
    ("sequential", "Sequential design"),
    ("ranks", "Ranks"), ("spread", "Per-seed spread"), ("wordsim", "Word similarity"),
    ("grid", "Grid sweeps"), ("qualitative", "Top-k contexts and Jacobian spectra"),
    ("synthetic", "Dirichlet synthetic study"),
    ("provenance", "Provenance"),
    ("warnings", "Warnings"),
]
# issue 56: verdicts over training, after the learning curves (which have no entry of their own)
SECTION_TITLES.insert([key for key, _ in SECTION_TITLES].index("spread") + 1, ("trajectories", "Verdicts over training"))
WARNING_TITLES = {
    "failed": "Failed or diverged runs", "too_few_seeds": "Too few seeds",
    "non_normal": "Non-normal samples", "unconverged": "Possibly unconverged models",
    "far_from_converged": "Arms far from converged",
    "hidden_gap": "Softmax runs failing the hidden-size control",
    "not_measured": "Measurements not taken (the head or body does not support them)",
    "excluded": "Exclusions",
}


def slug(*parts) -> str:
    """An HTML id from parts: lower-case alphanumerics joined by '-'."""
    return re.sub(r"[^a-z0-9]+", "-", "-".join(map(str, parts)).lower()).strip("-")


def finite(value) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def fmt(value, digits: int = 2) -> str:
    """A number with ``digits`` decimals (thousands separated), '–' for missing; text as is."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and not finite(value):
        return "–"
    if isinstance(value, int) or (isinstance(value, float) and digits == 0):
        return f"{value:,.0f}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def fmt_sig(value, sig: int = 3) -> str:
    """A number to ``sig`` significant digits ('–' when missing)."""
    return f"{float(value):.{sig}g}" if finite(value) else "–"


def fmt_p(value) -> str:
    """A p-value to three significant digits; scientific notation below 0.001, so that the
    papers' tiny p-values (e.g. 2.02e-15) can be read off and compared."""
    if not finite(value):
        return "–"
    value = float(value)
    return f"{value:.2e}" if value < 1e-3 else f"{value:.3g}"


def fmt_ci(low, high, digits: int = 2) -> str:
    return f"[{fmt(low, digits)}, {fmt(high, digits)}]" if finite(low) and finite(high) else ""


def sort_key(value) -> str:
    """The value a sortable column sorts by: the number itself, or '' for text."""
    return repr(float(value)) if finite(value) else ""


def inline_svg(text: str) -> str | None:
    """SVG document -> an element to embed (XML prolog and DOCTYPE dropped); None when empty."""
    if EMPTY_MARK in text:
        return None
    start = text.find("<svg")
    if start < 0:
        raise AuditError("a figure file holds no <svg> element")
    return text[start:]


def records(table: pd.DataFrame | None) -> list[dict]:
    """Rows as dicts with NaN turned into None."""
    if table is None or table.empty:
        return []
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
            for row in table.to_dict("records")]


def read_tables(paths: list[str]) -> dict[str, pd.DataFrame]:
    """name (file stem) -> table, for the non-empty CSV files among ``paths``."""
    tables = {}
    for path in map(Path, paths):
        if not path.is_file():
            raise AuditError(f"table not found: {path}")
        try:
            table = pd.read_csv(path, keep_default_na=True)
        except pd.errors.EmptyDataError:
            continue
        if len(table):
            tables[path.stem] = table
    return tables


def read_figures(paths: list[str]) -> dict[str, str]:
    """name (file stem) -> inline SVG element, for the figures that hold data."""
    figures = {}
    for path in map(Path, paths):
        if not path.is_file():
            raise AuditError(f"figure not found: {path}")
        svg = inline_svg(path.read_text())
        if svg is not None:
            figures[path.stem] = svg
    return figures


def evidence_anchor(claim: dict) -> str:
    """The id of the comparisons/correlations row a claim rests on ('' when none is shown)."""
    fields = {}
    parts = str(claim.get("evidence") or "").split("; ")
    for part in parts:
        key, eq, value = part.partition("=")
        if eq:
            fields[key.strip()] = value.strip()
    table = str(claim.get("evidence_table") or "")
    if table == "comparisons.csv" and "family" in fields:
        pair = next((p for p in parts if " - " in p and "=" not in p), "")
        head_a, _, head_b = pair.partition(" - ")
        return "cmp-" + slug(fields["family"], claim.get("corpus"), fields.get("metric"), head_a, head_b)
    if table == "correlations.csv" and "correlation" in fields:
        return "cor-" + slug(fields["correlation"], claim.get("corpus"), fields.get("level"),
                             fields.get("restriction", "none"))
    return ""


def rank_label(column: str) -> str:
    """Column name of a rank -> a short heading ('f_logits_erank_1e-4' -> 'f(logits) ε = 1e-4')."""
    prefix = "f(logits) " if column.startswith("f_logits_") else ""
    base = column.removeprefix("f_logits_")
    if base.startswith("erank_"):
        return f"{prefix}ε = {base[len('erank_'):]}"
    return prefix + {"press_rank": "Press", "entropy_rank": "entropy"}.get(base, base)


def group_comparisons(rows: list[dict]) -> list[dict]:
    """Comparison rows grouped by family (first-seen order): {family, size, method, rows}."""
    groups: dict[str, dict] = {}
    for row in rows:
        group = groups.setdefault(str(row["family"]), {"family": row["family"], "rows": [],
                                                       "size": row.get("family_size"),
                                                       "method": row.get("adj_method")})
        group["rows"].append(row)
    return list(groups.values())


def group_warnings(rows: list[dict]) -> dict[str, list[dict]]:
    """kind -> warnings with the same (corpus, head, metric, detail) merged, seeds listed."""
    grouped: dict[str, dict] = {kind: {} for kind in WARNING_TITLES}
    for row in rows:
        key = tuple(str(row.get(k) or "") for k in ("corpus", "head", "metric", "detail"))
        entry = grouped.setdefault(str(row["kind"]), {}).setdefault(
            key, dict(zip(("corpus", "head", "metric", "detail"), key), seeds=[]))
        if row.get("seed") is not None and str(row["seed"]) != "":
            entry["seeds"].append(fmt(row["seed"], 0))
    return {kind: list(entries.values()) for kind, entries in grouped.items()}


def wordsim_rows(rho: pd.DataFrame | None, coverage: pd.DataFrame | None) -> list[dict]:
    """(corpus, benchmark) rows: coverage (when known) and one rho cell {mean, ci_low, ...} per head."""
    rows: dict[tuple, dict] = {}
    for r in records(coverage):
        rows[(str(r["corpus"]), str(r["benchmark"]))] = {"corpus": r["corpus"], "benchmark": r["benchmark"],
                                                         "coverage": r, "cells": {}}
    for r in records(rho):
        key = (str(r["corpus"]), str(r["benchmark"]))
        rows.setdefault(key, {"corpus": r["corpus"], "benchmark": r["benchmark"], "coverage": None,
                              "cells": {}})["cells"][str(r["head"])] = r
    return [rows[key] for key in sorted(rows)]


def grid_sections(table: pd.DataFrame | None) -> list[dict]:
    """The grid table per corpus: {corpus, options (the options swept in that corpus), rows}.

    The option columns are those between ``head`` and ``n_ok`` (``audit.report.grid.grid_table``).
    """
    if table is None or table.empty:
        return []
    columns = list(table.columns)
    if "head" not in columns or "n_ok" not in columns:
        raise AuditError("grid table: expected columns 'head' and 'n_ok'")
    keys = columns[columns.index("head") + 1:columns.index("n_ok")]
    out = []
    for corpus, part in table.groupby(table["corpus"].astype(str), sort=False):
        shown = [k for k in keys if part[k].notna().any()]
        out.append({"corpus": corpus, "options": shown, "rows": records(part)})
    return out


def numbers_table(text) -> dict | None:
    """The untestable table's ``numbers`` text as a small table: {metrics, rows: [(model, {metric:
    value text})]}; None when the text is not in the form ``audit.stats.published.evidence``
    writes (``<corpus> <row>: <metric> <value>, ...; ...``), so that the page shows it as is.

    The printed values are kept as text: the page reformats none of the papers' numbers.
    """
    metrics: dict[str, None] = {}
    rows = []
    for part in str(text or "").split("; "):
        model, sep, values = part.rpartition(": ")  # a model label may itself hold ', ' or ': '
        if not sep or not model:
            return None
        cells = {}
        for item in values.split(", "):
            name, _, value = item.rpartition(" ")
            if not name or not finite(value):
                return None
            cells[name] = value
            metrics.setdefault(name)
        rows.append((model, cells))
    return {"metrics": list(metrics), "rows": rows} if rows else None


def study_kind(present: dict) -> str:
    """What a study without language-model runs is, for the page's opening line."""
    kinds = [text for key, text in (("published", "the published record judged on the papers' own numbers"),
                                    ("evidence", "the study's claims judged on the runs tables it names "
                                                 "(evidence:, e.g. a pretrained suite's)"),
                                    ("synthetic", "the Dirichlet synthetic study")) if present.get(key)]
    return (" and ".join(kinds) if kinds else "nothing to show") + ": no language model trained"


VERDICT_LABELS = {Verdict.NOT_INFORMATIVE: "not informative"}   # the reason says why (audit.stats.guard)
VERDICT_LABELS["not_informative_at_scale"] = "not informative at this scale"   # audit.stats.one_sample_claims.SCALE_VERDICT
VERDICT_LABELS.update(control_passed="control passed (holds by construction)",   # audit.stats.controls
                      control_failed="control failed (holds by construction)",
                      control_undecided="control undecided (holds by construction)")


def verdict_text(verdict) -> str:
    """A verdict as the page prints it ('not_informative' spelt out, other '_' as spaces)."""
    return VERDICT_LABELS.get(str(verdict), str(verdict).replace("_", " "))


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("audit.report", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(fmt=fmt, sig=fmt_sig, p=fmt_p, sortkey=sort_key, verdict=verdict_text, level=levels.level,
                       heading=levels.heading)   # every printed level is a row's ci_level (audit.report.levels)
    env.globals.update(ci=fmt_ci, slug=slug, finite=finite, rank_label=rank_label, own_level=levels.own)
    # a row's role and verdict read as the records' enums (audit.stats.decision), never by text
    env.tests.update(control_row=counts.is_control, control_verdict=lambda v: Verdict.of(v) in CONTROLS)
    return env


def render(runs_path: str, config_path: str, table_paths: list[str], figure_paths: list[str],
           provenance_path: str | None = None) -> str:
    """The audit page as one HTML string.

    Args:
        runs_path: the runs table CSV, or None for a study without language-model runs.
        config_path: the resolved study config YAML.
        table_paths: CSV tables, named by file stem (comparisons, claims, results, ranks, ...).
        figure_paths: SVG figures, named by file stem (strip, rank_decay, ...).
        provenance_path: ``provenance.json`` or None.

    Returns:
        The HTML document.
    """
    runs = pd.read_csv(runs_path) if runs_path else pd.DataFrame(columns=["status"])  # synthetic-only study
    if runs_path and runs.empty:
        raise AuditError(f"{runs_path}: the runs table has no rows")
    config = yaml.safe_load(Path(config_path).read_text()) or {}
    tables = read_tables(table_paths)
    figures = read_figures(figure_paths)
    provenance = json.loads(Path(provenance_path).read_text()) if provenance_path else None
    claims = records(tables.get("claims"))
    for claim in claims:
        claim["anchor"] = evidence_anchor(claim)
    parts = counts.split(claims)   # evidence the study judged, evidence it cannot test, controls
    warnings = records(tables.get("warnings"))
    rho = tables.get("wordsim_rho")
    published = {  # the papers' own numbers (audit/stats/published/evidence.py): never mixed with the runs
        "claims": records(tables.get("published_claims")),
        "comparison_groups": group_comparisons(records(tables.get("published_comparisons"))),
        "untestable": records(tables.get("published_untestable")),
    }
    for row in published["untestable"]:
        row["numbers_table"] = numbers_table(row.get("numbers"))
    scales = cross_scale(tables.get("cross_scale"))
    present = {
        "scales": scales is not None, "published": any(published.values()), "verdicts": bool(claims), "results": "results" in tables, "comparisons": "comparisons" in tables,
        "ranks": bool({"ranks", "correlations"} & set(tables) or {"rank_decay", "rank_vs_ppl"} & set(figures)),
        "spread": "strip" in figures, "convergence": bool({"learning_curves", "saturation"} & set(figures)),
        "wordsim": bool({"wordsim_rho", "wordsim_coverage", "wordsim_diffs"} & set(tables) or "wordsim_wins" in figures),
        "qualitative": bool("topk" in tables or "jacobian" in figures),
        "grid": "grid" in tables, "synthetic": "synthetic_summary" in tables, "sequential": "sequential" in tables,
        "provenance": provenance is not None, "warnings": bool(warnings),
        "evidence": "evidence_claims" in tables,   # the opening line of a study with no runs of its own
    }
    # issue 56: held, changed, still moving; over this study's training and over a suite's checkpoints
    trajectories = page_marks(tables.get("trajectory_marks"), tables.get("checkpoint_marks"))
    present["trajectories"] = bool(trajectories["by_claim"] or trajectories["comparisons"] or "trajectories" in figures
                                   or trajectories["checkpoints"])
    context = {
        "study": config.get("study", ""), "description": config.get("description", ""),
        "n_runs": len(runs), "study_kind": study_kind(present), "n_failed": _n_failed(runs),
        "sections": [(key, title) for key, title in SECTION_TITLES if present[key]], "present": present,
        "claims": parts["claims"] + parts["controls"], "claims_not_run": parts["untested"],
        "results": records(tables.get("results")),
        "comparison_groups": group_comparisons(records(tables.get("comparisons"))), "correlations": records(tables.get("correlations")),
        "ranks": records(tables.get("ranks")),
        "rank_columns": [c[:-5] for c in (tables["ranks"].columns if "ranks" in tables else []) if c.endswith("_mean")],
        "rho_heads": sorted(rho["head"].astype(str).unique()) if rho is not None else [],
        "wordsim_rows": wordsim_rows(rho, tables.get("wordsim_coverage")),
        "wordsim_diffs": records(tables.get("wordsim_diffs")), "topk": records(tables.get("topk")),
        "synthetic": records(tables.get("synthetic_summary")), "grid": grid_sections(tables.get("grid")),
        "sequential_groups": group_comparisons(records(tables.get("sequential"))),
        "figures": figures, "provenance": provenance, "ci_levels": levels.table_levels(tables),
        "config_yaml": yaml.safe_dump(provenance["config"] if provenance else config, sort_keys=False),
        "warnings": group_warnings(warnings), "warning_titles": WARNING_TITLES, "n_warnings": len(warnings),
        # the headline counts the claims this study tested; not run and untestable ones are listed
        # apart, never counted as a verdict (their claims.csv verdict is "inconclusive")
        # claims that hold by construction are controls (audit.stats.controls): counted apart, never as support
        "verdict_counts": counts.counts(parts["claims"]), "control_counts": counts.counts(parts["controls"]),
        "n_untested": len(parts["untested"]), "published": published, "scales": scales,
        "baselines": records(tables.get("baselines")),
        "published_counts": counts.counts(counts.split(published["claims"])["claims"]),
    }
    context["trajectories"] = trajectories
    return environment().get_template("audit.html.j2").render(**context)


def _n_failed(runs: pd.DataFrame) -> int:
    """Failed runs, and ok runs without a finite test perplexity (the guard counts them as failed)."""
    status = runs.get("status", pd.Series(dtype=str)).astype(str)
    lost = status != "ok"
    if "test_ppl" in runs:
        lost |= (status == "ok") & ~pd.to_numeric(runs["test_ppl"], errors="coerce").apply(finite)
    return int(lost.sum())
