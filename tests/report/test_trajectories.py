"""The trajectory tables and figure as the report rules build them (audit.report.builders through
the registry's CLI), from constructed run folders: no training, no statistics tables needed."""

from __future__ import annotations

import pandas as pd
import pytest

from audit.errors import AuditError
from audit.report import cli, levels
from audit.report.trajectories import page_marks
from tests.support.trajectory_study import fast_and_worse, slow_and_better, study_config, write_study


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The constructed fast-but-worse study, its two trajectory tables and the figure, each written
    by ``python -m audit report`` as its Snakemake rule runs it."""
    root = tmp_path_factory.mktemp("trajectory")
    _, dirs = write_study(root, {"fast": fast_and_worse, "slow": slow_and_better})
    study_config(root, "fast", "slow")
    common = ["--runs", str(root / "runs.csv"), "--config", str(root / "study.yaml"), "--run-dirs", *dirs]
    out = {name: root / f"{name}.{ext}" for name, ext in (("trajectories", "csv"), ("trajectory_marks", "csv"),
                                                          ("figure", "svg"))}
    assert cli.main(["table", "--name", "trajectories", *common, "--out", str(out["trajectories"])]) == 0
    assert cli.main(["table", "--name", "trajectory_marks", *common, "--trajectories", str(out["trajectories"]),
                     "--out", str(out["trajectory_marks"])]) == 0
    assert cli.main(["figure", "--name", "trajectories", "--runs", str(root / "runs.csv"), "--run-dirs", *dirs,
                     "--trajectories", str(out["trajectories"]), "--trajectory-marks", str(out["trajectory_marks"]),
                     "--out", str(out["figure"])]) == 0
    return out


def test_the_rules_write_the_trajectory_and_its_marks(built):
    table = pd.read_csv(built["trajectories"])
    assert sorted(table["epoch"].unique()) == list(range(1, 9))
    assert set(table["data"]) == {"validation, descriptive: a verdict per budget, not corrected over budgets"}
    marks = pd.read_csv(built["trajectory_marks"])
    claim = marks[marks["trace"] == "a-lowers-ppl"].iloc[0]
    assert claim["mark"] == "changed" and claim["since_tokens"] == 900_000
    # read back from CSV (empty look and claim_id cells), the page finds every claim's mark
    said = page_marks(marks)
    assert said["by_claim"][("a-lowers-ppl", "ptb")]["mark_head"].startswith("changed at 900,000 tokens")
    assert said["by_claim"][("a-raises-rank", "ptb")]["mark"] == "not traced"
    assert said["counts"] == {"changed": 1} and said["n_traced"] == 1
    assert [r["trace"] for r in said["comparisons"]] == ["pair: fast - slow"]


def test_the_marks_rule_reads_the_studys_held_share_from_its_config(built):
    """stats.trajectory.held_share reaches the marks through the config the rule passes (--config):
    fast-but-worse changed at 900,000 of 1,200,000 tokens, inside the last half, before the last 20%."""
    import yaml

    root = built["trajectories"].parent
    config = yaml.safe_load((root / "study.yaml").read_text())
    config["stats"]["trajectory"] = {"held_share": 0.2}
    (root / "study-share.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    out = root / "marks-share.csv"
    assert cli.main(["table", "--name", "trajectory_marks", "--runs", str(root / "runs.csv"), "--config",
                     str(root / "study-share.yaml"), "--run-dirs", *sorted(map(str, root.glob("ptb/*/*"))),
                     "--trajectories", str(built["trajectories"]), "--out", str(out)]) == 0
    claim = pd.read_csv(out).set_index("trace").loc["a-lowers-ppl"]
    assert claim["held_share"] == 0.2 and claim["since_tokens"] == 900_000
    assert claim["mark"] in ("held", "still moving") and "(at least the last 20% of the budget)" in claim["text"]
    said = page_marks(pd.read_csv(out))
    assert (said["held_share"], said["share"]) == (0.2, "20%")
    config["stats"]["trajectory"] = {"held_share": 2}
    (root / "study-bad.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    with pytest.raises(AuditError, match=r"study-bad.yaml: config key stats.trajectory.held_share: 2 is greater "
                                         r"than the maximum of 1$"):
        cli.main(["table", "--name", "trajectory_marks", "--runs", str(root / "runs.csv"), "--config",
                  str(root / "study-bad.yaml"), "--run-dirs", *sorted(map(str, root.glob("ptb/*/*"))),
                  "--trajectories", str(built["trajectories"]), "--out", str(root / "bad.csv")])


def test_the_figure_draws_one_small_multiple_per_traced_claim_with_its_mark(built):
    svg = built["figure"].read_text()
    assert svg.count("a-lowers-ppl (ptb)") == 1 and "a-raises-rank" not in svg
    assert "changed at 900,000 tokens" in svg
    level = pd.read_csv(built["trajectories"])["ci_level"].iloc[0]
    assert "fast − slow" in svg and f"band {levels.level(level)})" in svg   # the band's level, from the rows
    # one point per budget in each verdict's colour: 5 supported (green), 3 contradicted (red)
    assert svg.count("#1e8a44") >= 5 and svg.count("#c0282d") >= 3


def test_a_study_without_a_traced_claim_draws_an_empty_figure():
    from audit.plots import EMPTY_MARK
    from audit.report.trajectories import trajectory_figure

    empty = pd.DataFrame(columns=["kind", "claim_id", "corpus", "look", "epoch"])
    assert EMPTY_MARK in trajectory_figure(empty, pd.DataFrame(), pd.DataFrame(), None)


def test_the_page_marks_each_verdict_in_the_matrix_on_its_card_and_in_the_headline(built):
    from audit.report import builders
    from audit.report.render import render
    from audit.stats.claims import claims_table
    from audit.stats.comparisons import comparisons_table
    from audit.stats.correlations import correlations_table
    from audit.stats.io import Settings, load_config, load_runs

    root = built["trajectories"].parent
    runs, config = load_runs(root / "runs.csv"), load_config(root / "study.yaml")
    settings = Settings.from_config(config["stats"])
    claims = claims_table(runs, config, settings, comparisons_table(runs, config, settings),
                          correlations_table(runs, config, settings))
    claims.to_csv(root / "claims.csv", index=False)
    matrix = builders.cross_scale(builders.Sources({"stats_config": str(root / "study.yaml"),
                                                    "runs": str(root / "runs.csv"), "claims": str(root / "claims.csv")}))
    matrix.to_csv(root / "cross_scale.csv", index=False)
    figure = root / "trajectories.svg"
    figure.write_text(built["figure"].read_text())
    html = render(str(root / "runs.csv"), str(root / "study.yaml"),
                  [str(root / f"{n}.csv") for n in ("claims", "cross_scale", "trajectories", "trajectory_marks")],
                  [str(figure)])
    assert '<a href="#trajectories">Verdicts over training</a>' in html and '<section id="trajectories">' in html
    # the headline: 1 traced claim, changed (its trend test decides whether it also counts as moving)
    marks = pd.read_csv(built["trajectory_marks"])
    moving = int(marks.loc[marks["trace"] == "a-lowers-ppl", "moving"].astype(str).eq("True").sum())
    assert f"{moving} of 1 traced verdicts still moving" in html and "1 changed in the last half" in html
    matrix_html = html.split('id="verdict-matrix"')[1].split("</table>")[0]
    assert "this study over training" in matrix_html and ">changed at 900,000 tokens" in matrix_html
    assert matrix_html.count(">not traced</a>") == 2   # the rank and the correlation claims
    card = html.split('id="claim-a-lowers-ppl-ptb"')[1].split("</article>")[0]
    assert "over training</a>: changed at 900,000 tokens" in card
    assert "traced on valid_ppl per epoch (the claim is on test_ppl)" in card


def test_a_group_sequential_study_says_what_a_trajectory_means_beside_its_decisions(built):
    from audit.report.render import environment

    marks = page_marks(pd.read_csv(built["trajectory_marks"]))
    env = environment()
    context = dict(trajectories=marks, figures={}, present={"sequential": True, "trajectories": True}, n_runs=12,
                   sequential_groups=[], ci_levels={})
    section = env.get_template("sections/trajectories.html.j2").render(**context)
    assert "each look's runs are traced" in section and "it is not a sequential decision" in section
    assert "α = 0.05" in section   # the trend test's level, from the marks
    fixed = env.get_template("sections/trajectories.html.j2").render(**dict(context, present={"sequential": False}))
    assert "each look's runs are traced" not in fixed


def test_the_rules_write_a_suites_marks_over_its_checkpoints_and_the_page_lists_them(tmp_path):
    """The two checkpoint tables as their rules build them (the config's evidence: entry, the suite's
    checkpoints.csv beside its runs table), and the section of the page of a study with no runs of
    its own that lists them apart from any trajectory of its own."""
    from audit.report.render import environment
    from tests.support.checkpoint_suite import suite_config, write_suite

    runs = write_suite(tmp_path)
    suite_config(tmp_path, runs, share=0.25)
    config, table, marks = (str(tmp_path / "study.yaml"), tmp_path / "checkpoint_trajectories.csv",
                            tmp_path / "checkpoint_marks.csv")
    assert cli.main(["table", "--name", "checkpoint_trajectories", "--config", config, "--out", str(table)]) == 0
    assert cli.main(["table", "--name", "checkpoint_marks", "--config", config, "--checkpoint-trajectories",
                     str(table), "--out", str(marks)]) == 0
    assert sorted(pd.read_csv(table)["step"].unique()) == [1000, 2000, 3000, 4000]
    said = page_marks(None, pd.read_csv(marks))
    assert said["by_claim"] == {} and said["n_traced"] == 0   # never counted with this study's own verdicts
    assert said["share"] == "25%" and said["alpha"] == 0.05
    rows = {r["claim_id"]: r for r in said["checkpoints"]}
    assert rows["fast-lowers-ppl"]["mark_head"] in ("held since step 3,000", "still moving")
    assert rows["late-rise"]["mark_head"] == "not traced"
    section = environment().get_template("sections/trajectories.html.j2").render(
        trajectories=said, figures={}, present={"sequential": False}, n_runs=0, sequential_groups=[], ci_levels={})
    assert 'id="checkpoint-marks"' in section and 'id="trajectory-marks"' not in section
    assert "over at least the last 25% of the steps" in section and "<td class=\"l\">constructed</td>" in section
