"""Multi-bootstrap over seeds and test sentences: exact invariants, two simulations, the tables."""

import math

import numpy as np
import pandas as pd
import pytest

from audit.config import check_section
from audit.errors import AuditError
from audit.stats import multiboot
from audit.stats.claims import claims_table
from audit.stats.comparisons import comparisons_table
from audit.stats.io import Settings
from audit.stats.resample import bootstrap_two_sample, percentile_ci
from scipy import stats as scipy_stats
from statsmodels.stats.multitest import multipletests

FAST = Settings(bootstrap_resamples=2000)


def test_corpus_ppl_by_hand():
    # one run, sentences of 1 and 3 tokens with NLL sums 2 and 4: exp(6 / 4); drawing the
    # first sentence twice and the second never: exp(4 / 2)
    ppl = multiboot.corpus_ppl(np.array([[2.0, 4.0]]), np.array([1, 3]), np.array([[1.0, 1.0], [2.0, 0.0]]))
    assert ppl[:, 0] == pytest.approx([math.exp(1.5), math.exp(2.0)], rel=1e-15)


def test_point_estimate_is_the_difference_of_mean_test_perplexities():
    nll_a, nll_b, tokens = np.array([[2.0, 4.0], [3.0, 3.0]]), np.array([[5.0, 7.0]]), np.array([1, 3])
    out = multiboot.multibootstrap(nll_a, nll_b, tokens, FAST)
    assert out["mb_diff"] == pytest.approx((math.exp(6 / 4) + math.exp(6 / 4)) / 2 - math.exp(12 / 4), rel=1e-14)
    assert out["mb_resamples"] == 2000 and out["mb_sentences"] == 2


def test_one_sentence_has_no_sentence_variance():
    rng = np.random.default_rng(0)
    nll_a, nll_b = rng.uniform(10, 20, (5, 1)), rng.uniform(10, 20, (5, 1))
    out = multiboot.multibootstrap(nll_a, nll_b, np.array([4]), FAST)
    assert out["mb_var_sentence_share"] == 0.0 and out["mb_var_seed_share"] == 1.0


def test_identical_arms_give_zero_and_an_undefined_p():
    # every run of both arms identical: no seed variance and every sentence resample's difference
    # exactly 0, so t = 0/0; undefined as Welch's is for two constant arms (it was p = 1 with
    # the percentile bootstrap, which has no SE to divide by)
    run = np.random.default_rng(1).uniform(1, 30, 50)
    nll = np.tile(run, (4, 1))
    out = multiboot.multibootstrap(nll, nll.copy(), np.arange(1, 51), FAST)
    assert out["mb_diff"] == 0.0 and all(math.isnan(out[k]) for k in ("mb_ci_low", "mb_ci_high", "mb_p", "mb_df"))
    assert math.isnan(out["mb_var_seed_share"]) and "undefined: no variance" in out["mb_note"]


def test_t_by_hand():
    # seed variances 1/2 and 2/3 (per arm, ddof 1) over n = 2 and 3, sentence samples of variance
    # 1/4 over S = 11: se^2 = 1/4 + 2/9 + 1/4, Satterthwaite df, p and the t interval by SciPy
    ppl_a, ppl_b, sent = np.array([10.0, 11.0]), np.array([8.0, 9.0, 10.0]), np.array([-0.5, 0.5])
    out = multiboot.seed_sentence_t(ppl_a, ppl_b, sent, 11, 0.95)
    va, vb, vs = 0.5 / 2, 1.0 / 3, 0.25
    se = math.sqrt(va + vb + vs)
    df = (va + vb + vs) ** 2 / (va ** 2 / 1 + vb ** 2 / 2 + vs ** 2 / 10)
    assert (out["diff"], out["se"], out["df"]) == pytest.approx((1.5, se, df), rel=1e-14)
    assert out["p"] == pytest.approx(2 * scipy_stats.t.sf(1.5 / se, df), rel=1e-12)
    assert out["ci_low"] == pytest.approx(1.5 - scipy_stats.t.ppf(0.975, df) * se, rel=1e-12)


def test_without_sentence_variance_it_is_welch():
    # sentence effects absent: the t test, its df and interval are Welch's on the runs' test_ppl
    nll_a, nll_b, tokens = simulate(seed_sd=0.02, sentence_sd=0.0, n=4)
    ppl_a, ppl_b = (np.exp(x.sum(1) / tokens.sum()) for x in (nll_a, nll_b))
    out = multiboot.seed_sentence_t(ppl_a, ppl_b, np.zeros(50), len(tokens), 0.95)
    res = scipy_stats.ttest_ind(ppl_a, ppl_b, equal_var=False)
    ci = res.confidence_interval(0.95)
    assert (out["p"], out["df"], out["ci_low"], out["ci_high"]) == pytest.approx(
        (res.pvalue, res.df, ci.low, ci.high), rel=1e-10)


