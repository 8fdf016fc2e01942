"""Every confidence level on the page is its own row's (issue 46, item 3: "the page assumes 95%").

A study declares ``stats.alpha``: its comparisons, correlations, word-similarity differences and
report tables (results, word-similarity rho) carry intervals at 1 - alpha, its one-sample claims
at 1 - 2 alpha, a sequential design at 1 - its alpha, each recorded in its table's ``ci_level``
(``rci_level``). Before, the page, the forest legend and the strip plot said "95%" whatever the
study declared, and the results and rho tables were at 95% whatever it declared. Here one page is
made by the real commands from a fabricated study (``support.demo``) with a one-sample claim, the
published record, the verdict matrix, both forest plots and a sequential history: at alpha = 0.1
no "95%" is printed anywhere, and at 0.1 and 0.05 every level a section prints is one its rows
recorded, and every level its rows recorded is printed. A scan of the template, the captions and
the plotting sources keeps a literal 95% from coming back.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from audit.report import forest
from audit.stats.sequential import interim
from audit.stats.sequential.history import history_table
from support.demo import _audit, build_report, fabricate_study
from tests.stats.sequential.test_interim import fabricate, study as sequential_study

REPO = Path(__file__).resolve().parents[2]
# a printed level: '90% CI', '90% Welch CI', '95% t-interval', 'Fisher-z 95% intervals', '95 % CI'
LEVEL = re.compile(r"(\d+(?:\.\d+)?)\s?%\s(?:[\w-]+\s)?(?:[\w-]*intervals?|CIs?)\b")
# section id -> the tables (level column, the interval's lower end) whose rows it prints; the
# strip plot (section spread) draws at the study's level, as the results table does
SECTIONS = {
    "scales": [("claims", "ci_level", "ci_low"), ("published_claims", "ci_level", "ci_low")],
    "published": [("published_claims", "ci_level", "ci_low"), ("published_comparisons", "ci_level", "diff_ci_low"),
                  ("published_comparisons", "tost_ci_level", "tost_ci_low")],
    "verdicts": [("claims", "ci_level", "ci_low")],
    "results": [("results", "ci_level", "test_ppl_ci_low")],
    "comparisons": [("comparisons", "ci_level", "diff_ci_low"), ("comparisons", "tost_ci_level", "tost_ci_low")],
    "sequential": [("sequential", "rci_level", "rci_low")],
    "ranks": [("correlations", "ci_level", "pearson_ci_low")],
    "spread": [("results", "ci_level", "test_ppl_ci_low")],
    "wordsim": [("wordsim_rho", "ci_level", "ci_low"), ("wordsim_diffs", "ci_level", "diff_ci_low")],
}
ONE_SAMPLE = {"id": "softmax-rank-above-300", "source": "this test",
              "statement": "The Press rank of softmax's log-P is above 300",
              "one_sample": {"head": "softmax", "metric": "press_rank", "bound": 300, "test": "t"},
              "expect": "above"}


def _percent(value: float) -> str:
    return f"{round(100 * float(value), 2):g}"   # as audit.report.levels prints a Holm step's level


def _set_alpha(path: Path, alpha: float, **more) -> dict:
    config = yaml.safe_load(path.read_text())
    config.setdefault("stats", {})["alpha"] = alpha
    config.update(more)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return config


def _published(folder: Path, alpha: float, tables: Path, figures: Path) -> Path:
    """The published record's tables and forest plot at ``alpha`` (configs/published.yaml through
    the real commands). Claims whose own words say "95%" (Godey & Artzi's share of a norm: a
    statement, not a level) are left out, so that any "95%" left on the page is a level."""
    claims = yaml.safe_load((REPO / "configs" / "claims.yaml").read_text())
    claims["claims"] = [c for c in claims["claims"] if "95%" not in json.dumps(c, ensure_ascii=False)]
    (folder / "claims.yaml").write_text(yaml.safe_dump(claims, sort_keys=False))
    config = folder / "published.yaml"
    config.write_text((REPO / "configs" / "published.yaml").read_text())
    _set_alpha(config, alpha, claims_file=str(folder / "claims.yaml"))
    _audit("stats", "--config", config, "--summaries", REPO / "audit" / "data" / "published.csv", "--out", tables,
           "--table", "published_comparisons", "--table", "published_claims", "--table", "published_untestable")
    _audit("report", "figure", "--name", "published_forest", "--published-comparisons",
           tables / "published_comparisons.csv", "--out", figures / "published_forest.svg")
    return config


def _wordsim_diffs(made: dict, folder: Path) -> None:
    """The paired-bootstrap differences in rho (``wordsim_diffs``) from fabricated per-pair cosines
    of every successful run (the demo study writes no per-pair table)."""
    rng = np.random.default_rng(7)
    runs = pd.read_csv(made["runs"])
    gold = rng.uniform(0, 10, 12)
    pairs = pd.DataFrame([dict(corpus=r.corpus, head=r.head, seed=r.seed, benchmark="EN-RG-65", word1=f"a{i}",
                               word2=f"b{i}", gold=g, cosine=g / 10 + 0.3 * rng.standard_normal())
                          for r in runs[runs["status"] == "ok"].itertuples() for i, g in enumerate(gold)])
    pairs.to_csv(folder / "wordsim_pairs.csv", index=False)
    _audit("stats", "--runs", made["runs"], "--config", made["stats_config"], "--wordsim-pairs",
           folder / "wordsim_pairs.csv", "--out", made["tables"], "--table", "wordsim_diffs")


def _sequential(alpha: float, tables: Path) -> None:
    """A two-stage group-sequential history whose design takes the study's alpha."""
    config = sequential_study(seeds={"initial": 3, "step": 2, "max": 7, "futility_power": 0.0})
    config["stats"]["alpha"] = alpha
    record = interim.analyse(fabricate({"softmax": 5, "mos": 3, "ss": 5, "alone": 3}), config, 2)
    history_table(json.loads(json.dumps(record))).to_csv(tables / "sequential.csv", index=False)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """alpha -> (alpha, the page's HTML, its tables by name, its figures' SVG by name), each page
    made once."""
    made: dict[float, tuple] = {}

    def page(alpha: float) -> tuple:
        if alpha not in made:
            made[alpha] = _page(alpha, tmp_path_factory.mktemp(f"levels-{alpha}"))
        return made[alpha]

    return page


