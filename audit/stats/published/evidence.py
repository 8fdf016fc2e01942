"""The published record audited from its own numbers: the papers' tables in, three tables out.

Input: ``audit/data/published.csv`` (or a table of the same shape named by the study's
``published.data``): one row per number the papers printed, with its source (``paper,
table, row``), ``n`` and what n is (``n_basis``: 10 random seeds, 11 = 10 + the original
authors' seed, 1 run, unstated), its ``kind`` (``seeds`` = mean +- SD over n seeds,
``single_run``, ``no_spread``, ``correlation``) and, where the paper printed one, the p-value
(``published_p``, against head ``p_vs``, test ``p_test``, family ``p_family``). Rows are
grouped in ``set``s of one n basis; a test only ever compares two rows of one set.

Tables (``python -m audit stats --table published_*``):

- ``published_comparisons``: every p-value the papers printed, recomputed (Holm family = the
  paper's table that printed them), with our Student p beside the published one and whether it
  reproduces to the printed digits; where it does not, which n would give it. Plus the claim
  comparisons no printed test covers (family ``claims (published)``) and any families the
  study declares under ``published.comparisons``. Statistics from summaries only
  (``audit.stats.published.summaries``): what needs per-seed values is left empty and says so.
- ``published_claims``: a verdict on every claim that multi-seed published numbers can test,
  with the paper's own p-value beside ours (judged by ``audit.stats.claims``).
- ``published_untestable``: the claims whose published evidence is a single run or carries no
  spread, with their numbers and no verdict; and the claims with no published numbers.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from audit.config import check_section
from audit.errors import AuditError
from audit.stats import claims as claims_mod
from audit.stats.comparisons import COLUMNS as COMPARISON_COLUMNS, default_lower_is_better, expand_family, finalize
from audit.stats.correlations import fisher_ci, fisher_p
from audit.stats.decision import Gate, stamped
from audit.stats.io import Settings
from audit.stats.published import unstated
from audit.stats.published.reproduce import reproduce
from audit.stats.published.summaries import compare_summary, load_summaries

PUBLISHED_CSV = Path(__file__).resolve().parents[2] / "data" / "published.csv"
KINDS = ("seeds", "single_run", "no_spread", "correlation")
EXTRA = ["set", "source_a", "source_b", "n_basis_a", "n_basis_b", "published_p", "published_p_test",
         "p_reproduced", "p_reproduction", "not_computed"]
COMPARISON_TABLE_COLUMNS = COMPARISON_COLUMNS + EXTRA + unstated.COLUMNS
CLAIM_EXTRA = ["evidence_set", "n_basis", "published_p", "published_p_test", "p_reproduced", "n_unstated",
               "n_combinations", "p_min", "p_max", "tost_p_min", "tost_p_max", "ci_low_min", "ci_high_max"]
CLAIMS_COLUMNS = claims_mod.COLUMNS + CLAIM_EXTRA
UNTESTABLE_COLUMNS = ["claim_id", "source", "statement", "paper", "table", "set", "kind", "n_basis",
                      "numbers", "reason"]
CLAIMS_FAMILY = "claims (published)"


def load_published(path: str | os.PathLike | None = None) -> pd.DataFrame:
    """The published table (default: the packaged ``audit/data/published.csv``), validated."""
    path = PUBLISHED_CSV if path is None else Path(path)
    df = load_summaries(path)
    # a plain summary table (corpus, head, metric, mean, sd, n, source; docs/published.md, --summaries) is one
    # set of its own with no printed p-values: arms with an SD and n >= 2 are tested, the rest listed
    if "kind" not in df.columns:
        df["kind"] = ["seeds" if sd == sd and n >= 2 else "single_run" if n == 1 else "no_spread"
                      for sd, n in zip(df["sd"], df["n"])]
    if "n_basis" not in df.columns:
        df["n_basis"] = [f"n = {n:g}, as given in the table" if n == n else "n not given" for n in df["n"]]
    for col, value in (("set", "summaries"), ("paper", df["source"]), ("table", ""), ("row", df["head"]), ("published_p", ""),
                       ("p_vs", ""), ("p_test", ""), ("p_family", ""), ("claim_id", "")):
        if col not in df.columns:
            df[col] = value
    for col in ("set", "kind", "n_basis", "published_p", "p_vs", "p_test", "p_family", "claim_id", "paper", "table"):
        if col not in df.columns:
            raise AuditError(f"{path}: missing required column {col!r}")
        df[col] = df[col].fillna("").astype(str).str.strip()
    bad = sorted(set(df["kind"]) - set(KINDS))
    if bad:
        raise AuditError(f"{path}: column 'kind' has value {bad[0]!r}; expected one of {', '.join(KINDS)}")
    seeds = df[df["kind"] == "seeds"]
    if seeds[["sd", "n"]].isna().any().any():
        raise AuditError(f"{path}: a 'seeds' row needs sd and n ({seeds[seeds[['sd', 'n']].isna().any(axis=1)]['source'].iloc[0]})")
    dup = seeds.duplicated(["set", "corpus", "head", "metric"])
    if dup.any():
        r = seeds[dup].iloc[0]
        raise AuditError(f"{path}: duplicate arm set={r['set']!r} corpus={r['corpus']!r} head={r['head']!r} metric={r['metric']!r}")
    for p in df["published_p"][df["published_p"] != ""]:
        try:
            float(p)
        except ValueError:
            raise AuditError(f"{path}: column 'published_p' has non-numeric value {p!r}") from None
    return df


def _arm(pub: pd.DataFrame, set_: str, corpus: str, head: str, metric: str):
    hit = pub[(pub["set"] == set_) & (pub["corpus"] == corpus) & (pub["head"] == head)
              & (pub["metric"] == metric) & (pub["kind"] == "seeds")]
    return hit.iloc[0] if len(hit) else None


def _margin(section: dict, metric: str, override=None):
    if override is not None:
        return float(override)
    value = (section.get("equivalence_margin") or {}).get(metric)
    return None if value is None else float(value)


def _row(pub, family, set_, corpus, metric, head_a, head_b, lower_is_better, margin, settings,
         printed=None, absent_ok=False) -> dict | None:
    """One uncorrected comparison row of two arms of one set. An absent arm: None, or with
    ``absent_ok`` (a declared family) a ``not run`` row that stays in the table and out of Holm."""
    a, b = _arm(pub, set_, corpus, head_a, metric), _arm(pub, set_, corpus, head_b, metric)
    if a is None or b is None:
        if not absent_ok:
            return None
        missing = ", ".join(h for h, x in ((head_a, a), (head_b, b)) if x is None)
        row = dict.fromkeys(COMPARISON_COLUMNS, math.nan)
        row.update({k: "" for k in EXTRA}, family=family, corpus=corpus, metric=metric, head_a=head_a,
                   head_b=head_b, set=set_, lower_is_better=bool(lower_is_better),
                   equivalence_margin=math.nan if margin is None else float(margin),
                   n_a=0 if a is None else int(a["n"]), n_b=0 if b is None else int(b["n"]),
                   n_failed_a=0, n_failed_b=0, n_missing_a=0, n_missing_b=0, undefined="",
                   not_run=Gate.NOT_RUN.because(f"no multi-seed row of {missing} for {metric} in corpus {corpus!r} of set {set_!r}"))
        return row
    row = compare_summary(a, b, lower_is_better, margin, settings)
    row.update(family=family, corpus=corpus, metric=metric, head_a=head_a, head_b=head_b, set=set_,
               source_a=a["source"], source_b=b["source"], n_basis_a=a["n_basis"], n_basis_b=b["n_basis"],
               published_p="", published_p_test="", p_reproduced="", p_reproduction="")
    if printed is not None:
        ok, text = reproduce(a["mean"], a["sd"], int(a["n"]), b["mean"], b["sd"], int(b["n"]), printed["published_p"])
        row.update(published_p=printed["published_p"], published_p_test=printed["p_test"],
                   p_reproduced="yes" if ok else "no", p_reproduction=text)
    return row


def _declared_rows(pub, section: dict, settings: Settings, source: str) -> list[dict]:
    """The ``published.comparisons`` families, expanded as the study's (``expand_family``)."""
    rows = []
    for entry in section.get("comparisons") or []:
        spec, set_ = entry["compare"], str(entry["set"])
        name = str(spec["family"])
        if not (pub["set"] == set_).any():
            raise AuditError(f"{source}: published.comparisons family {name!r}: no rows of set {set_!r} in the published table")
        part = pub[(pub["set"] == set_) & (pub["kind"] == "seeds")]
        cells = expand_family(spec, part["head"], sorted(set(part["corpus"])), f"{source}: published family {name!r}")
        for c in cells:
            margin = _margin(section, c["metric"], c["margin"])
            rows.append(_row(pub, c["family"], set_, c["corpus"], c["metric"], c["head_a"], c["head_b"],
                             c["lower_is_better"], margin, settings, absent_ok=True))
    return rows


