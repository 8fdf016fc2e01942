"""The guard: no verdict drawn from an arm the audit cannot stand behind.

An arm (corpus, head) is *not informative* when any of these holds (checked in this order, all
reasons kept):

1. it has no ok run with a finite test perplexity: whether its models learned anything is unknown,
   so its verdicts on every other metric (ranks, shares, ...) say nothing either;
2. more than ``max_failed_share`` of its planned runs failed (``stats.max_failed_share``, default
   0.2 from ``configs/schema.yaml``; planned = its rows of the runs table, ok or failed): the ok
   runs that remain are the seeds that happened to train, a selected sample. A run whose status is
   ok but whose test perplexity is missing or not finite counts as failed here (``n_no_ppl``): a
   run counts as informative only with a finite test perplexity, whatever its status says (the
   collector never writes one, but an outside runs table named under ``evidence:`` can);
3. there is no baseline for exactly its data: a ``baselines.csv`` row (``audit.evaluate.baselines``)
   with the same corpus, the same vocabulary size (the runs' ``vocab_size``) and the same test
   tokens (the baselines score all ``n_test`` tokens, a run predicts every one but the first, so
   ``test_tokens == n_test - 1``). Runs without ``vocab_size`` or ``test_tokens``, runs that
   disagree on them, or a table without ``n_test`` match nothing: a baseline of another vocabulary
   (the full-vocabulary unigram 684.5 against K = 2,000 runs, whose unigram is 196.5) is never
   used in its place;
4. the median test perplexity of its ok runs is at or above that unigram perplexity: its models
   have not started to use context, so a difference between them is no evidence about output heads.

Checks 3 and 4 need a baselines table; without one (``python -m audit stats`` run by hand without
``--baselines``) only checks 1 and 2 apply. Every comparison row and claim drawn from a flagged arm
keeps its statistics but gets the verdict ``not_informative`` and the reason
``not informative: <arm: why>[; <arm: why>]; the test alone: <verdict>: <reason>``. It never counts
as supported, contradicted or equivalent. Rows never computed (``not run: ...``) are left as they
are. ``arm_status`` is the one table every other mark on the page (the verdict matrix, the forest
plots, the sequential history) reads, so that they all say the same.

Which guard reaches which table is said by the table's entry in ``audit.stats.tables`` (a claims
table by ``guard_claims``, a head-pair table with a verdict by ``guard_comparisons``, the wins and
correlations tables by a note); an entry must name its guard or an exemption saying why none
applies (the published record's tables: the papers' printed summaries, not runs), or it cannot be
made. ``audit.stats.tables.guard_table`` applies a table's registered guard by its name.
"""

from __future__ import annotations

import fnmatch

import numpy as np
import pandas as pd

from audit.schema import schema_defaults
from audit.stats.claims import resolve
from audit.stats.decision import Gate, Verdict

VERDICT = Verdict.NOT_INFORMATIVE
LABEL = "not informative"
METRIC = "test_ppl"
MAX_FAILED_SHARE = float(schema_defaults("stats")["max_failed_share"])
# a run scores every test token but the first (it has no context); the baselines score all of them
UNSCORED_TOKENS = 1
ALONE = "; the test alone: "   # what follows is the unguarded verdict (audit.report.checks reads it)
STATUS_COLUMNS = ["corpus", "head", "n_planned", "n_failed", "n_no_ppl", "n", "median_test_ppl", "vocab_size",
                  "test_tokens", "unigram_ppl", "why"]

def _single(group: pd.DataFrame, column: str) -> float:
    """The one value ``column`` takes over the arm's ok runs; NaN when absent or not unique."""
    if column not in group:
        return np.nan
    values = pd.to_numeric(group[column], errors="coerce").dropna().unique()
    return float(values[0]) if len(values) == 1 else np.nan