def simulate(seed_sd, sentence_sd, n=10, sentences=400, rng=None):
    """Two arms of n runs on shared sentences: per-token loss = arm + seed + sentence x arm
    interaction terms; returns (nll_a, nll_b, tokens)."""
    rng = rng or np.random.default_rng(7)
    tokens = rng.integers(5, 40, sentences)
    arms = []
    for base in (4.00, 4.02):
        seed = rng.normal(0, seed_sd, (n, 1))
        sentence = rng.normal(0, sentence_sd, (1, sentences))   # each arm its own sentence effects
        arms.append((base + seed + sentence) * tokens)
    return arms[0], arms[1], tokens


def seed_only_ci(nll_a, nll_b, tokens, rng):
    """The seed-only bootstrap by the comparisons table's own two-sample code on test_ppl."""
    ppl_a, ppl_b = (np.exp(x.sum(1) / tokens.sum()) for x in (nll_a, nll_b))
    boot = bootstrap_two_sample(ppl_a, ppl_b, lambda x, y: x.mean(1) - y.mean(1), 4000, rng)
    return percentile_ci(boot, 0.95)


def test_sentence_effect_widens_the_interval():
    nll_a, nll_b, tokens = simulate(seed_sd=0.002, sentence_sd=0.5)
    settings = Settings(bootstrap_resamples=4000)
    out = multiboot.multibootstrap(nll_a, nll_b, tokens, settings)
    low, high = seed_only_ci(nll_a, nll_b, tokens, np.random.default_rng(3))
    assert out["mb_ci_high"] - out["mb_ci_low"] > 5 * (high - low)
    assert out["mb_var_sentence_share"] > 0.9