def comparisons_table(pub: pd.DataFrame, config: dict, settings: Settings, source: str = "config",
                      checks: dict | None = None) -> pd.DataFrame:
    """The papers' own tests, the claim comparisons they do not cover, declared families;
    ``checks`` receives the unstated-n family checks (``unstated.apply``) for ``claims_table``."""
    section = config.get("published") or {}
    rows = []
    for _, r in pub[pub["published_p"] != ""].iterrows():
        lib = default_lower_is_better(r["metric"], f"{source}: published p of {r['source']}")
        row = _row(pub, r["p_family"] or r["table"], r["set"], r["corpus"], r["metric"], r["head"], r["p_vs"],
                   lib, _margin(section, r["metric"]), settings, printed=r)
        if row is None:
            raise AuditError(f"published table: the p-value of {r['source']} is against {r['p_vs']!r}, "
                             f"which has no row in set {r['set']!r}")
        rows.append(row)
    rows += _declared_rows(pub, section, settings, source)
    done = finalize(rows, settings) if rows else pd.DataFrame(columns=COMPARISON_COLUMNS)
    extra = pd.DataFrame([{k: r.get(k, "") for k in EXTRA} for r in rows], columns=EXTRA)
    table = pd.concat([done.reset_index(drop=True), extra], axis=1)
    claim_rows = _claim_rows(pub, config, table, settings)
    if claim_rows:
        more = finalize(claim_rows, settings)
        more_extra = pd.DataFrame([{k: r.get(k, "") for k in EXTRA} for r in claim_rows], columns=EXTRA)
        table = pd.concat([table, pd.concat([more.reset_index(drop=True), more_extra], axis=1)], ignore_index=True)
    table = unstated.apply(table, section["unstated_n"], settings, checks=checks)
    return table[COMPARISON_TABLE_COLUMNS]