def unigram_for(baselines: pd.DataFrame | None, corpus: str, vocab_size: float, test_tokens: float) -> float | None:
    """The unigram test perplexity of exactly this data: same corpus, vocabulary size and scored
    test tokens (``test_tokens == n_test - 1``); None when no row matches, or the rows that match
    disagree."""
    if baselines is None or baselines.empty or "n_test" not in baselines:
        return None
    if not (np.isfinite(vocab_size) and np.isfinite(test_tokens)):
        return None
    rows = baselines[(baselines["corpus"].astype(str) == str(corpus))
                     & (pd.to_numeric(baselines["vocab_size"], errors="coerce") == vocab_size)
                     & (pd.to_numeric(baselines["n_test"], errors="coerce") == test_tokens + UNSCORED_TOKENS)]
    values = set(rows["unigram_ppl"].astype(float))
    return values.pop() if len(values) == 1 else None


def _have(baselines: pd.DataFrame, corpus: str) -> str:
    """The baselines rows of a corpus, for a 'no baseline' reason."""
    rows = baselines[baselines["corpus"].astype(str) == str(corpus)]
    if rows.empty:
        return f"the baselines table has no row for {corpus}"
    tokens = rows["n_test"] if "n_test" in rows else pd.Series([np.nan] * len(rows), index=rows.index)
    have = [f"K = {float(k):,.0f} over {float(n) - UNSCORED_TOKENS:,.0f}" if np.isfinite(float(n)) else
            f"K = {float(k):,.0f} (no n_test)" for k, n in zip(rows["vocab_size"], tokens)]
    return f"the baselines table has {corpus} {'; '.join(have)}"


def _why(head, n_planned, n_failed, n_no_ppl, n, median, vocab, tokens, unigram, corpus, baselines,
         max_failed_share) -> str:
    reasons = []
    if n == 0:
        reasons.append(f"no finite test perplexity ({n_planned - n_failed} ok runs, {n_failed} failed)")
    n_no_ppl = n_no_ppl if n else 0   # none finite: check 1 has said it
    if n_planned and (n_failed + n_no_ppl) / n_planned > max_failed_share:
        what = f"{n_failed} of {n_planned} planned runs failed" + (
            f" and {n_no_ppl} ended ok without a finite test perplexity (counted as failed)" if n_no_ppl else "")
        reasons.append(f"{what} (more than stats.max_failed_share = {max_failed_share:g} of them: the ok runs "
                       f"are the seeds that trained)")
    if baselines is not None and n:
        if unigram is None:
            data = (f"K = {vocab:,.0f}" if np.isfinite(vocab) else "no single vocab_size") + ", " + (
                f"{tokens:,.0f} test tokens scored" if np.isfinite(tokens) else "no single test_tokens")
            reasons.append(f"no baseline for this vocabulary ({corpus}, {data}; {_have(baselines, corpus)})")
        elif median >= unigram:
            reasons.append(f"below the unigram baseline: median test ppl {median:,.1f} (n = {n}) >= unigram "
                           f"{unigram:,.1f} ({corpus}, K = {vocab:,.0f})")
    return "; ".join(f"{head}: {r}" for r in reasons)


def arm_status(runs: pd.DataFrame, baselines: pd.DataFrame | None,
               max_failed_share: float = MAX_FAILED_SHARE) -> pd.DataFrame:
    """Per (corpus, head) arm of the runs table (``STATUS_COLUMNS``): planned and failed runs, the
    ok runs without a finite test perplexity (``n_no_ppl``, counted as failed), ``n`` ok runs with
    a finite test perplexity and their median, the vocabulary size and scored test
    tokens of its ok runs (NaN when absent or not one value), the matching unigram perplexity (NaN
    when none) and ``why`` it is not informative ('' when it is; module docstring)."""
    rows = []
    for (corpus, head), group in runs.groupby(["corpus", "head"], sort=True):
        ok = group[group["status"] == "ok"]
        values = pd.to_numeric(ok[METRIC], errors="coerce").to_numpy(float) if METRIC in ok else np.array([])
        finite = np.isfinite(values)
        values, n_no_ppl = values[finite], int((~finite).sum())
        n_planned, n_failed = len(group), int((group["status"] != "ok").sum())
        median = float(np.median(values)) if len(values) else np.nan
        vocab, tokens = _single(ok, "vocab_size"), _single(ok, "test_tokens")
        unigram = unigram_for(baselines, corpus, vocab, tokens)
        why = _why(head, n_planned, n_failed, n_no_ppl, len(values), median, vocab, tokens, unigram, corpus,
                   baselines, max_failed_share)
        rows.append(dict(corpus=corpus, head=head, n_planned=n_planned, n_failed=n_failed, n_no_ppl=n_no_ppl,
                         n=len(values),
                         median_test_ppl=median, vocab_size=vocab, test_tokens=tokens,
                         unigram_ppl=np.nan if unigram is None else unigram, why=why))
    return pd.DataFrame(rows, columns=STATUS_COLUMNS)


