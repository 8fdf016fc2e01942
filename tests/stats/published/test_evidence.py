"""The published record: the data file, statistics from summaries, reproduction of every printed
p-value, and the published claims/untestable tables. Golden values come from R's t.test on
samples with exactly the printed mean and SD (tests/fixtures/r_golden.R) and from the pooled
t-test written out by hand; the module itself calls SciPy/statsmodels."""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from audit.config import read_claims_file
from audit.errors import AuditError
from audit.stats import tests as raw_tests
from audit.stats.io import Settings
from audit.stats.published.evidence import PUBLISHED_CSV, load_published, published_tables
from audit.stats.published.reproduce import reproduce, sig_digits
from audit.stats.published.summaries import (NEEDS_RAW, compare_summary, delta_ci, load_summaries,
                                       tost_from_stats, welch_from_stats)
from helpers import copy_workflow, r_two_sample

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = Settings()


def pooled_p(mean_a, sd_a, n_a, mean_b, sd_b, n_b):
    """Two-sided Student p from summaries, written out (pooled variance, n_a + n_b - 2 df)."""
    pooled = ((n_a - 1) * sd_a ** 2 + (n_b - 1) * sd_b ** 2) / (n_a + n_b - 2)
    t = (mean_a - mean_b) / math.sqrt(pooled * (1 / n_a + 1 / n_b))
    return 2 * stats.t.sf(abs(t), n_a + n_b - 2)


@pytest.fixture(scope="module")
def pub():
    return load_published()


@pytest.fixture(scope="module")
def tables():
    config = {"claims": read_claims_file(ROOT / "configs" / "claims.yaml"), "published": {}}
    return published_tables(config, SETTINGS)


def exact_sample(mean, sd, n, seed=0):
    z = np.random.default_rng(seed).normal(size=n)
    return mean + sd * (z - z.mean()) / z.std(ddof=1)


def test_data_file_is_packaged_and_every_number_has_its_source(pub):
    assert PUBLISHED_CSV.is_file()
    assert "data/*.csv" in (ROOT / "pyproject.toml").read_text()
    assert (pub[["paper", "table", "n_basis", "kind"]] != "").all().all()
    seeds = pub[pub["kind"] == "seeds"]
    assert set(seeds["n"]) == {10.0, 11.0}
    # one n basis per set: a test never mixes the 11-seed table with the 10-seed one
    assert (seeds.groupby("set")["n"].nunique() == 1).all()
    assert set(seeds[seeds["n"] == 11]["table"]) == {"LK-paper Table 2", "LK-paper Tables 3/4"}
    # LK-paper Table 2 (11 seeds) and LK-SM Table 1 (10 seeds) hold the same ten arms
    t2 = seeds[(seeds["set"] == "lk-table2") & (seeds["metric"] == "test_ppl")]
    t1 = seeds[seeds["set"] == "lk-sm-table1"]
    assert len(t2) == len(t1) == 10
    assert (pub[pub["kind"] == "single_run"]["n"] == 1).all()


def test_every_published_p_reproduces_but_the_table5_one(pub, tables):
    printed = pub[pub["published_p"] != ""]
    assert len(printed) == 11
    comp = tables["published_comparisons"]
    rows = comp[comp["published_p"] != ""]
    assert len(rows) == len(printed)
    for _, r in printed.iterrows():
        b = pub[(pub["set"] == r["set"]) & (pub["corpus"] == r["corpus"]) & (pub["head"] == r["p_vs"])
                & (pub["metric"] == r["metric"])].iloc[0]
        p = pooled_p(r["mean"], r["sd"], 10, b["mean"], b["sd"], 10)
        digits = sig_digits(r["published_p"])
        same = float(f"{p:.{digits - 1}e}") == float(f"{float(r['published_p']):.{digits - 1}e}")
        row = rows[(rows["corpus"] == r["corpus"]) & (rows["head_a"] == r["head"])].iloc[0]
        assert row["student_p"] == pytest.approx(p, rel=1e-9)
        assert row["p_reproduced"] == ("yes" if same else "no")
        assert same == (r["table"] != "LK-paper Table 5"), r["source"]