def _claim_rows(pub, config, table, settings) -> list[dict]:
    """Rows for comparison claims that no existing row answers, from the first set holding both arms."""
    out = []
    for claim in config.get("claims") or []:
        comp = claim.get("comparison")
        if not comp:
            continue
        for corpus in sorted(set(pub["corpus"]) - {""}):
            resolved = claims_mod.resolve(claim, pub, corpus)
            comp = resolved["comparison"]
            if claims_mod.find_row(table, resolved, corpus)[0] is not None:
                continue
            margin = claim.get("equivalence_margin")
            lib = claim.get("lower_is_better")
            lib = default_lower_is_better(comp["metric"], f"claim {claim['id']!r}") if lib is None else bool(lib)
            for set_ in dict.fromkeys(pub["set"]):
                row = _row(pub, CLAIMS_FAMILY, set_, corpus, comp["metric"], comp["head_a"], comp["head_b"], lib,
                           margin if margin is not None else _margin(config.get("published") or {}, comp["metric"]),
                           settings)
                if row is not None:
                    out.append(row)
                    break
    return out


def claims_table(pub: pd.DataFrame, config: dict, comparisons: pd.DataFrame, settings: Settings,
                 checks: dict | None = None) -> pd.DataFrame:
    """A verdict on every claim that multi-seed published numbers (or a published r with its n) test.
    One-sample claims get none here: their papers printed single numbers (13 of 150 models, 95-99%),
    listed by ``untestable_table``. ``checks``: ``comparisons_table``'s unstated-n family checks
    (recomputed where absent)."""
    rows = []
    for claim in config.get("claims") or []:
        base = dict(claim_id=claim["id"], source=claim["source"], statement=claim.get("statement", ""),
                    expect=claim.get("expect", ""), alpha=settings.alpha)
        for corpus in [str(c) for c in claim.get("corpora") or sorted(set(pub["corpus"]) - {""})]:
            row = dict(base, corpus=corpus)
            if "comparison" in claim:
                claim_c = claims_mod.resolve(claim, pub, corpus)
                ev, flipped = claims_mod.find_row(comparisons, claim_c, corpus)
                if ev is None:
                    continue
                ev = claims_mod.flip_row(ev) if flipped else ev
                span = _over_unstated_n(comparisons, ev, flipped, settings, config, checks)
                # over an unstated n: the row standing for every admissible n (hulls, largest p);
                # the verdict and the interval beside it come from the one judge on that row
                judged_on = span.pop("row", ev)
                out = claims_mod.comparison_claim_row(dict(row, kind="comparison"), claim_c, judged_on,
                                                      "published_comparisons.csv", settings)
                out.update(span)
                out["estimate_name"] = f"{out['estimate_name'][:-1]}; from published mean/SD/n)"
                same = ev["n_basis_a"] == ev["n_basis_b"]
                out.update(evidence_set=ev["set"],
                           n_basis=ev["n_basis_a"] if same else f"A: {ev['n_basis_a']}; B: {ev['n_basis_b']}",
                           published_p=ev["published_p"], published_p_test=ev["published_p_test"],
                           p_reproduced=ev["p_reproduced"])
                rows.append(stamped(claims_mod.as_control(out, claim)))
            elif "correlation" in claim:
                out = _correlation_claim(pub, row, claim, corpus, settings)
                if out is not None:
                    rows.append(stamped(claims_mod.as_control(out, claim)))
    return pd.DataFrame(rows, columns=CLAIMS_COLUMNS)


