"""One-sample tests of a claim about one arm, against R (tests/fixtures/r_golden_one_sample.R)."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit.stats.one_sample import one_sample

GOLDEN = pd.read_csv(Path(__file__).resolve().parents[1] / "fixtures" / "r_golden_one_sample.csv")


@pytest.mark.parametrize("case", GOLDEN.to_dict("records"), ids=list(GOLDEN["id"]))
def test_against_r(case):
    x = np.array([float(v) for v in case["values"].split(";")])
    got = one_sample(x, case["bound"], case["expect"], case["test"], threshold=0.0, alpha=0.05)
    assert got["n"] == len(x) and got["ci_level"] == pytest.approx(0.90)
    for key in ("stat", "p", "p_opposite", "ci_low", "ci_high"):
        assert got[key] == pytest.approx(case[key], rel=1e-8, abs=1e-12), key
    assert got["estimate"] == pytest.approx(case["stat"] - case["bound"])


@pytest.mark.parametrize("case", GOLDEN.to_dict("records"), ids=list(GOLDEN["id"]))
def test_interval_ends_agree_with_the_one_sided_tests(case):
    # the 1 - 2 alpha interval's upper end lies below the bound exactly when the one-sided test
    # of "below" rejects at alpha, its lower end above exactly when that of "above" does
    x = np.array([float(v) for v in case["values"].split(";")])
    got = one_sample(x, case["bound"], "below", case["test"])
    assert (got["ci_high"] < case["bound"]) == (got["p"] < 0.05)
    assert (got["ci_low"] > case["bound"]) == (got["p_opposite"] < 0.05)


def test_sides_swap_with_expect():
    x = np.array([0.1, 0.2, 0.15, 0.12, 0.18])
    below, above = one_sample(x, 0.1, "below"), one_sample(x, 0.1, "above")
    assert below["p"] == pytest.approx(above["p_opposite"]) and below["p_opposite"] == pytest.approx(above["p"])
    assert below["p"] + below["p_opposite"] == pytest.approx(1.0)   # continuous t: the two sum to 1


def test_constant_sample_is_undefined_for_t_but_not_for_binomial():
    zeros = np.zeros(10)
    t = one_sample(zeros, 0.5, "below", "t")
    assert math.isnan(t["p"]) and math.isnan(t["ci_low"]) and "use test: binomial" in t["undefined"]
    b = one_sample(zeros, 0.5, "below", "binomial")
    assert b["undefined"] == "" and b["k"] == 0 and b["p"] == pytest.approx(0.5 ** 10)


def test_binomial_threshold_counts_runs_above_it():
    x = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], float)
    assert one_sample(x, 0.5, "below", "binomial", threshold=4)["k"] == 5   # 5..9
    assert one_sample(x, 0.5, "below", "binomial", threshold=0)["k"] == 9


def test_too_little_data_is_undefined():
    assert "needs 2 values" in one_sample(np.array([0.3]), 0.5, "below")["undefined"]
    empty = one_sample(np.array([]), 0.5, "below", "binomial")
    assert empty["undefined"] == "undefined: no values" and math.isnan(empty["p"])


def test_rejects_unknown_expect_or_test():
    with pytest.raises(ValueError):
        one_sample(np.ones(3), 1.0, "lower")
    with pytest.raises(ValueError):
        one_sample(np.ones(3), 1.0, "below", "poisson")