def test_the_unreproducible_p_and_the_n_that_would_give_it():
    ok, text = reproduce(56.39, 0.19, 10, 56.45, 0.10, 10, "0.62")
    assert not ok and "0.389" in text
    # independently: equal n = 3 gives 0.654 and n = 4 0.596, so no equal n gives 0.62 ...
    p = lambda n, m=None: pooled_p(56.39, 0.19, n, 56.45, 0.10, m or n)
    assert round(p(3), 3) == 0.654 and round(p(4), 3) == 0.596
    assert f"{optimize.brentq(lambda n: p(n) - 0.62, 3, 4):.2f}" in text
    # ... but 10 MoS-dagger runs against 3 Softmax-double-dagger runs do
    assert round(p(10, 3), 2) == 0.62 and "(10, 3)" in text
    assert reproduce(57.03, 0.15, 10, 57.08, 0.10, 10, "3.92e-1")[0]


def test_welch_tost_and_g_from_summaries_match_the_raw_sample_versions():
    a, b = exact_sample(56.81, 0.11, 10, 1), exact_sample(57.08, 0.10, 12, 2)
    w = welch_from_stats(56.81, 0.11, 10, 57.08, 0.10, 12)
    _, _, r = r_two_sample("exact_summaries")  # R's t.test on samples with exactly these summaries
    # R prints 15 digits and builds t from the samples: agreement to ~1e-12, so rel=1e-9
    for key, col in (("t", "welch_t"), ("df", "welch_df"), ("p", "welch_p"), ("ci_low", "ci_low"),
                     ("ci_high", "ci_high")):
        assert w[key] == pytest.approx(r[col], rel=1e-9)
    tost = tost_from_stats(56.81, 0.11, 10, 57.08, 0.10, 12, 0.3)
    assert tost == pytest.approx(r.tost_p, rel=1e-9)
    row = compare_summary(dict(mean=56.81, sd=0.11, n=10), dict(mean=57.08, sd=0.10, n=12), True, 0.3, SETTINGS)
    assert row["hedges_g"] == pytest.approx(float(raw_tests.hedges_g(a, b)), rel=1e-9)
    assert row["student_p"] == pytest.approx(raw_tests.student_p(a, b), rel=1e-9)
    # what needs the values themselves is left empty, never computed from invented samples
    for key in ("rank_test_p", "prob_superiority", "prob_superiority_ci_low", "aso_eps_min"):
        assert math.isnan(row[key])
    assert "needs per-seed values" in row["not_computed"] == NEEDS_RAW


def test_delta_interval_coverage_and_large_n_agreement():
    # large n: the noncentral-t interval approaches d +- z * sqrt(1/n_a + 1/n_b + d^2 / (2 (n_a + n_b)))
    d, n = 0.5, 400
    low, high = delta_ci(d / math.sqrt(2 / n), n, n, 0.95)
    half = 1.959964 * math.sqrt(2 / n + d * d / (4 * n))
    assert (low, high) == pytest.approx((d - half, d + half), abs=0.01)
    # small n: Monte Carlo coverage of the true delta is 95% within 3 MC SEs
    rng, delta, hits, sims = np.random.default_rng(7), 0.8, 0, 600
    for _ in range(sims):
        x, y = rng.normal(delta, 1, 10), rng.normal(0, 1, 10)
        t = stats.ttest_ind(x, y).statistic
        lo, hi = delta_ci(t, 10, 10, 0.95)
        hits += lo <= delta <= hi
    assert abs(hits / sims - 0.95) < 3 * math.sqrt(0.95 * 0.05 / sims)


def test_verdicts_use_welch_and_holm_within_the_papers_table(tables):
    comp = tables["published_comparisons"]
    t2 = comp[comp["family"] == "LK-paper Table 2"]
    assert len(t2) == 8 and (t2["family_size"] == 8).all()
    holm = raw_holm(t2["welch_p"].to_numpy())
    assert t2["p_adj"].to_numpy() == pytest.approx(holm)
    mos = t2[(t2["head_a"] == "mos") & (t2["corpus"] == "ptb")].iloc[0]
    assert mos["welch_p"] == pytest.approx(1.89e-11, rel=1e-2) and mos["verdict"] == "a_better"


