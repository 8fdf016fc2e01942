"""The cross-scale table (the verdict matrix): every claim, one column per evidence source.

Sources, in column order: ``published`` (the claims judged on the papers' own numbers,
``published_claims.csv``), ``this study`` (``claims.csv`` of the study's runs) and every further
runs table of the config's ``evidence:`` (``evidence_claims.csv``, ``audit.stats.sources``).
A source without a table is left out.

The table has one row per (claim, corpus) and, per source ``s``, the columns ``verdict__<s>``,
``cell__<s>`` (the verdict with its effect and CI, e.g. ``contradicted: diff = mean_a - mean_b
(welch CI) 12.3 [4.1, 20.5]``) and ``anchor__<s>`` (the id of the row on the page it rests on,
'' when the page does not show one). Its first row, ``claim_id == "scale"``, holds in ``cell__<s>``
the scale that source speaks for: d, V or K, tokens trained, the median test perplexity of its
arms against the unigram baseline of their vocabulary and test tokens, and how many arms the guard
(``audit.stats.guard``) finds not informative. A cell names its interval's level (a comparison's
is 1 - alpha, a one-sample claim's 1 - 2 alpha); a ``not_informative`` cell leads with the guard's
reason, then what the test alone gave. ``agreement`` says whether the sources' decisive verdicts
(supported, contradicted, equivalent) differ: ``disagree: ...`` naming each, ``agree``, or ''
(fewer than two decisive verdicts). A claim judged per size of a pretrained suite
(``<claim id>.<model>``) follows its base claim's row, with ``group`` the base id and ``member``
the size (``audit.report.groups``); the base row's ``agreement`` is over the whole group, and the
page (``page_matrix``) draws the sizes inside the base row's cells.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from audit.report import groups
from audit.report.counts import gate, is_control
from audit.report.levels import level  # an interval's level as every cell prints it: 0.9 -> '90% CI'
from audit.stats.guard import ALONE, LABEL, MAX_FAILED_SHARE, VERDICT, arm_status
from audit.stats.decision import CONTROLS, Gate, Verdict

SCALE_ROW = "scale"
DECISIVE = (Verdict.SUPPORTED, Verdict.CONTRADICTED, Verdict.EQUIVALENT)
# the published numbers' scale: the papers' AWD-LSTM settings (configs/paper-ptb.yaml,
# configs/paper-wt2.yaml; a test checks the PTB figures against that file)
PUBLISHED_SCALE = ("papers' settings: d = 400 (MoS: 280), V = 10,000 (PTB) / 33,278 (WT2), "
                   "1000 epochs = 929,589,000 (PTB) / 2,088,628,000 (WT2) tokens trained; "
                   "the papers' printed perplexities (no runs here, so no unigram comparison)")


def _slug(*parts) -> str:
    return re.sub(r"[^a-z0-9]+", "-", "-".join(map(str, parts)).lower()).strip("-")


def _num(value, digits: int = 3) -> str:
    return f"{float(value):.{digits}g}" if value is not None and np.isfinite(float(value)) else "–"


def cell(claim: dict) -> str:
    """A claims row as one cell: the verdict, its effect and interval with the interval's level
    (none for a claim not run); a guarded claim's cell starts with the guard's reason."""
    verdict, reason = str(claim["verdict"]), str(claim.get("reason") or "")
    text = verdict.replace("_", " ")
    if is_control(claim) and Verdict.of(verdict) not in CONTROLS:   # not run, untestable, withheld
        text = f"control (holds by construction), {text}"
    if verdict == VERDICT and ALONE in reason:   # why the page does not stand behind it, then the test
        why, _, alone = reason.partition(ALONE)
        text += f": {why.removeprefix(LABEL + ': ')}; the test alone"
        reason = alone
    estimate = claim.get("estimate")
    if estimate is not None and pd.notna(estimate) and np.isfinite(float(estimate)):
        name = str(claim.get("estimate_name") or "estimate").split(" (")[0]
        text += (f": {name} {_num(estimate, 4)} [{_num(claim.get('ci_low'))}, {_num(claim.get('ci_high'))}]"
                 f" ({level(claim.get('ci_level'))})")
    elif reason:
        text += f": {reason}"
    return text


def _range(values, digits=0) -> str:
    values = sorted(v for v in values if np.isfinite(v))
    if not values:
        return "–"
    low, high = values[0], values[-1]
    return f"{low:,.{digits}f}" if low == high else f"{low:,.{digits}f}-{high:,.{digits}f}"


def runs_scale(runs: pd.DataFrame, baselines: pd.DataFrame | None,
               max_failed_share: float = MAX_FAILED_SHARE) -> str:
    """The scale a runs table speaks for, per corpus: d, K, tokens trained, arm medians vs the
    unigram of their own vocabulary and test tokens, and the arms the guard flags."""
    parts = []
    status = arm_status(runs, baselines, max_failed_share)
    for corpus, group in runs[runs["status"] == "ok"].groupby("corpus", sort=True):
        def col(name):
            return pd.to_numeric(group[name], errors="coerce").to_numpy(float) if name in group else np.array([])

        arms = status[status["corpus"] == corpus]
        matched = arms[np.isfinite(arms["unigram_ppl"])]
        text = (f"{corpus}: d = {_range(col('emb_size'))}, K = {_range(col('vocab_size'))}, "
                f"tokens trained {_range(col('tokens_trained'))}; median test ppl per arm "
                f"{_range(arms['median_test_ppl'], 1)} vs unigram "
                f"{_range(matched['unigram_ppl'], 1) if len(matched) else 'not computed for this vocabulary and these test tokens'}")
        if len(matched):
            beat = int((matched["median_test_ppl"] < matched["unigram_ppl"]).sum())
            text += f" ({beat} of {len(arms)} arms beat it)"
        flagged = int((arms["why"] != "").sum())
        text += f"; {flagged} of {len(arms)} arms not informative (the guard)" if flagged else ""
        parts.append(text)
    return "; ".join(parts) or "no ok runs"


SUITE_DESIGN = "fixed: pretrained suite "   # a pretrained suite's runs table (audit.pretrained.suite.describe)


def evidence_scale(entry: dict, runs: pd.DataFrame, baselines: pd.DataFrame | None,
                   max_failed_share: float = MAX_FAILED_SHARE) -> str:
    """The scale a further runs table of ``evidence:`` speaks for: its ``description``; for a
    pretrained suite's table the suite, its sizes with their d, its seeds and the checkpoint, as
    the table's design records them (the config's description may be stale, the table is not);
    then ``runs_scale`` against the baselines its claims were guarded by (this study's and those
    beside the table: ``audit.stats.sources.evidence_baselines``), so that the scale row and the
    column's verdicts name the same arms not informative."""
    from audit.stats.sources import design_of, evidence_baselines

    design = design_of(runs)
    text = runs_scale(runs, evidence_baselines(entry["runs"], baselines), max_failed_share)
    if design.startswith(SUITE_DESIGN):
        text = f"{design.removeprefix('fixed: ')}; {text}"
    return f"{entry['description']}: {text}" if entry.get("description") else text