def flagged(runs: pd.DataFrame, baselines: pd.DataFrame | None,
            max_failed_share: float = MAX_FAILED_SHARE) -> dict[tuple[str, str], str]:
    """(corpus, head) -> why, for every arm that is not informative."""
    status = arm_status(runs, baselines, max_failed_share)
    return {(str(r.corpus), str(r.head)): r.why for r in status.itertuples() if r.why}


def why_not(corpus: str, heads, arms: dict) -> str:
    """The guard's reason for a mark drawn from ``heads`` of ``corpus`` ('' when none is flagged)."""
    why = [arms[(str(corpus), str(h))] for h in dict.fromkeys(heads) if (str(corpus), str(h)) in arms]
    return f"{LABEL}: {'; '.join(why)}" if why else ""


def _with_guard(table: pd.DataFrame) -> list[str]:
    """The table's columns and ``guard`` (a table made before the column gains it)."""
    return list(table.columns) + ([] if "guard" in table.columns else ["guard"])


def _guarded(row: dict, heads, arms: dict) -> dict:
    """A row with a verdict, withheld when it is drawn from a flagged arm: ``verdict`` becomes
    ``not_informative``, ``guard`` says why (the decision record's guard state, ''
    otherwise) and the reason keeps what the test alone gave."""
    why = why_not(row["corpus"], heads, arms)
    if not why or Gate.of(row.get("reason")) is Gate.NOT_RUN:
        return dict(row, guard=row.get("guard") if isinstance(row.get("guard"), str) else "")
    return dict(row, verdict=VERDICT, guard=why, reason=f"{why}{ALONE}{row['verdict']}: {row['reason']}")


def guard_comparisons(table: pd.DataFrame, runs: pd.DataFrame, baselines: pd.DataFrame | None,
                      max_failed_share: float = MAX_FAILED_SHARE) -> pd.DataFrame:
    """The comparisons table (``audit.stats.comparisons.COLUMNS``) with rows drawn from an arm that
    is not informative relabelled ``not_informative``; other rows unchanged."""
    arms = flagged(runs, baselines, max_failed_share)
    if table.empty or not arms:
        return table
    rows = [_guarded(r, (str(r["head_a"]), str(r["head_b"])), arms) for r in table.to_dict("records")]
    return pd.DataFrame(rows, columns=_with_guard(table))


def claim_heads(claim: dict, runs: pd.DataFrame, corpus: str, correlations: list[dict]) -> list[str]:
    """The arms a claim's verdict is drawn from: a comparison's two heads; a one-sample claim's
    head; a correlation's heads (its names and patterns matched against the corpus's heads; none
    given, every head); none for an untestable claim."""
    if "comparison" in claim:
        comp = resolve(claim, runs, corpus)["comparison"]
        return [str(comp["head_a"]), str(comp["head_b"])]
    if "one_sample" in claim:
        return [str(claim["one_sample"]["head"])]
    if "correlation" not in claim:   # an untestable claim: no verdict, so no arm to guard
        return []
    spec = next((c for c in correlations if c["name"] == claim["correlation"]["name"]), None)
    return correlation_heads(spec, runs, corpus)