def raw_holm(p):
    order = np.argsort(p)
    adj = np.maximum.accumulate([(len(p) - i) * p[j] for i, j in enumerate(order)])
    out = np.empty(len(p))
    out[order] = np.minimum(adj, 1)
    return out


def test_claims_from_published_numbers(tables):
    claims = tables["published_claims"].set_index(["claim_id", "corpus"])
    assert claims.loc[("mos-lowers-ppl", "ptb"), "verdict"] == "supported"
    assert claims.loc[("mos-lowers-ppl", "ptb"), "published_p"] == "2.02e-15"
    table5 = claims.loc[("mos-no-better-than-matched-softmax", "ptb")]
    assert table5["published_p"] == "0.62" and table5["p_reproduced"] == "no"
    assert "unstated" in table5["reason"]
    # "weak": Fisher-z interval of r = 0.48 over 72 grid models straddles 0.5
    weak = claims.loc[("logp-rank-correlation-is-weak", "ptb")]
    z, se = math.atanh(0.48), 1 / math.sqrt(69)
    assert (weak["ci_low"], weak["ci_high"]) == pytest.approx((math.tanh(z - 1.959964 * se), math.tanh(z + 1.959964 * se)))
    assert weak["verdict"] == "inconclusive" and "0.24" in weak["reason"]
    assert claims.loc[("logp-rank-correlates-with-ppl", "ptb"), "verdict"] == "supported"


def test_single_run_claims_are_listed_with_numbers_and_never_judged(tables):
    untestable, judged = tables["published_untestable"], tables["published_claims"]
    k = untestable[untestable["claim_id"] == "mos-rank-tracks-ppl-over-k"]
    assert set(k["table"]) == {"LK-SM Table 4", "LK-SM Table 5"}
    assert "press_rank 9980" in " ".join(k["numbers"]) and (k["reason"] == "untestable: one run, no spread").all()
    assert "mos-rank-tracks-ppl-over-k" not in set(judged["claim_id"])
    quoted = untestable[untestable["table"] == "LK-paper Table 1"]
    assert {"Kanai", "Ganea", "Yang"} <= {p.split()[0] for p in quoted["paper"]}
    assert "mixtape-abstract" in set(untestable["set"]) and "verdict" not in untestable.columns