def _page(alpha: float, folder: Path) -> tuple:
    """The page of a fabricated study at ``alpha`` with every section that prints an interval."""
    made = fabricate_study(folder, np.random.default_rng(46))
    for path in (made["stats_config"], made["resolved"]):
        config = yaml.safe_load(path.read_text())
        _set_alpha(path, alpha, claims=config["claims"] + [ONE_SAMPLE])
    build_report(made, folder)   # stats and report tables, figures, provenance, the page
    tables, figures = made["tables"], made["figures"]
    _audit("report", "figure", "--name", "forest", "--comparisons", tables / "comparisons.csv",
           "--out", figures / "forest.svg")
    _published(folder, alpha, tables, figures)
    _audit("report", "table", "--name", "cross_scale", "--config", made["stats_config"], "--runs", made["runs"],
           "--claims", tables / "claims.csv", "--published-claims", tables / "published_claims.csv",
           "--out", tables / "cross_scale.csv")
    _sequential(alpha, tables)
    _wordsim_diffs(made, folder)
    out = folder / "levels.html"
    _audit("report", "html", "--runs", made["runs"], "--config", made["resolved"], "--tables",
           *sorted(tables.glob("*.csv")), "--figures", *sorted(figures.glob("*.svg")),
           "--provenance", made["reports"] / "provenance.json", "--out", out)
    return (alpha, out.read_text(), {p.stem: pd.read_csv(p) for p in tables.glob("*.csv")},
            {p.stem: p.read_text() for p in figures.glob("*.svg")})


def _section(html: str, key: str) -> str:
    assert f'<section id="{key}">' in html, f"section {key} is not on the page"
    return html.split(f'<section id="{key}">')[1].split("</section>")[0]


def _recorded(tables: dict, specs) -> set[str]:
    """The levels the rows of a section's tables recorded, over the rows that have an interval."""
    found = set()
    for name, column, low in specs:
        table = tables[name]
        assert column in table, f"{name}.csv records no {column}"
        rows = table[np.isfinite(pd.to_numeric(table[low], errors="coerce"))]
        found |= {_percent(v) for v in pd.to_numeric(rows[column], errors="coerce").dropna()}
    return found