def test_no_sentence_effect_gives_the_welch_interval():
    # was: equal to the seed-only percentile bootstrap's CI. Issue 33: that CI is narrower than
    # Welch's by sqrt((n - 1)/n) and z < t, which made the p anti-conservative at few seeds; the
    # interval is now Welch's t interval on the runs' test perplexities when sentences add nothing
    nll_a, nll_b, tokens = simulate(seed_sd=0.02, sentence_sd=0.0)
    settings = Settings(bootstrap_resamples=4000)
    out = multiboot.multibootstrap(nll_a, nll_b, tokens, settings)
    ppl_a, ppl_b = (np.exp(x.sum(1) / tokens.sum()) for x in (nll_a, nll_b))
    ci = scipy_stats.ttest_ind(ppl_a, ppl_b, equal_var=False).confidence_interval(0.95)
    # the sentence resamples' rounding noise (~1e-13 relative) is all that separates them
    assert (out["mb_ci_low"], out["mb_ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-6)
    assert out["mb_var_sentence_share"] < 1e-12


def test_same_seed_same_numbers():
    nll_a, nll_b, tokens = simulate(0.01, 0.1, n=4, sentences=30)
    assert multiboot.multibootstrap(nll_a, nll_b, tokens, FAST) == multiboot.multibootstrap(nll_a, nll_b, tokens, FAST)


def study(tmp_path, drop=None):
    """Runs table and sentence file of softmax and mos (5 seeds each, 60 sentences)."""
    rng = np.random.default_rng(11)
    tokens = rng.integers(3, 30, 60)
    rows, nll, tok = [], {}, {}
    for head, base in (("softmax", 5.0), ("mos", 4.9)):
        for seed in range(5):
            sums = (base + rng.normal(0, 0.01) + rng.normal(0, 0.2, 60)) * tokens
            rows.append(dict(corpus="ptb", head=head, seed=str(seed), status="ok",
                             test_ppl=math.exp(sums.sum() / tokens.sum()), press_rank=10.0 + seed))
            if (head, seed) != drop:
                nll[("ptb", head, str(seed))], tok[("ptb", head, str(seed))] = sums, tokens
    path = tmp_path / "sentences.npz"
    multiboot.save(multiboot.Sentences(nll, tok), path)
    return pd.DataFrame(rows), multiboot.load(path)


CONFIG = {"comparisons": [{"family": "f", "baseline": "softmax", "against": ["mos"],
                           "metrics": ["test_ppl", "press_rank"]}]}


def test_comparisons_table_columns(tmp_path):
    runs, sentences = study(tmp_path)
    t = comparisons_table(runs, CONFIG, FAST, sentences=sentences).set_index("metric")
    ppl = t.loc["test_ppl"]
    assert ppl["mb_diff"] == pytest.approx(ppl["diff"], rel=1e-12)   # the same runs, the same means
    assert ppl["mb_ci_low"] < ppl["mb_diff"] < ppl["mb_ci_high"] < 0 and ppl["mb_p"] < 0.05
    # one Holm family of both tests (issue 33): both rows' Welch p and test_ppl's multi-bootstrap p
    rank = t.loc["press_rank"]
    joint = multipletests([ppl["welch_p"], rank["welch_p"], ppl["mb_p"]], method="holm")[1]
    assert [ppl["p_adj"], rank["p_adj"], ppl["mb_p_adj"]] == pytest.approx(joint, rel=1e-12)
    assert (ppl["family_size"], ppl["family_note"]) == (3, "m = 3 defined tests (2 Welch, 1 multi-bootstrap) of 2 rows")
    assert ppl["mb_var_seed_share"] + ppl["mb_var_sentence_share"] == pytest.approx(1.0)
    rank = t.loc["press_rank"]
    assert math.isnan(rank["mb_ci_low"]) and rank["mb_note"] == "not computed: defined for test_ppl only"
    bare = comparisons_table(runs, CONFIG, FAST).set_index("metric").loc["test_ppl"]
    assert math.isnan(bare["mb_diff"]) and "no per-sentence" in bare["mb_note"]


def test_missing_run_file_is_named(tmp_path):
    runs, sentences = study(tmp_path, drop=("mos", 3))
    row = comparisons_table(runs, CONFIG, FAST, sentences=sentences).set_index("metric").loc["test_ppl"]
    assert math.isnan(row["mb_p"]) and row["mb_note"] == "not computed: no per-sentence sums of run ptb/mos/3"


def test_claim_can_name_the_multibootstrap(tmp_path):
    runs, sentences = study(tmp_path)
    claim = {"id": "c", "source": "s", "expect": "lower", "comparison": {"head_a": "mos", "head_b": "softmax",
                                                                          "metric": "test_ppl"}}
    config = dict(CONFIG, claims=[claim, dict(claim, id="m", test="multibootstrap"),
                                  dict(claim, id="r", test="multibootstrap", comparison=dict(claim["comparison"], head_a="softmax", head_b="mos"), expect="higher")])
    comp = comparisons_table(runs, config, FAST, sentences=sentences)
    t = claims_table(runs, config, FAST, comp, None, sentences=sentences).set_index("claim_id")
    row = comp.set_index("metric").loc["test_ppl"]
    assert t.loc["c", "p_name"].startswith("welch p") and t.loc["c", "p"] == row["welch_p"]
    assert t.loc["m", "verdict"] == "supported" and t.loc["m", "p"] == row["mb_p"]
    assert (t.loc["m", "estimate"], t.loc["m", "ci_low"]) == (row["mb_diff"], row["mb_ci_low"])
    assert t.loc["m", "reason"].startswith("multibootstrap p_adj=")
    # the flipped orientation negates the estimate and swaps the interval's ends
    assert (t.loc["r", "verdict"], t.loc["r", "ci_low"]) == ("supported", -row["mb_ci_high"])


def test_schema_rejects_an_unknown_test():
    claim = {"id": "c", "source": "s", "expect": "lower", "test": "bayes",
             "comparison": {"head_a": "a", "head_b": "b", "metric": "test_ppl"}}
    with pytest.raises(AuditError, match="test"):
        check_section("claims", [claim], "study.yaml")


def test_unreadable_sentence_file(tmp_path):
    (tmp_path / "s.npz").write_text("not a zip")
    with pytest.raises(AuditError, match="s.npz: unreadable sentence file"):
        multiboot.load(tmp_path / "s.npz")


def test_null_rejection_rate_at_three_seeds_is_within_alpha():
    # issue 33: under H0 (two arms from one distribution, seeds dominating the variance) the
    # percentile bootstrap's p rejected 0.18-0.22 at 3 seeds per arm; the t test must stay
    # within alpha + 2 MC SE of a rate equal to alpha (200 sims: 0.05 + 2 * 0.0154 = 0.081)
    from audit.bench.multiboot import rejection_rates

    sims, alpha = 200, 0.05
    bound = alpha + 2 * math.sqrt(alpha * (1 - alpha) / sims)
    rates = rejection_rates(3, "seed", sims, resamples=300, n_sentences=100, seed=1, alpha=alpha)
    assert rates["seed+sentence t"] <= bound
    assert rates["percentile (old)"] > bound          # the old p fails the same check
    assert rates["undefined"]["seed+sentence t"] == 0


def test_bench_table_names_every_cell(capsys):
    from audit.bench import multiboot as bench

    assert bench.main(["--sims", "3", "--resamples", "100", "--sentences", "20"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| seed |") or line.startswith("| sentence |")]
    assert len(rows) == 8 and out.splitlines()[0].endswith("| welch |")


def three_arm_study(tmp_path):
    """softmax and mos with 5 seeds, plif with 2 (below min_seeds = 3), 60 shared sentences."""
    rng = np.random.default_rng(5)
    tokens = rng.integers(3, 30, 60)
    rows, nll, tok = [], {}, {}
    for head, base, seeds in (("softmax", 5.0, 5), ("mos", 4.9, 5), ("plif", 4.7, 2)):
        for seed in range(seeds):
            sums = (base + rng.normal(0, 0.01) + rng.normal(0, 0.2, 60)) * tokens
            rows.append(dict(corpus="ptb", head=head, seed=str(seed), status="ok",
                             test_ppl=math.exp(sums.sum() / tokens.sum()), press_rank=10.0 + seed))
            nll[("ptb", head, str(seed))], tok[("ptb", head, str(seed))] = sums, tokens
    path = tmp_path / "sentences.npz"
    multiboot.save(multiboot.Sentences(nll, tok), path)
    return pd.DataFrame(rows), multiboot.load(path)


def test_too_few_seeds_gates_the_multibootstrap_as_it_gates_welch(tmp_path):
    # issue 33: with 2 seeds per arm the Welch row said "too few seeds" but the multi-bootstrap
    # gave mb_p = mb_p_adj = 0.002 and entered the Holm adjustment of the other rows
    runs, sentences = three_arm_study(tmp_path)
    config = {"comparisons": [{"family": "f", "baseline": "softmax", "against": ["mos", "plif"],
                               "metrics": ["test_ppl", "press_rank"]}]}
    t = comparisons_table(runs, config, Settings(bootstrap_resamples=500, min_seeds=3), sentences=sentences)
    t = t.set_index(["metric", "head_a"])
    plif = t.loc[("test_ppl", "plif")]
    assert plif["reason"].startswith("too few seeds")
    assert all(math.isnan(plif[k]) for k in ("mb_p", "mb_p_adj", "mb_ci_low", "mb_ci_high"))
    assert plif["mb_note"] == f"not computed: {plif['reason']}"
    mos = t.loc[("test_ppl", "mos")]
    # the family: mos's two Welch tests and its one multi-bootstrap; plif's rows in neither
    assert mos["family_size"] == 3 and mos["family_note"] == (
        "m = 3 defined tests (2 Welch, 1 multi-bootstrap) of 4 rows; dropped: 2 too few seeds")
    joint = multipletests([mos["welch_p"], t.loc[("press_rank", "mos"), "welch_p"], mos["mb_p"]], method="holm")[1]
    assert [mos["p_adj"], t.loc[("press_rank", "mos"), "p_adj"], mos["mb_p_adj"]] == pytest.approx(joint, rel=1e-12)


def test_claims_family_mixing_welch_and_multibootstrap_is_one_holm_family(tmp_path):
    # issue 33: claim-only rows judged by different tests were adjusted in two families (Welch
    # over every row's Welch p, the multi-bootstrap over every row's mb_p); now one family of
    # the p each claim is judged by
    runs, sentences = three_arm_study(tmp_path)
    runs = runs[runs["head"] != "plif"]
    comp = {"head_a": "mos", "head_b": "softmax", "metric": "test_ppl"}
    claims = [{"id": "w", "source": "s", "expect": "lower", "comparison": comp},
              {"id": "m", "source": "s", "expect": "higher", "test": "multibootstrap",
               "comparison": dict(comp, head_a="softmax", head_b="mos")}]
    settings = Settings(bootstrap_resamples=500, min_seeds=3)
    t = claims_table(runs, {"claims": claims}, settings, None, None, sentences=sentences).set_index("claim_id")
    w, m = t.loc["w"], t.loc["m"]
    assert w["p_name"].startswith("welch p") and m["p_name"].startswith("multibootstrap p")
    assert [w["p_adj"], m["p_adj"]] == pytest.approx(multipletests([w["p"], m["p"]], method="holm")[1], rel=1e-12)
    assert "m = 2 defined tests (Welch and multi-bootstrap) of 2 rows" in m["p_name"]
