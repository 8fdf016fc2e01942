"""The baseline guard: a verdict drawn from models worse than word frequencies says nothing.

An arm (corpus, head) *does not beat its unigram baseline* when the median test perplexity of its
ok runs is at or above the unigram perplexity of the same corpus and vocabulary
(``audit.evaluate.baselines``: same corpus file, same test tokens). Such models have not started
to use context, so a difference between them is no evidence about output heads. Every comparison
row and claim drawn from such an arm keeps its statistics but gets the verdict
``not_informative`` and a reason starting with ``LABEL`` that says which arm, its median and the
baseline, followed by what the test alone gave. It is never counted as supported, contradicted or
equivalent. Rows never computed (``not run: ...``) are left as they are.

The arm's vocabulary is the runs' ``vocab_size`` column (the lead value of its ok runs) when the
runs table has one; a baselines row matches on corpus and that K. An arm without a matching
baseline row, or without a finite test perplexity, is not judged here (no label either way).
"""

from __future__ import annotations

import fnmatch

import numpy as np
import pandas as pd

from audit.stats.claims import resolve

VERDICT = "not_informative"
LABEL = "not informative: models below the unigram baseline"
METRIC = "test_ppl"


def unigram_for(baselines: pd.DataFrame | None, corpus: str, vocab_size: float | None) -> float | None:
    """The unigram test perplexity of a corpus and vocabulary; None when the table has no such row."""
    if baselines is None or baselines.empty:
        return None
    rows = baselines[baselines["corpus"].astype(str) == str(corpus)]
    if vocab_size is not None and np.isfinite(vocab_size):
        rows = rows[rows["vocab_size"].astype(float) == float(vocab_size)]
    elif len(rows) > 1:
        return None   # several vocabularies and the runs do not say which: no guess
    return float(rows["unigram_ppl"].iloc[0]) if len(rows) else None


def arm_scale(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (corpus, head) arm: ``n`` ok runs with a finite test perplexity, their median
    ``median_test_ppl`` and the arm's ``vocab_size`` (NaN when the runs table has no such column)."""
    ok = runs[(runs["status"] == "ok")]
    rows = []
    for (corpus, head), group in ok.groupby(["corpus", "head"], sort=True):
        values = group[METRIC].to_numpy(float) if METRIC in group else np.array([])
        values = values[np.isfinite(values)]
        vocab = group["vocab_size"].dropna() if "vocab_size" in group else pd.Series(dtype=float)
        rows.append(dict(corpus=corpus, head=head, n=len(values),
                         median_test_ppl=float(np.median(values)) if len(values) else np.nan,
                         vocab_size=float(vocab.mode().iloc[0]) if len(vocab) else np.nan))
    return pd.DataFrame(rows, columns=["corpus", "head", "n", "median_test_ppl", "vocab_size"])


def below_unigram(runs: pd.DataFrame, baselines: pd.DataFrame | None) -> dict[tuple[str, str], str]:
    """(corpus, head) -> why, for every arm whose median test perplexity does not beat its unigram."""
    out = {}
    for arm in arm_scale(runs).itertuples():
        unigram = unigram_for(baselines, arm.corpus, arm.vocab_size)
        if unigram is None or not np.isfinite(arm.median_test_ppl):
            continue
        if arm.median_test_ppl >= unigram:
            vocab = f", K = {arm.vocab_size:,.0f}" if np.isfinite(arm.vocab_size) else ""
            out[(arm.corpus, arm.head)] = (f"{arm.head}: median test ppl {arm.median_test_ppl:,.1f} (n = {arm.n}) "
                                           f">= unigram {unigram:,.1f} ({arm.corpus}{vocab})")
    return out


def _label(row: dict, why: list[str]) -> dict:
    return dict(row, verdict=VERDICT, reason=f"{LABEL} ({'; '.join(why)}); the test alone: "
                                             f"{row['verdict']}: {row['reason']}")


def _guarded(row: dict, heads, below: dict) -> dict:
    why = [below[(str(row["corpus"]), h)] for h in dict.fromkeys(heads) if (str(row["corpus"]), h) in below]
    if not why or str(row.get("reason") or "").startswith("not run"):
        return row
    return _label(row, why)


def guard_comparisons(table: pd.DataFrame, runs: pd.DataFrame, baselines: pd.DataFrame | None) -> pd.DataFrame:
    """The comparisons table (``audit.stats.comparisons.COLUMNS``) with rows drawn from an arm
    below its unigram baseline relabelled ``not_informative``; other rows unchanged."""
    below = below_unigram(runs, baselines)
    if table.empty or not below:
        return table
    rows = [_guarded(r, (str(r["head_a"]), str(r["head_b"])), below) for r in table.to_dict("records")]
    return pd.DataFrame(rows, columns=table.columns)


def claim_heads(claim: dict, runs: pd.DataFrame, corpus: str, correlations: list[dict]) -> list[str]:
    """The arms a claim's verdict is drawn from: a comparison's two heads; a one-sample claim's
    head; a correlation's heads
    (its names and patterns matched against the corpus's heads; none given, every head)."""
    if "comparison" in claim:
        comp = resolve(claim, runs, corpus)["comparison"]
        return [str(comp["head_a"]), str(comp["head_b"])]
    if "one_sample" in claim:
        return [str(claim["one_sample"]["head"])]
    spec = next((c for c in correlations if c["name"] == claim["correlation"]["name"]), None)
    heads = sorted(set(runs.loc[runs["corpus"] == corpus, "head"].astype(str)))
    if spec is None or not spec.get("heads"):
        return heads
    return [h for h in heads if any(fnmatch.fnmatchcase(h, p) for p in map(str, spec["heads"]))]


def guard_claims(table: pd.DataFrame, runs: pd.DataFrame, baselines: pd.DataFrame | None,
                 config: dict) -> pd.DataFrame:
    """The claims table (``audit.stats.claims.COLUMNS``) with claims drawn from an arm below its
    unigram baseline relabelled ``not_informative``.

    Args:
        config: the study config with its claims merged in (``audit.stats.io.load_config``).
    """
    below = below_unigram(runs, baselines)
    if table.empty or not below:
        return table
    claims = {c["id"]: c for c in config.get("claims") or []}
    correlations = config.get("correlations") or []
    rows = [_guarded(r, claim_heads(claims[r["claim_id"]], runs, str(r["corpus"]), correlations), below)
            for r in table.to_dict("records")]
    return pd.DataFrame(rows, columns=table.columns)