def test_at_alpha_0_1_no_95_is_printed_and_90_is_beside_the_intervals(pages):
    _, html, tables, figures = pages(0.1)
    # a 95% is printed only where a row recorded it: a Holm step at alpha 0.1 over m = 2 tests
    # tested its hypothesis at 1 - 0.1 / 2 (issue 53); never as an assumed default
    recorded = {round(float(v), 6) for name in ("comparisons", "claims") if name in tables
                for v in pd.to_numeric(tables[name]["ci_level"], errors="coerce").dropna()}
    if re.search(r"95\s?%", html):
        assert 0.95 in recorded, re.findall(r".{80}95\s?%.{40}", html)
    steps = {round(1 - 0.1 / k, 6) for k in range(1, 20)}
    assert set(tables["comparisons"]["ci_level"].round(6)) <= steps and (tables["results"]["ci_level"] == 0.9).all()
    assert (tables["wordsim_rho"]["ci_level"] == 0.9).all()
    for name, figure in (("comparisons", "forest"), ("published_comparisons", "published_forest")):
        levels = set(tables[name]["ci_level"].round(6))
        if levels == {0.9}:   # one level: said once, in the heading and the legend
            assert "90% Welch CI" in figures[figure]
            if name == "comparisons":
                assert "diff A − B [90% CI]" in _section(html, "comparisons")
        else:                 # Holm steps at several levels: each row says its own
            assert "Welch CI (its level on each row)" in figures[figure], (name, levels)
    assert "90% CI (t)" in figures["strip"] and "90% CI (Fisher z)" in figures["rank_vs_ppl"]
    verdicts = _section(html, "verdicts")
    claims = tables["claims"].set_index("claim_id")
    for claim in ("softmax-rank-above-300", "sigsoftmax-lowers-ppl"):
        card = verdicts.split(f'id="claim-{claim}-ptb"')[1].split("</article>")[0]
        # the card prints its row's level: a one-sample claim's ends are its two one-sided bounds,
        # each at its Holm step (1 - s1 - s2, at most 1 - 2 alpha = 80%); a comparison's its step's
        printed = re.search(r"(\d+(?:\.\d+)?)% CI", card).group(1)
        assert float(printed) == pytest.approx(100 * claims.loc[claim, "ci_level"], abs=0.051), claim
    assert claims.loc["softmax-rank-above-300", "ci_level"] >= 0.8 - 1e-12


@pytest.mark.parametrize("alpha", [0.1, 0.05])
def test_every_printed_level_is_one_its_rows_recorded(pages, alpha):
    """Per section: the set of levels printed (headings, cells, captions, legends, titles) equals
    the set its tables' rows recorded, at alpha 0.1 and 0.05 (where a one-sample claim's 90%
    stands beside the comparisons' 95%)."""
    _, html, tables, _ = pages(alpha)
    for key, specs in SECTIONS.items():
        printed = {m.group(1) for m in LEVEL.finditer(_section(html, key))}
        assert printed == _recorded(tables, specs), (alpha, key, printed)
    assert _recorded(tables, SECTIONS["verdicts"]) == {_percent(1 - alpha), _percent(1 - 2 * alpha)}


def test_forest_legend_reads_the_tables_level():
    """The legend says the level the rows share; rows that differ each say their own; a table
    that states none says so, never an assumed 95%."""
    rows = pd.DataFrame([dict(family="f", metric="test_ppl", head_a=a, head_b="softmax", diff=d, diff_ci_low=d - 1,
                              diff_ci_high=d + 1, p_adj=0.01, alpha=0.1, ci_level=0.9, mb_ci_low=d - 1.2,
                              mb_ci_high=d + 1.2) for a, d in (("mos", -3.0), ("ss", -1.0))])
    svg = forest.forest(rows, "t")
    assert "90% Welch CI" in svg and "90% multi-bootstrap CI" in svg and not re.search(r"95\s?%", svg)
    mixed = forest.forest(rows.assign(ci_level=[0.9, 0.8]), "t")
    assert "Welch CI (its level on each row)" in mixed and "mos vs softmax · 90% CI" in mixed
    assert "ss vs softmax · 80% CI" in mixed
    assert "Welch CI of unstated level" in forest.forest(rows.drop(columns="ci_level"), "t")


SOURCES = [*sorted((REPO / "audit" / "report" / "templates").rglob("*.j2")), *sorted((REPO / "captions").glob("*.rst")),
           *sorted((REPO / "audit" / "report").glob("*.py")), REPO / "audit" / "plots.py"]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_source_of_the_page_assumes_a_level(path):
    """No template, caption or report/plot module writes a level of its own: no literal "95%" (or
    "95 %"), and no hard-wired 0.95 / 0.975 in the report's code; each comes from ``ci_level``
    or the study's 1 - stats.alpha (``audit.report.levels``)."""
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"95\s?%", text), f"{path.name} prints a literal 95%"
    if path.suffix == ".py":
        assert not re.search(r"(?<![\d.])0\.9(?:5|75)(?!\d)", text), f"{path.name} hard-wires a 95% level"