def test_stats_verb_writes_the_published_tables_without_runs(tmp_path):
    config = tmp_path / "stats.yaml"
    config.write_text(f"claims_file: {ROOT / 'configs' / 'claims.yaml'}\npublished: {{}}\n")
    cmd = [sys.executable, "-m", "audit", "stats", "--config", str(config), "--out", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    for name in ("published_comparisons", "published_claims", "published_untestable"):
        assert len(pd.read_csv(tmp_path / f"{name}.csv"))
    bad = subprocess.run(cmd + ["--table", "comparisons"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 1 and "needs --runs" in bad.stderr


def test_summary_input_errors(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("corpus,head,metric,mean,sd,n,source\nptb,a,test_ppl,57,-1,10,x\n")
    with pytest.raises(AuditError, match="negative"):
        load_summaries(path)
    path.write_text("corpus,head,metric,mean,sd,source\nptb,a,test_ppl,57,1,x\n")
    with pytest.raises(AuditError, match="'n'"):
        load_summaries(path)
    path.write_text("corpus,head,metric,mean,sd,n,source\nptb,a,test_ppl,57,1,2.5,x\n")
    with pytest.raises(AuditError, match="whole numbers"):
        load_summaries(path)
    # the runs table's parser (audit.stats.io.numeric_column): the file, column, value and row
    path.write_text("corpus,head,metric,mean,sd,n,source\nptb,a,test_ppl,57,1,10,x\nptb,b,test_ppl,5x,1,10,y\n")
    with pytest.raises(AuditError, match=r"s.csv: column 'mean' has non-numeric value '5x' \(row 3\)"):
        load_summaries(path)


def test_student_p_from_summaries_is_undefined_below_two_runs_or_without_spread():
    # one implementation (summaries.student_p_from_stats) behind the reproduction of printed p's:
    # SciPy alone would give a number at n = 1 (df = 1 + 2 - 2) and p = nan with a warning at SD 0
    from audit.stats.published import reproduce as rep
    assert math.isnan(rep.student_p(5.0, 0.3, 1, 5.5, 0.2, 2))
    assert math.isnan(rep.student_p(5.0, 0.0, 4, 5.5, 0.0, 4))
    # hand-worked: pooled SD 1, t = 1 / sqrt(2/8) = 2, df = 14: p = 2 P(T_14 > 2) = 0.065288 (t tables)
    assert rep.student_p(1.0, 1.0, 8, 0.0, 1.0, 8) == pytest.approx(0.065288, abs=1e-6)


def test_page_opens_with_the_published_evidence(tmp_path, tables):
    from audit.report.render import render

    paths = []
    for name, table in tables.items():
        table.to_csv(tmp_path / f"{name}.csv", index=False)
        paths.append(str(tmp_path / f"{name}.csv"))
    (tmp_path / "config.yaml").write_text("study: published\n")
    page = render(None, str(tmp_path / "config.yaml"), paths, [])
    assert 'id="published"' in page and page.count("not reproduced") == 1   # the Table 5 claim
    assert "untestable: one run, no spread" in page and "2.02e-15" in page


@pytest.mark.slow
def test_published_study_end_to_end(tmp_path):
    copy_workflow(tmp_path)
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "configs/published.yaml"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    page = (tmp_path / "reports" / "published" / "audit.html").read_text()
    assert "Published evidence" in page and not (tmp_path / "results" / "published" / "runs").exists()


def test_a_plain_summary_table_is_enough(tmp_path):
    """docs/published.md: `--summaries MY.csv` takes any table of rows (corpus, head, metric, mean, sd, n,
    source): one set of its own; arms with an SD and n >= 2 are tested, a single run is listed."""
    path = tmp_path / "mine.csv"
    path.write_text("corpus,head,metric,mean,sd,n,source\n"
                    "ptb,softmax,test_ppl,57.08,0.10,10,my table\n"
                    "ptb,plif,test_ppl,56.81,0.11,10,my table\n"
                    "ptb,mos,test_ppl,56.07,,1,my single run\n")
    claims = [{"id": "p", "source": "s", "comparison": {"head_a": "plif", "head_b": "softmax", "metric": "test_ppl"},
               "expect": "lower"},
              {"id": "m", "source": "s", "comparison": {"head_a": "mos", "head_b": "softmax", "metric": "test_ppl"},
               "expect": "lower"}]
    out = published_tables({"claims": claims, "published": {}}, SETTINGS, path)
    judged = out["published_claims"].set_index("claim_id")
    ref = r_two_sample("exact_summaries_10")[2].welch_p   # R's Welch t.test on exact samples
    assert judged.loc["p", "verdict"] == "supported" and judged.loc["p", "p"] == pytest.approx(ref, rel=1e-9)
    assert "m" not in judged.index
    listed = out["published_untestable"]
    assert (listed["kind"] == "single_run").any() and "test_ppl 56.07" in " ".join(listed["numbers"])


def test_declared_families_expand_patterns_and_keep_absent_arms_as_not_run(tmp_path):
    # issue 20: against ['gss_*', 'plif', 'plfi'] returned only the plif rows and Holm used m = 1
    path = tmp_path / "s.csv"
    path.write_text("corpus,head,metric,mean,sd,n,source\n"
                    "ptb,softmax,test_ppl,57.08,0.10,10,x\nptb,gss_c0,test_ppl,57.02,0.13,10,x\n"
                    "ptb,gss_c1,test_ppl,56.80,0.12,10,x\nptb,plif,test_ppl,56.81,0.11,10,x\n")
    spec = {"family": "g", "baseline": "softmax", "against": ["gss_*", "plif", "plfi", "moc_*"],
            "metrics": ["test_ppl"]}
    config = {"published": {"comparisons": [{"set": "summaries", "compare": spec}]}}
    comp = published_tables(config, SETTINGS, path=path)["published_comparisons"]
    fam = comp[comp["family"] == "g"]
    assert list(fam["head_a"]) == ["gss_c0", "gss_c1", "plif", "plfi", "moc_*"]
    absent = fam[fam["head_a"].isin(["plfi", "moc_*"])]
    assert (absent["verdict"] == "inconclusive").all() and absent["reason"].str.startswith("not run: no multi-seed row of").all()
    assert (fam["family_size"] == 3).all() and (fam["family_dropped"] == 2).all()
    assert set(fam["family_note"]) == {"m = 3 defined Welch tests of 5 rows; dropped: 2 not run"}
    # Holm over the three defined Welch p's, computed here from the summaries (Welch-Satterthwaite)
    def welch_p(m, s, m0=57.08, s0=0.10, n=10):
        se2 = s ** 2 / n + s0 ** 2 / n
        df = se2 ** 2 / ((s ** 2 / n) ** 2 / (n - 1) + (s0 ** 2 / n) ** 2 / (n - 1))
        return 2 * stats.t.sf(abs(m - m0) / math.sqrt(se2), df)
    raw = np.array([welch_p(57.02, 0.13), welch_p(56.80, 0.12), welch_p(56.81, 0.11)])
    assert fam["p_adj"].to_numpy()[:3] == pytest.approx(raw_holm(raw), rel=1e-9)


def test_a_claim_on_an_unstated_n_is_judged_over_every_n_that_reproduces_the_printed_p(tables):
    # issue 20: LK-paper Table 5 was "supported" on an assumed n = 10 per arm, which does not
    # reproduce the printed p = 0.62; the verdict must hold at every n that does, or not stand
    claims = tables["published_claims"].set_index(["claim_id", "corpus"])
    row = claims.loc[("mos-no-better-than-matched-softmax", "ptb")]
    assert row["verdict"] == "inconclusive"
    # independently: the (n_a, n_b) in 3..20 whose Student p rounds to 0.62 (SciPy from summaries)
    keep = [(i, j) for i in range(3, 21) for j in range(3, 21)
            if round(stats.ttest_ind_from_stats(56.39, 0.19, i, 56.45, 0.10, j).pvalue, 2) == 0.62]
    assert keep == [(8, 3), (9, 3), (10, 3)]
    assert "(8, 3), (9, 3), (10, 3)" in row["n_unstated"] and "inconclusive at every n of the set" in row["reason"]

    def tost(i, j, margin=0.2):   # two one-sided Welch tests, hand-written from the summaries
        va, vb = 0.19 ** 2 / i, 0.10 ** 2 / j
        se, df = math.sqrt(va + vb), (va + vb) ** 2 / (va ** 2 / (i - 1) + vb ** 2 / (j - 1))
        d = 56.39 - 56.45
        return max(stats.t.sf((d + margin) / se, df), stats.t.cdf((d - margin) / se, df))
    assert f"(10, 3) [welch p 0.495, tost p {tost(10, 3):.3g}]" in row["reason"] and f"{tost(10, 3):.3g}" == "0.0688"
    assert (row["tost_p_min"], row["tost_p_max"]) == pytest.approx((tost(10, 3), tost(8, 3)), rel=1e-9)
    comp = tables["published_comparisons"]
    t5 = comp[comp["family"] == "LK-paper Table 5"].iloc[0]
    assert t5["verdict"] == "inconclusive" and t5["n_set_tost_p_min"] == pytest.approx(tost(10, 3), rel=1e-9)
    # a stated n is left alone
    assert (comp[comp["family"] == "LK-paper Table 2"]["n_unstated"] == "").all()


def test_without_a_printed_p_the_whole_range_is_tried_and_a_split_verdict_does_not_stand():
    from audit.stats.published.unstated import n_pairs, over_set
    row = dict(mean_a=1.0, sd_a=1.0, n_a=10, mean_b=0.0, sd_b=1.0, n_b=10, head_a="x", head_b="y",
               n_basis_a="unstated", n_basis_b="10 random seeds", published_p="")
    pairs, why = n_pairs(row, (3, 20))
    assert pairs == [(i, 10) for i in range(3, 21)] and "no printed p" in why
    rows = [dict(welch_p=0.01, tost_p=0.5), dict(welch_p=0.2, tost_p=0.6)]
    verdict, reason = over_set([(10, 10), (3, 10)], [("supported", ""), ("inconclusive", "")], rows, why)
    assert verdict == "inconclusive" and reason.startswith(
        "depends on the unstated n: supported for n = (10, 10) [welch p 0.01, tost p 0.5]; inconclusive for n = (3, 10)")
    with pytest.raises(AuditError, match="published.unstated_n"):
        n_pairs(row, (5, 4))