def cross_scale_table(sources: list[tuple], claims_config: list[dict] | None = None) -> pd.DataFrame:
    """The verdict matrix.

    Args:
        sources: (name, claims table or None, scale text, anchor prefix[, design]) per source, in
            column order; the anchor prefix (``claim-``, ``pub-claim-``) makes each cell's link to
            its row on the page, '' for a source the page does not show row by row; ``design``
            (``audit.stats.sources.design_of``) says how a runs table's seeds came, in the scale
            row's ``design__<source>`` ('' for the published record: printed numbers).
        claims_config: the study's claims (its stats config's ``claims``): a per-size claim
            ``<id>.<model>`` goes under its base claim (``audit.report.groups``).

    Returns:
        DataFrame: the scale row, then one row per (claim_id, corpus) in first-seen order, a
        group's base row before its sizes (``group``, ``member``).
    """
    sources = [tuple(s) + ("",) * (5 - len(s)) for s in sources if s[1] is not None and len(s[1])]
    rows: dict[tuple[str, str], dict] = {}
    for name, table, *_ in sources:
        for claim in table.to_dict("records"):
            key = (str(claim["claim_id"]), str(claim["corpus"]))
            rows.setdefault(key, dict(claim_id=key[0], corpus=key[1], statement=claim["statement"]))
    out = [dict(claim_id=SCALE_ROW, corpus="", statement="the scale each source speaks for")]
    columns = ["claim_id", "corpus", "statement", "agreement"]
    for name, table, scale, prefix, design in sources:
        columns += [f"verdict__{name}", f"cell__{name}", f"anchor__{name}", f"design__{name}", f"gate__{name}"]
        out[0].update({f"verdict__{name}": "", f"cell__{name}": scale, f"anchor__{name}": "",
                       f"design__{name}": design, f"gate__{name}": ""})
        for claim in table.to_dict("records"):
            row = rows[(str(claim["claim_id"]), str(claim["corpus"]))]
            row.update({f"verdict__{name}": claim["verdict"], f"cell__{name}": cell(claim),
                        f"gate__{name}": str(gate(claim)),
                        f"anchor__{name}": prefix + _slug(claim["claim_id"], claim["corpus"]) if prefix else ""})
    for row in rows.values():
        decisive = {name: row.get(f"verdict__{name}") for name, *_ in sources
                    if row.get(f"verdict__{name}") in DECISIVE}
        if len(set(decisive.values())) > 1:
            row["agreement"] = "disagree: " + ", ".join(f"{n} {v}" for n, v in decisive.items())
        else:
            row["agreement"] = "agree" if len(decisive) > 1 else ""
    ordered = groups.arrange(rows, groups.size_groups(claims_config or []),
                             {str(c.get("id")): c.get("statement", "") for c in claims_config or []})
    groups.group_agreement(ordered, [name for name, *_ in sources])
    out[0].update(agreement="", group="", member="")
    return pd.DataFrame(out + ordered, columns=columns[:3] + ["group", "member"] + columns[3:]).fillna("")


