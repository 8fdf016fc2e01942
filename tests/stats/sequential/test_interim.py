"""The interim analysis of a group-sequential study (audit/stats/sequential/interim.py, history.py) on
fabricated runs: who stops, who gets seeds, and the sequentially valid numbers it reports."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from audit.config import check_study
from audit.errors import AuditError
from audit.stats import power
from audit.stats.sequential import boundaries as seq, interim, repeated, schedule, stopping
from audit.stats.sequential.history import design_power, history_table

HEADS = {"softmax": 57.0, "mos": 54.9, "ss": 57.0, "alone": 60.0}


def study(seeds=None, against=("mos", "ss"), **extra):
    return check_study({"study": "t", "heads": [{"name": h, "head": "softmax"} for h in HEADS],
                        "seeds": seeds if seeds is not None else {"initial": 3, "step": 2, "max": 7, "futility_power": 0.0},
                        "comparisons": [{"family": "f", "baseline": "softmax", "against": list(against),
                                         "metrics": ["test_ppl"], **extra}]})


def fabricate(counts: dict, sd: float = 0.1, seed: int = 1, means=HEADS) -> pd.DataFrame:
    """Runs of each head's first n seeds (seed numbers 1..n), test_ppl ~ N(mean, sd); a run's value
    depends only on (head, seed), so a later stage sees the same earlier runs."""
    rows = []
    for head, n in counts.items():
        for s in range(1, n + 1):
            rng = np.random.default_rng([seed, list(HEADS).index(head), s])
            rows.append(dict(corpus="ptb", head=head, seed=str(s), status="ok",
                             test_ppl=means[head] + sd * rng.standard_normal()))
    return pd.DataFrame(rows)


def by_head(record, key="head_a"):
    return {c[key]: c for c in record["comparisons"]}


def arms(record):
    return {a["head"]: (a["n"], a["next"]) for a in record["arms"]}


def test_seeds_of_a_stage_are_consecutive_from_first():
    spec = {"initial": 5, "step": 5, "max": 30, "first": 1}
    assert schedule.stage_sizes(spec) == [5, 10, 15, 20, 25, 30] == seq.stage_sizes(5, 5, 30)
    assert schedule.seeds_for(spec, 10) == list(range(1, 11))
    assert schedule.seeds_for({**spec, "first": 0}, 3) == [0, 1, 2]
    assert schedule.planned_seeds(study()) == list(range(1, 8))
    assert schedule.planned_seeds(check_study({"study": "t", "heads": [{"name": "softmax"}], "seeds": [4, 2]})) == [4, 2]


def test_design_settings_defaults_and_hsd_gamma():
    """The schema's defaults reach the design: the default is HSD spending with gamma 0 (linear,
    chosen by ``python -m audit bench sequential --compare``); a declared gamma is kept and one
    outside [-40, 40] is refused by the schema and by the design."""
    design = interim.design_of(schedule.design_settings(study()))
    assert (design.spending, design.gamma, design.futility_power) == ("hsd", 0.0, 0.0)
    assert stopping.Design().sizes == [4, 8, 12, 16, 20, 24, 28, 30]
    assert (stopping.Design().spending, stopping.Design().gamma) == ("hsd", 0.0)
    raw = {"initial": 3, "step": 2, "max": 7}  # no defaults filled: design_settings' own fallbacks agree
    assert schedule.design_settings({"seeds": raw}) == schedule.design_settings(study(seeds=dict(raw)))
    # `seeds: {}` asks for the default design whole: its looks too
    empty = study(seeds={})
    assert schedule.stage_sizes(empty["seeds"]) == stopping.Design().sizes
    assert interim.design_of(schedule.design_settings(empty)) == stopping.Design(futility_power=0.1)
    declared = study(seeds={"initial": 3, "step": 2, "max": 7, "spending": "hsd", "gamma": -2.5})
    assert interim.design_of(schedule.design_settings(declared)).gamma == -2.5
    with pytest.raises(AuditError, match="gamma"):
        study(seeds={"initial": 3, "step": 2, "max": 7, "spending": "hsd", "gamma": 41})
    with pytest.raises(AuditError, match="seeds.gamma"):
        stopping.Design(spending="hsd", gamma=math.inf)


def test_large_effect_stops_at_stage_1_and_its_arm_gets_no_more_seeds():
    record = interim.analyse(fabricate({"softmax": 3, "mos": 3, "ss": 3, "alone": 3}), study(), 1)
    mos, ss = by_head(record)["mos"], by_head(record)["ss"]
    assert mos["final_decision"] == "efficacy" and mos["stop_stage"] == 1
    assert ss["final_decision"] == "continue" and ss["stop_stage"] is None and not record["done"]
    # softmax and ss are still needed by ss-vs-softmax; mos is decided; "alone" is in no comparison
    assert arms(record) == {"softmax": (3, 5), "ss": (3, 5), "mos": (3, 3), "alone": (3, 3)}
    # the decision is Holm on the repeated p-values: rejected exactly when p_rep_adj < alpha
    assert mos["repeated_p_adj_final"] < 0.05 <= ss["repeated_p_adj_final"]
    # stage-wise p at a stage-1 stop is the Welch p itself (nothing was spent before)
    first = next(h for h in record["history"] if h["head_a"] == "mos")
    assert mos["stagewise_p"] == pytest.approx(first["welch_p"], rel=1e-9)
    assert first["welch_p"] < first["nominal_p"] and abs(first["z"]) > first["boundary_z"]


def test_a_null_comparison_continues_to_max_and_the_history_has_every_stage():
    config = study(against=("ss",), seeds={"initial": 3, "step": 2, "max": 7, "futility_power": 0.0})
    counts = {"softmax": 3, "ss": 3}
    for stage in (1, 2, 3):
        record = interim.analyse(fabricate(counts), config, stage)
        counts = {h: nxt for h, (n, nxt) in arms(record).items()}
        if stage < 3:
            assert not record["done"] and counts == {"softmax": 3 + 2 * stage, "ss": 3 + 2 * stage}
    assert record["done"] and counts == {"softmax": 7, "ss": 7}
    final = by_head(record)["ss"]
    assert final["final_decision"] == "max" and final["stop_stage"] == 3 and final["seeds_used"] == 7
    history = [h for h in record["history"] if h["head_a"] == "ss"]
    assert [(h["stage"], h["seeds_per_arm"], h["n_a"], h["decision"]) for h in history] == [
        (1, 3, 3, "continue"), (2, 5, 5, "continue"), (3, 7, 7, "max")]
    # the boundary of a look is the spending design's at the observed fractions (3/7, 5/7, 1)
    design = interim.design_of(schedule.design_settings(config))
    bounds = seq.boundaries(np.array([3, 5, 7]) / 7, 0.05, design.spending, 2, True, design.gamma)
    assert [h["boundary_z"] for h in history] == pytest.approx(bounds, rel=1e-6)
    # repeated CI at the last look: diff -/+ t_df(1 - nominal / 2) se, covering 0 here
    assert final["rci_low"] < final["diff"] < final["rci_high"] and final["rci_low"] < 0 < final["rci_high"]


def test_futility_stops_a_null_comparison_and_equivalence_needs_a_margin():
    record = interim.analyse(fabricate({"softmax": 5, "ss": 5}), study(
        against=("ss",), seeds={"initial": 5, "step": 5, "max": 30, "futility_power": 0.5}), 1)
    assert by_head(record)["ss"]["final_decision"] == "futility" and record["done"]
    record = interim.analyse(fabricate({"softmax": 5, "ss": 5}), study(
        against=("ss",), seeds={"initial": 5, "step": 5, "max": 30, "futility_power": 0.0},
        equivalence_margin=2.0), 1)
    assert by_head(record)["ss"]["final_decision"] == "equivalence"


def test_rerun_is_deterministic_and_a_changed_earlier_stage_is_an_error():
    config = study()
    stage1 = interim.analyse(fabricate({"softmax": 3, "mos": 3, "ss": 3, "alone": 3}), config, 1)
    runs2 = fabricate({"softmax": 5, "mos": 3, "ss": 5, "alone": 3})
    stage2 = interim.analyse(runs2, config, 2)
    assert json.dumps(stage2) == json.dumps(interim.analyse(runs2, config, 2))
    interim.check_previous(stage2, stage1)
    # ss's runs retrained with other numbers: stage 1's decision for ss no longer holds
    changed = fabricate({"softmax": 5, "mos": 3, "ss": 5, "alone": 3}, means={**HEADS, "ss": 54.9})
    with pytest.raises(AuditError, match="stage 1 decided 'continue' for ss vs softmax .* now give 'efficacy'"):
        interim.check_previous(interim.analyse(changed, config, 2), stage1)
    # and a stage with an arm short of the seeds a running comparison needs is refused
    with pytest.raises(AuditError, match="arm ptb/ss has 3 seeds but a comparison still running needs"):
        interim.analyse(fabricate({"softmax": 5, "mos": 3, "ss": 3, "alone": 3}), config, 2)


def test_runs_outside_the_schedule_are_refused():
    with pytest.raises(AuditError, match="arm ptb/ss has seeds"):
        interim.analyse(fabricate({"softmax": 3, "mos": 3, "ss": 4, "alone": 3}), study(), 1)


def test_seeds_against_the_fixed_design_of_equal_power():
    design = interim.design_of(schedule.design_settings(study()))
    p, fixed = design_power(0.2, 0.1, 0.1, design)
    # independent check of the design's power: simulate Z_k at the planned fractions
    t = np.array([3, 5, 7]) / 7
    bounds = seq.boundaries(t, 0.05, design.spending, 2, True, design.gamma)
    rng = np.random.default_rng(0)
    theta = 0.2 / math.sqrt(0.02 / 7)
    steps = rng.standard_normal((200_000, 3)) * np.sqrt(np.diff(np.r_[0, t]))
    z = (np.cumsum(steps, 1) + theta * t) / np.sqrt(t)
    assert p == pytest.approx((np.abs(z) >= bounds).any(1).mean(), abs=0.005)
    assert power.welch_power(0.1, 0.1, fixed, fixed, 0.2, 0.05) >= p > power.welch_power(0.1, 0.1, fixed - 1, fixed - 1, 0.2, 0.05)
    assert design_power(0.0, 0.1, 0.1, design)[1] != design_power(0.0, 0.1, 0.1, design)[1]   # NaN: no effect


def test_history_table_carries_the_final_numbers_on_the_last_look():
    config = study(seeds={"initial": 3, "step": 2, "max": 7, "futility_power": 0.0})
    interim.analyse(fabricate({"softmax": 3, "mos": 3, "ss": 3, "alone": 3}), config, 1)
    record = interim.analyse(fabricate({"softmax": 5, "mos": 3, "ss": 5, "alone": 3}), config, 2)
    table = history_table(json.loads(json.dumps(record)))
    assert list(zip(table["head_a"], table["stage"])) == [("mos", 1), ("ss", 1), ("ss", 2)]
    assert table["final_decision"].tolist() == ["efficacy", None, "continue"]
    assert table.loc[2, "seeds_used"] == 5 and table.loc[0, "seeds_used"] == 3


def test_verb_reads_run_folders_and_writes_the_record(tmp_path):
    runs = fabricate({"softmax": 3, "mos": 3, "ss": 3, "alone": 3})
    dirs = []
    for r in runs.to_dict("records"):
        d = tmp_path / "runs" / r["corpus"] / r["head"] / r["seed"]
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps({"study": "t", "corpus": "ptb", "head": r["head"],
                                                    "seed": int(r["seed"]), "status": "ok"}))
        (d / "eval.json").write_text(json.dumps({"test_ppl": r["test_ppl"]}))
        (d / "wordsim_pairs.csv").write_text("benchmark,word1,word2,gold,cosine\n")
        dirs.append(str(d))
    config = study()
    design = json.dumps({k: config[k] for k in ("study", "seeds", "comparisons", "stats")})
    out = tmp_path / "stage1.json"
    assert interim.main(["interim", "--design", design, "--stage", "1", "--run-dirs", *dirs, "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert arms(record) == {"softmax": (3, 5), "ss": (3, 5), "mos": (3, 3), "alone": (3, 3)}
    with pytest.raises(AuditError, match="is not the last one"):
        interim.main(["final", "--stage-file", str(out), "--out", str(tmp_path / "d.json")])


def test_the_page_shows_the_history_table(tmp_path):
    from audit.report import render

    config = study(seeds={"initial": 3, "step": 2, "max": 7, "futility_power": 0.0})
    record = interim.analyse(fabricate({"softmax": 5, "mos": 3, "ss": 5, "alone": 3}), config, 2)
    table = tmp_path / "sequential.csv"
    history_table(json.loads(json.dumps(record))).to_csv(table, index=False)
    runs = tmp_path / "runs.csv"
    fabricate({"softmax": 5, "mos": 3, "ss": 5, "alone": 3}).to_csv(runs, index=False)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(json.dumps({"study": "t"}))
    html = render.render(str(runs), str(cfg), [str(table)], [])
    section = html.split('<section id="sequential">')[1].split("</section>")[0]
    assert section.count('<tr id="seq-') == 3 and "seq-f-ptb-test-ppl-ss-softmax-2" in section
    assert "efficacy" in section and "Holm on repeated p-values" in section
    assert 'href="#sequential"' in html and "not-sequential" not in html   # no comparisons table given


def test_the_repeated_ci_excludes_zero_exactly_when_the_repeated_p_is_below_alpha():
    """Holm passes alpha on: ss misses its look-1 boundary at alpha / 2, then 'alone' is rejected
    at look 2 and ss is rejected at alpha on its look-1 repeated p, although its look-2 mean
    difference is -0.01. The reported interval is the intersection of the looks' repeated CIs, so
    it excludes 0 as the decision says; the look-2 interval alone straddles 0."""
    z = 0.1 * np.array([-1.0, 0.0, 1.0, -0.5, 0.5, 0.2, -0.2])
    values = {"softmax": 57.0 + z, "mos": 54.9 + z, "alone": 57.25 + z,
              "ss": np.array([56.65] * 3 + [57.5] * 4) + z}
    config = study(against=("mos", "ss", "alone"), seeds={"initial": 3, "step": 2, "max": 7, "futility_power": 0.0})
    counts = {h: 3 for h in values}
    for stage in (1, 2):
        runs = pd.DataFrame([dict(corpus="ptb", head=h, seed=str(s), status="ok", test_ppl=values[h][s - 1])
                             for h, n in counts.items() for s in range(1, n + 1)])
        record = interim.analyse(runs, config, stage)
        counts = {h: nxt for h, (n, nxt) in arms(record).items()}
    assert record["done"]
    history = {(h["head_a"], h["stage"]): h for h in record["history"]}
    assert history[("ss", 1)]["decision"] == "continue" and history[("ss", 2)]["decision"] == "efficacy"
    ss = by_head(record)["ss"]
    assert ss["stop_stage"] == 2 and ss["diff"] == pytest.approx(-0.01)
    design = interim.design_of(schedule.design_settings(config))
    levels = seq.nominal_levels(seq.boundaries(np.array([3, 5, 7]) / 7, 0.05, design.spending, 2, True, design.gamma))
    looks = [repeated.repeated_ci(h["diff"], h["diff"] / h["welch_t"], h["welch_df"], levels[k])
             for k, h in enumerate((history[("ss", 1)], history[("ss", 2)]))]
    assert looks[1][0] < 0 < looks[1][1] and looks[0][1] < 0            # look 2 alone straddles 0
    assert (ss["rci_low"], ss["rci_high"]) == pytest.approx((max(looks[0][0], looks[1][0]), min(looks[0][1], looks[1][1])))
    for c in record["comparisons"]:
        assert (c["rci_low"] > 0 or c["rci_high"] < 0) == (c["repeated_p"] < 0.05) == (c["final_decision"] == "efficacy")


def test_repeated_ci_over_looks_is_the_intersection_of_the_looks_intervals():
    from scipy import stats as st
    diff, se, df = np.array([3.0, 1.0, np.nan]), np.array([1.0, 0.8, np.nan]), np.array([6.0, 12.0, np.nan])
    p = 2 * st.t.sf(np.abs(diff / se), df)
    levels = np.array([0.01, 0.04, 0.05])
    lows = diff - st.t.isf(levels / 2, df) * se
    highs = diff + st.t.isf(levels / 2, df) * se
    assert repeated.repeated_ci_over_looks(diff, se, df, levels, 1, p=p) == pytest.approx(
        (max(lows[:2]), min(highs[:2])))
    assert repeated.repeated_ci_over_looks(diff, se, df, levels, 0, p=p) == pytest.approx((lows[0], highs[0]))
    assert repeated.repeated_ci_over_looks(diff, se, df, levels, 2, p=p) == pytest.approx(
        (max(lows[:2]), min(highs[:2])))
    # a look whose p is NaN (no new information) does not enter, though its diff and se are finite
    assert repeated.repeated_ci_over_looks(diff, se, df, levels, 1, p=[p[0], np.nan, np.nan]) == pytest.approx(
        (lows[0], highs[0]))
    # intervals that do not overlap: the latest look's that excludes 0 (here the stopping look's)
    far = np.array([3.0, -3.0])
    assert repeated.repeated_ci_over_looks(far, se[:2], df[:2], levels[:2], 1, p=p[:2]) == pytest.approx(
        (far[1] - st.t.isf(0.02, 12) * 0.8, far[1] + st.t.isf(0.02, 12) * 0.8))
    # ... and never a stopping look's interval that covers 0 while an earlier look excluded it
    # (look 0: [1.29, 8.71], look 1: [-0.72, 1.12]): the repeated p is below alpha, so is the CI
    diff2, se2 = np.array([5.0, 0.2]), np.array([1.0, 0.4])
    low, high = repeated.repeated_ci_over_looks(diff2, se2, df[:2], levels[:2], 1,
                                                p=2 * st.t.sf(np.abs(diff2 / se2), df[:2]))
    assert (low, high) == pytest.approx((5.0 - st.t.isf(0.005, 6), 5.0 + st.t.isf(0.005, 6))) and low > 0
    assert all(map(math.isnan, repeated.repeated_ci_over_looks([np.nan], [np.nan], [np.nan], [0.05], 0, p=[np.nan])))
