"""Every mark on the page says what it is (issue 33): the guard's label on the sequential history,
and the verdict matrix's "not sequentially valid" warning when this study's seeds came in stages."""

import json

import pandas as pd

from audit.report import render, scales
from audit.report.builders import Sources, sequential
from audit.stats.sequential import interim
from audit.stats.sequential.history import history_table
from tests.stats.sequential.test_interim import fabricate, study

COUNTS = {"softmax": 5, "mos": 3, "ss": 5, "alone": 3}


def files(tmp_path, unigram):
    """A two-stage sequential study's decisions file, runs table (K = 2,000 on 82,429 scored test
    tokens), baselines row with the given unigram, and stats config."""
    config = study(seeds={"initial": 3, "step": 2, "max": 7, "futility_power": 0.0})
    runs = fabricate(COUNTS).assign(vocab_size=2000.0, test_tokens=82429.0)
    record = interim.analyse(fabricate(COUNTS), config, 2)
    paths = {k: str(tmp_path / f"{k}.{ext}") for k, ext in
             (("sequential", "json"), ("runs", "csv"), ("baselines", "csv"), ("stats_config", "yaml"))}
    (tmp_path / "sequential.json").write_text(json.dumps(record))
    runs.to_csv(paths["runs"], index=False)
    pd.DataFrame([dict(corpus="ptb", vocab_size=2000, n_test=82430, unigram_ppl=unigram)]).to_csv(
        paths["baselines"], index=False)
    (tmp_path / "stats_config.yaml").write_text(json.dumps({"stats": {"min_seeds": 3}}))
    return paths


def test_history_rows_from_an_arm_below_the_unigram_carry_the_guard(tmp_path):
    # softmax's median is about 57: below a unigram of 56 it is not informative, and every
    # comparison against it is; at 58 nothing is flagged
    table = sequential(Sources(files(tmp_path, 56.0)))
    assert table["guard"].str.startswith("not informative: ").all()
    assert table["guard"].str.contains("softmax: below the unigram baseline: median test ppl").all()
    assert (table["decision"] == "efficacy").any()   # the schedule's own decision is kept beside it
    assert (sequential(Sources(files(tmp_path, 58.0)))["guard"] == "").all()

    out = tmp_path / "sequential.csv"
    table.to_csv(out, index=False)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"study": "t"}))
    html = render.render(str(tmp_path / "runs.csv"), str(cfg), [str(out)], [])
    section = html.split('<section id="sequential">')[1].split("</section>")[0]
    row = section.split('<tr id="seq-f-ptb-test-ppl-mos-softmax-1">')[1].split("</tr>")[0]
    assert row.index("not informative</span>") < row.index("the design's decision:") < row.index(">efficacy<")


def test_the_verdict_matrix_warns_when_this_study_was_sequential(tmp_path):
    claims = pd.DataFrame([dict(claim_id="a", corpus="ptb", statement="A", verdict="supported", reason="r",
                                estimate_name="diff", estimate=1.0, ci_low=0.5, ci_high=1.5, ci_level=0.95)])
    matrix = tmp_path / "cross_scale.csv"
    scales.cross_scale_table([("this study", claims, "cpu", "claim-")]).to_csv(matrix, index=False)
    paths = files(tmp_path, 58.0)
    history = tmp_path / "sequential.csv"
    history_table(json.loads((tmp_path / "sequential.json").read_text())).to_csv(history, index=False)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"study": "t"}))
    page = render.render(paths["runs"], str(cfg), [str(matrix), str(history)], [])
    section = page.split('<section id="scales">')[1].split("</section>")[0]
    assert 'id="scales-not-sequential"' in section and "fixed-design tests: not sequentially valid" in section
    assert "(95% CI)" in section and "95% CI," not in section   # the level is in the cell, not assumed
    fixed = render.render(paths["runs"], str(cfg), [str(matrix)], [])
    assert "scales-not-sequential" not in fixed
