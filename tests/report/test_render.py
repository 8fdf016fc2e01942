"""The HTML page: escaping, sections left out without inputs, evidence links, number formats."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import yaml

from audit.__main__ import main as audit_main
from audit.report import figures, render
from support.demo import HEADS, build_report, fabricate_study

EVIL_HEAD = "<i>evil</i>"


@pytest.fixture(scope="module")
def evil_page(tmp_path_factory):
    """A fabricated study with markup in a head name and in a config value, fully rendered."""
    folder = tmp_path_factory.mktemp("render")
    heads = {"softmax": HEADS["softmax"], EVIL_HEAD: HEADS["sigsoftmax"]}
    study = fabricate_study(folder, np.random.default_rng(5), heads=heads, failed=None,
                            description="<script>alert('x')</script> & <b>bold</b>")
    return build_report(study, folder).read_text(), study


def test_markup_from_tables_and_config_is_escaped(evil_page):
    """Null hypothesis of the check: some config/table string reaches the page unescaped."""
    html, _ = evil_page
    assert "<i>evil</i>" not in html and "&lt;i&gt;evil&lt;/i&gt;" in html
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "alert(&#39;x&#39;)" in html
    # the only <script> elements are the page's own sortable-table script
    assert len(re.findall(r"<script>", html)) == 1 and "<script>alert" not in html


def test_full_page_has_every_produced_section_and_working_links(evil_page):
    html, _ = evil_page
    ids = set(re.findall(r'id="([^"]+)"', html))
    for section in ("verdicts", "results", "comparisons", "ranks", "spread", "wordsim", "provenance", "warnings"):
        assert section in ids
    assert "qualitative" not in ids  # no top-k or Jacobian inputs: left out, not shown empty
    links = set(re.findall(r'href="#([^"]+)"', html))
    assert links and links <= ids  # every in-page link (contents, evidence) has its target
    assert any(link.startswith("cor-") for link in links)  # the correlation claim links its row
    assert html.count("<svg") == 4 and "<?xml" not in html


def test_sections_without_inputs_are_left_out(tmp_path, evil_page):
    _, study = evil_page
    empty = tmp_path / "strip.svg"
    empty.write_text(figures.empty_svg("nothing"))
    out = tmp_path / "audit.html"
    assert audit_main(["report", "html", "--runs", str(study["runs"]), "--config", str(study["resolved"]),
                       "--tables", str(study["tables"] / "results.csv"), "--figures", str(empty),
                       "--out", str(out)]) == 0
    html = out.read_text()
    sections = re.findall(r'<section id="([^"]+)"', html)
    assert sections == ["results"]
    assert "<svg" not in html and "No figure" not in html


def test_evidence_anchor_matches_the_row_ids():
    claim = {"evidence_table": "comparisons.csv", "corpus": "ptb",
             "evidence": "family=heads-vs-softmax; metric=test_ppl; sigsoftmax - softmax; margin=0.5"}
    assert render.evidence_anchor(claim) == "cmp-" + render.slug("heads-vs-softmax", "ptb", "test_ppl",
                                                                 "sigsoftmax", "softmax")
    assert render.evidence_anchor({"evidence_table": "claims (computed here)", "evidence": "x"}) == ""


def test_formats():
    assert render.fmt_p(0.0004) == "4.00e-04" and render.fmt_p(2.02e-15) == "2.02e-15"
    assert render.fmt_p(0.0123) == "0.0123" and render.fmt_p(0.5) == "0.5" and render.fmt_p(np.nan) == "–"
    assert render.fmt(1234.5678) == "1,234.57" and render.fmt(None) == "–" and render.fmt(7, 0) == "7"
    assert render.fmt_ci(1.0, 2.0, 1) == "[1.0, 2.0]" and render.fmt_ci(np.nan, 2) == ""
    assert render.rank_label("f_logits_erank_1e-4") == "f(logits) ε = 1e-4" and render.rank_label("press_rank") == "Press"


def test_empty_runs_table_is_an_error(tmp_path):
    runs = tmp_path / "runs.csv"
    pd.DataFrame(columns=["head", "seed", "status"]).to_csv(runs, index=False)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"study": "s"}))
    assert audit_main(["report", "html", "--runs", str(runs), "--config", str(config),
                       "--out", str(tmp_path / "a.html")]) == 1


def test_grid_section_shows_the_grid_table_and_figures(tmp_path, evil_page):
    """The grid section appears (table per corpus, option columns, inlined figure) only with grid.csv."""
    from audit.report import grid

    _, study = evil_page
    runs = pd.DataFrame([{"corpus": "ptb", "head": f"gss_c{c}_k{k}", "seed": str(s), "status": "ok",
                          "arm_group": "gss", "grid_c": float(c), "grid_k": float(k), "test_ppl": 100.0 + c + s,
                          "train_ppl": 80.0, "press_rank": 500.0 + 10 * k} for c in (-1, 1) for k in (2, 3)
                         for s in (1, 2)])
    table, figure = tmp_path / "grid.csv", tmp_path / "grid_heatmaps.svg"
    grid.grid_table(runs).to_csv(table, index=False)
    figure.write_text(grid.grid_heatmaps(runs))
    out = tmp_path / "audit.html"
    assert audit_main(["report", "html", "--runs", str(study["runs"]), "--config", str(study["resolved"]),
                       "--tables", str(study["tables"] / "results.csv"), str(table), "--figures", str(figure),
                       "--out", str(out)]) == 0
    html = out.read_text()
    assert re.findall(r'<section id="([^"]+)"', html) == ["results", "grid"] and 'href="#grid"' in html
    section = html[html.index('<section id="grid"'):]
    assert "<th>c</th><th>k</th>" in section and "gss_c-1_k3" in section and 'id="fig-grid-heatmaps"' in section
    # mean ± SD over the two seeds of (c=-1, k=2): test ppl 100 and 101
    assert "100.50 ± 0.71" in section


def test_qualitative_section_without_the_jacobian_figure(tmp_path):
    """A study with `jacobian: {contexts: 0}` has a top-k table but no jacobian figure."""
    runs = tmp_path / "runs.csv"
    pd.DataFrame([{"corpus": "ptb", "head": "softmax", "seed": 1, "status": "ok", "test_ppl": 100.0}]).to_csv(runs, index=False)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"study": "t", "heads": [{"name": "softmax"}]}))
    topk = tmp_path / "topk.csv"
    pd.DataFrame([{"corpus": "ptb", "position": 0, "context": "the", "target": "cat", "head": "softmax",
                   "seeds": 1, "in_top_k": 1, "median_rank": 3, "top": "a b c d e"}]).to_csv(topk, index=False)
    html = render.render(str(runs), str(config), [str(topk)], [])
    assert 'id="qualitative"' in html and "fig-jacobian" not in html and "a b c d e" in html


def test_untestable_numbers_become_a_model_by_metric_table():
    """The untestable table's numbers text parses into rows per model and the union of metrics (as
    printed); a model label with ', ' and ': ' stays whole; text of another form is left as is."""
    from audit.report.render import numbers_table

    table = numbers_table("ptb MoS K = 15, dropoutl = 0.29: test_ppl 56.07, press_rank 9979; "
                          "ptb sigsoftmax: press_rank 4640, test_ppl_gain -0.06")
    assert table == {"metrics": ["test_ppl", "press_rank", "test_ppl_gain"],
                     "rows": [("ptb MoS K = 15, dropoutl = 0.29", {"test_ppl": "56.07", "press_rank": "9979"}),
                              ("ptb sigsoftmax", {"press_rank": "4640", "test_ppl_gain": "-0.06"})]}
    assert numbers_table("") is None and numbers_table("free text without numbers") is None
    assert numbers_table("ptb x: test_ppl high") is None
