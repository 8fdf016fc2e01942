"""The cross-scale table: one row per claim, one column per source, scales and disagreements."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from audit.report import scales
from audit.report.builders import Sources, cross_scale

REPO = Path(__file__).resolve().parents[2]


def claims(rows):
    return pd.DataFrame([dict(claim_id=c, corpus="ptb", statement=f"claim {c}", verdict=v, reason="r",
                              estimate_name="diff = mean_a - mean_b (welch CI)", estimate=e, ci_low=e - 1,
                              ci_high=e + 1, ci_level=0.95) for c, v, e in rows])


def runs(d, k, tokens, means, unigram_ok=True):
    rows = []
    for head, mean in means.items():
        for s, v in enumerate((mean - 1, mean, mean + 1)):
            rows.append(dict(corpus="ptb", head=head, seed=str(s), status="ok", test_ppl=v, emb_size=d,
                             vocab_size=k, tokens_trained=tokens, test_tokens=82429))
    return pd.DataFrame(rows)


BASE = pd.DataFrame([dict(corpus="ptb", vocab_size=2000, n_test=82430, unigram_ppl=196.5, bigram_ppl=76.0)])


def test_matrix_rows_columns_and_disagreement():
    pub = claims([("a", "supported", -2.0), ("b", "contradicted", 3.0)])
    ours = claims([("a", "contradicted", 5.0), ("b", "contradicted", 1.5), ("c", "not_informative", np.nan)])
    gpu = claims([("a", "inconclusive", 0.5)])
    table = scales.cross_scale_table([("published", pub, "paper scale", "pub-claim-"),
                                      ("this study", ours, "cpu scale", "claim-"), ("gpu", gpu, "gpu scale", ""),
                                      ("empty", None, "x", "")])
    assert list(table["claim_id"]) == ["scale", "a", "b", "c"]
    assert [c for c in table.columns if c.startswith("verdict__")] == ["verdict__published", "verdict__this study",
                                                                       "verdict__gpu"]
    row = table.set_index("claim_id")
    assert list(row.loc["scale", ["cell__published", "cell__this study", "cell__gpu"]]) == [
        "paper scale", "cpu scale", "gpu scale"]
    assert row.loc["a", "agreement"] == "disagree: published supported, this study contradicted"
    assert row.loc["b", "agreement"] == "agree" and row.loc["c", "agreement"] == ""
    assert row.loc["a", "cell__this study"] == "contradicted: diff = mean_a - mean_b 5 [4, 6] (95% CI)"
    assert row.loc["a", "anchor__published"] == "pub-claim-a-ptb" and row.loc["a", "anchor__gpu"] == ""
    assert row.loc["c", "verdict__published"] == "" and row.loc["c", "cell__this study"] == "not informative: r"


def test_runs_scale_states_d_k_tokens_and_medians_against_the_unigram():
    text = scales.runs_scale(runs(32, 2000, 1.2e6, {"softmax": 90.0, "gss": 250.0}), BASE)
    assert text == ("ptb: d = 32, K = 2,000, tokens trained 1,200,000; median test ppl per arm 90.0-250.0 "
                    "vs unigram 196.5 (1 of 2 arms beat it); 1 of 2 arms not informative (the guard)")
    other = scales.runs_scale(runs(32, 10000, 5e4, {"softmax": 900.0}), BASE)
    assert other.endswith("vs unigram not computed for this vocabulary and these test tokens; "
                          "1 of 1 arms not informative (the guard)")
    # the same K on other test tokens has no baseline either (issue 33: K alone was matched)
    assert "not computed" in scales.runs_scale(runs(32, 2000, 5e4, {"softmax": 90.0}).assign(test_tokens=4999), BASE)


def test_each_cell_names_its_interval_level_and_a_guarded_cell_its_reason():
    """Issue 33: one-sample cells showed the 1 - 2 alpha interval under a caption saying 95%."""
    one = dict(claim_id="s", corpus="ptb", statement="", verdict="supported", reason="r",
               estimate_name="mean - bound (one-sample t CI)", estimate=-0.02, ci_low=-0.03, ci_high=-0.01,
               ci_level=0.9)
    assert scales.cell(one) == "supported: mean - bound -0.02 [-0.03, -0.01] (90% CI)"
    assert scales.cell(dict(one, ci_level=np.nan)).endswith("(CI of unstated level)")
    guarded = dict(one, verdict="not_informative",
                   reason="not informative: mos: no finite test perplexity (6 ok runs, 0 failed); "
                          "the test alone: supported: p small")
    assert scales.cell(guarded) == ("not informative: mos: no finite test perplexity (6 ok runs, 0 failed); "
                                    "the test alone: mean - bound -0.02 [-0.03, -0.01] (90% CI)")


def test_published_scale_matches_the_paper_config():
    paper = yaml.safe_load((REPO / "configs" / "paper-ptb.yaml").read_text())
    assert f"d = {paper['model']['emb_size']}" in scales.PUBLISHED_SCALE
    assert f"{paper['train']['epochs']} epochs = {paper['train']['epochs'] * 929_589:,}" in scales.PUBLISHED_SCALE


def test_builder_reads_the_evidence_runs_named_in_the_config(tmp_path):
    ours, gpu = runs(32, 2000, 1.2e6, {"softmax": 90.0}), runs(400, 2000, 9e8, {"softmax": 60.0})
    ours.to_csv(tmp_path / "runs.csv", index=False)
    gpu.to_csv(tmp_path / "gpu.csv", index=False)
    BASE.to_csv(tmp_path / "baselines.csv", index=False)
    claims([("a", "supported", -2.0)]).to_csv(tmp_path / "claims.csv", index=False)
    claims([("a", "contradicted", 2.0)]).assign(evidence_source="gpu").to_csv(tmp_path / "ev.csv", index=False)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"evidence": [
        {"name": "gpu", "runs": str(tmp_path / "gpu.csv"), "description": "a GPU study"}]}))
    table = cross_scale(Sources({"runs": str(tmp_path / "runs.csv"), "claims": str(tmp_path / "claims.csv"),
                                 "baselines": str(tmp_path / "baselines.csv"), "stats_config": str(tmp_path / "s.yaml"),
                                 "evidence_claims": str(tmp_path / "ev.csv")}))
    row = table.set_index("claim_id")
    assert row.loc["scale", "cell__gpu"].startswith("a GPU study: ptb: d = 400, K = 2,000, tokens trained 900,000,000")
    assert "verdict__published" not in table     # not given: no column
    assert row.loc["a", "agreement"] == "disagree: this study supported, gpu contradicted"


def test_an_evidence_column_says_how_its_seeds_came(tmp_path):
    """Issue 46, finding 4: a runs table from a group-sequential design named under ``evidence:``
    got fixed-design verdicts with no mark; one that records no design is now "design unknown"."""
    from audit.report.render import cross_scale as for_page, environment
    from audit.stats.sequential.schedule import design_text

    seq = design_text({"seeds": {"initial": 4, "step": 3, "max": 10}})
    assert seq == "sequential: looks at 4, 7, 10 seeds per arm (initial 4, step 3, max 10)"
    assert design_text({"seeds": [1, 2, 3]}) == "fixed: 3 seeds per arm"
    ours = runs(32, 2000, 1.2e6, {"softmax": 90.0}).assign(design="fixed: 3 seeds per arm")
    ours.to_csv(tmp_path / "runs.csv", index=False)
    runs(32, 2000, 1.2e6, {"softmax": 95.0}).assign(design=seq).to_csv(tmp_path / "default.csv", index=False)
    runs(32, 2000, 1.2e6, {"softmax": 80.0}).to_csv(tmp_path / "outside.csv", index=False)   # no design column
    BASE.to_csv(tmp_path / "baselines.csv", index=False)
    claims([("a", "supported", -2.0)]).to_csv(tmp_path / "claims.csv", index=False)
    pd.concat([claims([("a", "supported", -2.0)]).assign(evidence_source=name) for name in ("default", "outside")]
              ).to_csv(tmp_path / "ev.csv", index=False)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"evidence": [
        {"name": n, "runs": str(tmp_path / f"{n}.csv")} for n in ("default", "outside")]}))
    table = cross_scale(Sources({"runs": str(tmp_path / "runs.csv"), "claims": str(tmp_path / "claims.csv"),
                                 "baselines": str(tmp_path / "baselines.csv"), "stats_config": str(tmp_path / "s.yaml"),
                                 "evidence_claims": str(tmp_path / "ev.csv")}))
    scale = table.set_index("claim_id").loc["scale"]
    assert scale["design__default"] == seq and scale["design__this study"] == "fixed: 3 seeds per arm"
    assert scale["design__outside"].startswith("design unknown: the runs table does not record how its seeds came")
    # the page: the sequential evidence column carries the same mark as a sequential "this study"
    html = environment().from_string(
        '{% set present = {"sequential": False} %}{% set scales = m %}'
        + (REPO / "audit/report/templates/sections/scales.html.j2").read_text().split('<section id="scales">')[1]
        .split("</section>")[0]).render(m=for_page(table))
    header = html.split("<thead>")[1].split("</tr>")[0]
    assert header.count("fixed-design tests: not sequentially valid") == 1
    assert header.index("default") < header.index("not sequentially valid") < header.index("outside")
    assert header.count(">design unknown<") == 1
    assert "the runs table behind <em>default</em> was made by a group-sequential design (" + seq in html
    assert "the runs table behind <em>outside</em> records no design" in html


def test_the_runs_table_records_its_design(tmp_path):
    from audit.stats.io import load_runs
    from audit.stats.sources import UNKNOWN_DESIGN, design_of

    path = tmp_path / "r.csv"
    runs(32, 2000, 1.2e6, {"softmax": 90.0}).assign(design="sequential: looks at 4, 7 seeds per arm").to_csv(path, index=False)
    assert design_of(load_runs(path)) == "sequential: looks at 4, 7 seeds per arm"   # a text column
    assert design_of(runs(32, 2000, 1.2e6, {"softmax": 90.0})) == UNKNOWN_DESIGN


def _per_size(rows):
    """Claims rows judged per size: (claim id, verdict, statement)."""
    return claims([(c, v, 1.0) for c, v, _ in rows]).assign(statement=[s for *_, s in rows])


SIZE_CLAIMS = [{"id": "u", "statement": "claim u"},
               {"id": "u.s14", "one_sample": {"head": "s14"}}, {"id": "u.s410", "one_sample": {"head": "s410"}},
               {"id": "t.s14", "one_sample": {"head": "s14"}}, {"id": "t.s410", "one_sample": {"head": "s410"}},
               {"id": "x.y", "one_sample": {"head": "softmax"}}]   # a dot, but not its own head: no group


def size_matrix():
    ours = claims([("u", "supported", 1.0), ("x.y", "supported", 1.0)])
    suite = _per_size([("u.s14", "contradicted", "rarely (s14: d = 128, V = 50,304)"),
                       ("u.s410", "supported", "rarely (s410: d = 1024, V = 50,304)"),
                       ("t.s14", "supported", "the loss rises (s14: d = 128, V = 50,304)"),
                       ("t.s410", "contradicted", "the loss falls (s410: d = 1024, V = 50,304)")])
    return scales.cross_scale_table([("this study", ours, "cpu", "claim-"), ("suite", suite, "suite scale", "")],
                                    SIZE_CLAIMS)


def test_per_size_claims_follow_their_claim_and_disagree_only_across_sources():
    """Issue 55: a pretrained suite's claims are written per size (<id>.<model>); the matrix puts
    them under their claim, whose row is the study's own or one made from the sizes' statements."""
    table = size_matrix()
    # first-seen order (x.y comes with this study's column), each claim's sizes right after it
    assert list(table["claim_id"]) == ["scale", "u", "u.s14", "u.s410", "x.y", "t", "t.s14", "t.s410"]
    row = table.set_index("claim_id")
    assert list(row.loc[["u", "u.s14", "t", "t.s410", "x.y"], "member"]) == ["", "s14", "", "s410", ""]
    assert list(row.loc[["u", "u.s14", "t", "x.y"], "group"]) == ["u", "u", "t", ""]
    assert row.loc["u", "statement"] == "claim u"                                   # the study's own
    assert row.loc["t", "statement"] == "the loss rises / the loss falls"           # the sizes', size removed
    assert row.loc["u", "agreement"] == "disagree: this study supported, suite s14 contradicted, suite s410 supported"
    assert row.loc["t", "agreement"] == ""   # opposite signs of one source's sizes: the claim expects them
    assert row.loc["t", "verdict__suite"] == "" and row.loc["u.s14", "verdict__suite"] == "contradicted"


def test_the_page_draws_each_size_inside_its_claims_cell():
    from audit.report.render import environment

    matrix = scales.page_matrix(size_matrix())
    assert [r["claim_id"] for r in matrix["rows"]] == ["u", "x.y", "t"]
    html = environment().from_string(
        '{% set present = {"sequential": False} %}{% set scales = m %}'
        + (REPO / "audit/report/templates/sections/scales.html.j2").read_text().split('<section id="scales">')[1]
        .split("</section>")[0]).render(m=matrix)
    rows = {r.split("<br>")[1].split(" · ")[0].split(">")[-1]: r for r in html.split("<tbody>")[1].split("<tr>")[1:]}
    ours, suite = rows["u"].split('<td class="l verdict-cell">')[1:3]
    assert '<a href="#claim-u-ptb"><span class="badge v-supported">supported</span></a>' in ours
    sizes = re.findall(r'<li class="size" title="([^"]+)"><strong>(\w+)</strong> <span class="badge v-(\w+)">', suite)
    assert sizes == [("rarely (s14: d = 128, V = 50,304)", "s14", "contradicted"),
                     ("rarely (s410: d = 1024, V = 50,304)", "s410", "supported")]
    assert "not run" not in suite and "per size: <code>u.&lt;size&gt;</code>" in rows["u"]
    assert "verdict-cell\"><span class=\"badge v-not_run\">not run</span>" in rows["t"]   # this study: no size of t
    assert "<li" not in rows["x.y"]