def page_matrix(table: pd.DataFrame | None) -> dict | None:
    """The verdict matrix for the page: {sources, scale, designs, rows}; each row's ``cells`` one
    {verdict, text, anchor, members} per source, where ``members`` lists the row's sizes that this
    source judged ({label, statement, verdict, text, anchor}: a per-size claim drawn inside its
    base claim's cell, ``audit.report.groups``). A table written before the groups has none."""
    if table is None or table.empty:
        return None
    table = table.astype(object).fillna("")  # object first: pandas 3 refuses "" in a float column
    sources = [c[len("verdict__"):] for c in table.columns if c.startswith("verdict__")]

    def shown(row, s):   # the badge: a cell whose claim was not run says so, whatever its verdict
        value = row.get(f"gate__{s}") or Gate.of(str(row[f"cell__{s}"]).partition(": ")[2])  # older tables: none
        return "not_run" if Gate(value) is Gate.NOT_RUN else str(row[f"verdict__{s}"])

    def cells(row):
        return [{"verdict": str(row[f"verdict__{s}"]), "shown": shown(row, s), "text": str(row[f"cell__{s}"]),
                 "detail": str(row[f"cell__{s}"]).partition(": ")[2], "anchor": str(row[f"anchor__{s}"]),
                 "members": []} for s in sources]

    rows = table.to_dict("records")
    scale = next((r for r in rows if r["claim_id"] == SCALE_ROW), None)
    # how each runs table's seeds came (audit.stats.sources.design_of): the header marks a
    # group-sequential source and one that recorded no design, as the page marks this study
    designs = {s: str(scale.get(f"design__{s}", "")) if scale else "" for s in sources}
    out = []
    for row in (r for r in rows if r is not scale):
        base = (row.get("group"), row["corpus"])   # groups.arrange put a size right after its base row
        if row.get("member") and out and (out[-1]["claim_id"], out[-1]["corpus"]) == base:
            for column, member in zip(out[-1]["cells"], cells(row)):
                if member["verdict"]:
                    column["members"].append(dict(member, label=row["member"], statement=row["statement"]))
            continue
        out.append(dict(row, cells=cells(row)))
    return {"sources": sources, "scale": cells(scale) if scale else [], "designs": designs, "rows": out}
