"""The guard: verdicts drawn from arms the audit cannot stand behind are not informative."""

import numpy as np
import pandas as pd
import yaml

from audit.stats import guard
from audit.stats.claims import claims_table
from audit.stats.comparisons import comparisons_table
from audit.stats.correlations import correlations_table
from audit.stats.io import Settings

FAST = Settings(bootstrap_resamples=500)


def runs_table(means: dict, vocab=2000.0, n=6, tokens=82429.0):
    """Runs of ``n`` seeds per head whose test ppl has exactly the given mean; ``tokens`` scored
    test tokens (the K = 2,000 baseline's 82,430 less the first)."""
    rows = []
    for i, (head, mean) in enumerate(means.items()):
        z = np.random.default_rng(i).normal(size=n)
        for s, v in enumerate(mean + (z - z.mean()) / z.std(ddof=1)):
            rows.append(dict(corpus="ptb", head=head, seed=str(s), status="ok", test_ppl=v,
                             press_rank=30.0 + s + i, vocab_size=vocab, test_tokens=tokens))
    return pd.DataFrame(rows)


BASE = pd.DataFrame([dict(corpus="ptb", vocab_size=2000, n_test=82430, unigram_ppl=196.5),
                     dict(corpus="ptb", vocab_size=10000, n_test=5000, unigram_ppl=684.5)])
CONFIG = {
    "comparisons": [{"family": "f", "baseline": "softmax", "against": ["mos", "gss"], "metrics": ["test_ppl"],
                     "family_by": [], "lower_is_better": None, "equivalence_margin": None}],
    "correlations": [{"name": "r", "x": "press_rank", "y": "test_ppl", "heads": ["softmax", "gss"], "windows": []}],
    "claims": [
        {"id": "mos-lowers", "source": "s", "statement": "mos lowers", "expect": "lower",
         "comparison": {"head_a": "mos", "head_b": "softmax", "metric": "test_ppl"}},
        {"id": "gss-lowers", "source": "s", "statement": "gss lowers", "expect": "lower",
         "comparison": {"head_a": "gss", "head_b": "softmax", "metric": "test_ppl"}},
        {"id": "rank", "source": "s", "statement": "rank", "expect": "negative",
         "correlation": {"name": "r", "level": "runs", "method": "pearson"}},
    ],
}


def test_arm_below_unigram_is_found_with_its_numbers():
    runs = runs_table({"softmax": 150.0, "mos": 100.0, "gss": 210.0})
    below = guard.flagged(runs, BASE)
    assert list(below) == [("ptb", "gss")]
    assert f"median test ppl {np.median(runs[runs['head'] == 'gss']['test_ppl']):,.1f} (n = 6)" in below[("ptb", "gss")]
    assert "unigram 196.5" in below[("ptb", "gss")] and "K = 2,000" in below[("ptb", "gss")]
    # the same runs at the full vocabulary are judged against its own unigram: all beat 684.5
    assert guard.flagged(runs_table({"gss": 210.0}, vocab=10000.0, tokens=4999.0), BASE) == {}
    # a median exactly at the baseline does not beat it
    at = pd.DataFrame(dict(corpus="ptb", head="gss", seed=["1", "2", "3"], status="ok",
                           test_ppl=[150.0, 196.5, 900.0], vocab_size=2000.0, test_tokens=82429.0))
    assert ("ptb", "gss") in guard.flagged(at, BASE)
    assert guard.flagged(at.assign(test_ppl=[150.0, 196.4, 900.0]), BASE) == {}


def test_comparisons_and_claims_relabelled_never_counted():
    runs = runs_table({"softmax": 150.0, "mos": 100.0, "gss": 210.0})
    comp = comparisons_table(runs, CONFIG, FAST)
    raw = dict(zip(comp["head_a"], comp["verdict"]))
    assert raw == {"mos": "a_better", "gss": "b_better"}          # the tests alone decide both
    guarded = guard.guard_comparisons(comp, runs, BASE)
    got = dict(zip(guarded["head_a"], guarded["verdict"]))
    assert got == {"mos": "a_better", "gss": guard.VERDICT}
    gss = guarded[guarded["head_a"] == "gss"].iloc[0]
    assert gss["reason"].startswith(guard.LABEL) and "the test alone: b_better" in gss["reason"]
    assert gss["p_adj"] == comp[comp["head_a"] == "gss"].iloc[0]["p_adj"]   # statistics kept
    claims = claims_table(runs, CONFIG, FAST, comp, correlations_table(runs, CONFIG, FAST))
    before = dict(zip(claims["claim_id"], claims["verdict"]))
    assert before["gss-lowers"] == "contradicted"
    after = dict(zip(*guard.guard_claims(claims, runs, BASE, CONFIG)[["claim_id", "verdict"]].T.values))
    assert after["mos-lowers"] == "supported"
    assert after["gss-lowers"] == guard.VERDICT and after["rank"] == guard.VERDICT   # gss is in the correlation
    assert not {"supported", "contradicted"} & {after["gss-lowers"], after["rank"]}


def test_a_claim_with_head_alternatives_is_guarded_on_the_head_it_resolved_to():
    runs = runs_table({"softmax": 150.0, "mos": 100.0, "gss": 210.0})
    alt = {"id": "alt", "source": "s", "statement": "", "expect": "lower",
           "comparison": {"head_a": ["mos_fair", "gss", "mos"], "head_b": "softmax", "metric": "test_ppl"}}
    assert guard.claim_heads(alt, runs, "ptb", []) == ["gss", "softmax"]     # no mos_fair runs: gss
    config = dict(CONFIG, claims=[alt])
    comp = comparisons_table(runs, config, FAST)
    claims = claims_table(runs, config, FAST, comp, correlations_table(runs, config, FAST))
    assert claims["evidence"].iloc[0].startswith("family=f; metric=test_ppl; gss - softmax")
    assert guard.guard_claims(claims, runs, BASE, config)["verdict"].iloc[0] == guard.VERDICT


def test_stats_verb_applies_the_guard(tmp_path):
    from audit.stats.cli import main

    runs = runs_table({"softmax": 150.0, "mos": 100.0, "gss": 210.0})
    runs.to_csv(tmp_path / "runs.csv", index=False)
    BASE.to_csv(tmp_path / "baselines.csv", index=False)
    config = dict(CONFIG, stats={"bootstrap_resamples": 500, "min_seeds": 5})
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    args = ["--runs", str(tmp_path / "runs.csv"), "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path),
            "--table", "comparisons", "--table", "claims"]
    assert main(args + ["--baselines", str(tmp_path / "baselines.csv")]) == 0
    claims = pd.read_csv(tmp_path / "claims.csv")
    assert claims.set_index("claim_id").loc["gss-lowers", "verdict"] == guard.VERDICT
    assert main(args) == 0   # without baselines, the tests alone
    assert pd.read_csv(tmp_path / "claims.csv").set_index("claim_id").loc["gss-lowers", "verdict"] == "contradicted"