def correlation_heads(spec: dict | None, runs: pd.DataFrame, corpus: str) -> list[str]:
    """The heads of a declared correlation in a corpus (its ``heads`` names and patterns; none
    given, every head of the corpus)."""
    heads = sorted(set(runs.loc[runs["corpus"] == corpus, "head"].astype(str)))
    if spec is None or not spec.get("heads"):
        return heads
    return [h for h in heads if any(fnmatch.fnmatchcase(h, p) for p in map(str, spec["heads"]))]


def guard_claims(table: pd.DataFrame, runs: pd.DataFrame, baselines: pd.DataFrame | None,
                 config: dict, max_failed_share: float = MAX_FAILED_SHARE) -> pd.DataFrame:
    """The claims table (``audit.stats.claims.COLUMNS``) with claims drawn from an arm that is
    not informative relabelled ``not_informative``.

    Args:
        config: the study config with its claims merged in (``audit.stats.io.load_config``).
    """
    arms = flagged(runs, baselines, max_failed_share)
    if table.empty or not arms:
        return table
    claims = {c["id"]: c for c in config.get("claims") or []}
    correlations = config.get("correlations") or []
    rows = [_guarded(r, claim_heads(claims[r["claim_id"]], runs, str(r["corpus"]), correlations), arms)
            for r in table.to_dict("records")]
    return pd.DataFrame(rows, columns=_with_guard(table))


def guard_correlations(table: pd.DataFrame, runs: pd.DataFrame, baselines: pd.DataFrame | None,
                       config: dict, max_failed_share: float = MAX_FAILED_SHARE) -> pd.DataFrame:
    """The correlations table (``audit.stats.correlations.COLUMNS``) with the guard's reason in
    front of the ``note`` of every row whose heads include an arm that is not informative (the
    table has no verdict; its statistics are kept)."""
    arms = flagged(runs, baselines, max_failed_share)
    if table.empty or not arms:
        return table
    specs = {c["name"]: c for c in config.get("correlations") or []}
    return _noted(table, arms, lambda row: correlation_heads(specs.get(row["name"]), runs, str(row["corpus"])))


def _noted(table: pd.DataFrame, arms: dict, heads_of) -> pd.DataFrame:
    """``table`` with the guard's reason in front of the ``note`` of every row whose heads
    (``heads_of(row)``) include a flagged arm: the tables with no verdict to relabel."""
    out = table.copy()
    for i, row in out.iterrows():
        why = why_not(row["corpus"], heads_of(row), arms)
        if why:
            note = row["note"] if isinstance(row["note"], str) and row["note"] else ""
            out.at[i, "note"] = why + (f"; {note}" if note else "")
    return out


def guard_history(table: pd.DataFrame, runs: pd.DataFrame, baselines: pd.DataFrame | None,
                  max_failed_share: float = MAX_FAILED_SHARE) -> pd.DataFrame:
    """The sequential history (``audit.stats.sequential.history.history_table``) with a column
    ``guard``: the guard's reason for every row whose heads include an arm that is not informative
    ('' otherwise). The design's own ``decision`` is kept: it is what the schedule did, not a
    verdict the page may stand behind."""
    arms = flagged(runs, baselines, max_failed_share)
    return table.assign(guard=[why_not(r["corpus"], (r["head_a"], r["head_b"]), arms)
                               for r in table.to_dict("records")])


def guard_wins(table: pd.DataFrame, runs: pd.DataFrame, baselines: pd.DataFrame | None,
               max_failed_share: float = MAX_FAILED_SHARE) -> pd.DataFrame:
    """The word-similarity wins table (``audit.stats.wordsim.WINS_COLUMNS``: counts, no test)
    with the guard's reason in front of the ``note`` of every ordered pair (head_i, head_j) that
    includes an arm that is not informative."""
    arms = flagged(runs, baselines, max_failed_share)
    if table.empty or not arms:
        return table
    return _noted(table, arms, lambda row: (row["head_i"], row["head_j"]))