def _over_unstated_n(comparisons, ev, flipped, settings, config, checks=None) -> dict:
    """Where the evidence row's Holm family holds an unstated n (its own or another row's): the row
    standing for every combination of the family's admissible n (``row``:
    ``audit.stats.published.unstated.over_row``, re-oriented as the claim reads it) and the
    range of p and CI over them; else nothing."""
    keys = ("family", "corpus", "metric", "head_a", "head_b")
    src = claims_mod.flip_row(ev) if flipped else ev   # the row as it stands in the table
    hit = comparisons.index[np.logical_and.reduce([comparisons[k] == src[k] for k in keys])]
    found = unstated.sensitivity(comparisons, hit[0], config["published"]["unstated_n"], settings, checks=checks)
    if found is None:
        return {}
    pairs, rows, why, _ = found
    table_row = comparisons.loc[hit[0]].to_dict()   # already judged over the set (unstated.apply)
    span = unstated.ranges(rows)
    return dict(row=claims_mod.flip_row(table_row) if flipped else table_row, n_unstated=why,
                n_combinations=len(rows), p_min=span["n_set_welch_p_min"], p_max=span["n_set_welch_p_max"],
                tost_p_min=span["n_set_tost_p_min"], tost_p_max=span["n_set_tost_p_max"],
                ci_low_min=span["n_set_diff_ci_low"], ci_high_max=span["n_set_diff_ci_high"])


def _correlation_claim(pub, row, claim, corpus, settings) -> dict | None:
    spec = claim["correlation"]
    hits = pub[(pub["kind"] == "correlation") & (pub["metric"] == spec["name"]) & (pub["corpus"] == corpus)]
    full = hits[hits["n"].notna()]
    if full.empty:
        return None
    ev = full.iloc[0]
    r, n = float(ev["mean"]), int(ev["n"])
    level = 1 - settings.alpha
    low, high = fisher_ci(r, n, level)
    p = fisher_p(r, n)   # the test the interval inverts: the verdict is decided on the interval
    verdict, reason = claims_mod.judge_correlation(claim["expect"], r, p, n, settings, ci=(low, high),
                                                   weak_below=claim.get("weak_below"),
                                                   p_name="fisher z p from (r, n)")
    others = hits[hits["n"].isna()]
    if len(others):
        reason += "; " + "; ".join(f"{o['row']}: r = {o['mean']:g} ({o['n_basis']}; no interval)" for _, o in others.iterrows())
    sign = " Sign convention not stated by the paper." if "sign" in str(ev.get("note", "")) else ""
    return dict(row, kind="correlation", verdict=verdict, reason=reason, evidence_table="published.csv",
                evidence=f"published r; set={ev['set']}; {ev['source']}.{sign}", n_a=n,
                estimate_name=f"{spec.get('method', 'pearson')} r (published)", estimate=r, ci_low=low,
                ci_high=high, ci_level=level, ci_how=f"1 - alpha = {level:.4g} (fisher-z; a single test, no adjustment)",
                rule="weak" if claim["expect"] == "weak" else "excludes",
                null=float(claim.get("weak_below") or 0.0) if claim["expect"] == "weak" else 0.0, margin=math.nan,
                family="", family_m=1,
                p_name=("fisher z p from (r, n) (H0: rho = 0; the test the interval inverts), two-sided, uncorrected; "
                        "a permutation p needs per-run values"), p=p,
                evidence_set=ev["set"], n_basis=ev["n_basis"], published_p="", published_p_test="", p_reproduced="")


def untestable_table(pub: pd.DataFrame, config: dict, judged: pd.DataFrame) -> pd.DataFrame:
    """Claims resting on single runs or numbers without spread: their numbers, never a verdict."""
    claims = {c["id"]: c for c in config.get("claims") or []}
    rows = []
    loose = pub[pub["kind"].isin(["single_run", "no_spread"])]
    for (set_, table, paper, cid), part in loose.groupby(["set", "table", "paper", "claim_id"], sort=False):
        claim = claims.get(cid, {})
        numbers = "; ".join(
            f"{corpus or 'corpus unstated'} {row}: " + ", ".join(f"{m} {v:g}" for m, v in zip(g["metric"], g["mean"]))
            for (corpus, row), g in part.groupby(["corpus", "row"], sort=False))
        kind = part["kind"].iloc[0]
        statement = claim.get("statement") or "(no claim of the claims file rests on this table alone)"
        rows.append(dict(claim_id=cid, source=claim.get("source", paper), statement=statement,
                         paper=paper, table=table, set=set_, kind=kind, n_basis="; ".join(dict.fromkeys(part["n_basis"])),
                         numbers=numbers,
                         reason=Gate.UNTESTABLE.because("one run, no spread" if kind == "single_run"
                                                        else "no spread reported")))
    judged_ids = set(judged["claim_id"]) if len(judged) else set()
    listed = {r["claim_id"] for r in rows}
    for cid, claim in claims.items():
        if cid not in judged_ids and cid not in listed:
            rows.append(dict(claim_id=cid, source=claim["source"], statement=claim.get("statement", ""), paper="",
                             table="", set="", kind="none", n_basis="", numbers="",
                             reason=Gate.UNTESTABLE.because(str(claim["untestable"])) if "untestable" in claim
                             else "no published numbers for these heads"))
    return pd.DataFrame(rows, columns=UNTESTABLE_COLUMNS)


def published_tables(config: dict, settings: Settings, path=None, source: str = "config") -> dict[str, pd.DataFrame]:
    """All three tables; ``path`` overrides ``published.data`` (None: the packaged table)."""
    config = dict(config, claims=check_section("claims", config.get("claims"), source),
                  published=check_section("published", config.get("published") or {}, source))
    section = config["published"]
    pub = load_published(path if path is not None else section.get("data"))
    checks: dict = {}   # the unstated-n family checks: run once, read by the claims too
    comp = comparisons_table(pub, config, settings, source, checks)
    judged = claims_table(pub, config, comp, settings, checks)
    return {"published_comparisons": comp, "published_claims": judged,
            "published_untestable": untestable_table(pub, config, judged)}
