"""The reference heads of the benches and the GPU check, picked by trait (audit.bench.picks),
are the built-ins they named before issue 35, and the gpu bench's families are unchanged."""

import pytest

from audit.bench import gpu, picks
from audit.bench.heads import format_table
from audit.errors import AuditError


def test_each_pick_is_the_built_in_it_stands_for():
    assert picks.baseline() == "softmax"
    assert picks.rank_lifting() == "sigsoftmax"
    assert picks.trained_knots() == "plif"
    assert picks.latent_mixture() == "mos"
    assert picks.default_body() == "awd_lstm" and picks.bodies() == ["awd_lstm", "transformer"]
    # every head but the capacity-matched softmax, which needs another arm to match
    assert picks.standalone_heads() == ["softmax", "sigsoftmax", "gss", "plif", "plif_frozen", "mos", "moc",
                                        "mos_uniform", "mixtape"]
    assert picks.shape_options("gss") == {"c": -1.5, "k": 2.5} and picks.shape_options("plif") == {}


def test_a_description_two_heads_answer_is_refused(monkeypatch):
    from audit.model.heads import HEADS

    twin = type("Twin", (HEADS["softmax"],), {"name": "twin"})
    monkeypatch.setattr(picks, "_registry", lambda: {**HEADS, "twin": twin})
    picks.baseline.cache_clear()
    try:
        with pytest.raises(AuditError, match="2 heads are a plain softmax without options"):
            picks.baseline()
    finally:
        picks.baseline.cache_clear()


def test_gpu_bench_families_are_the_ones_it_always_timed():
    # the table audit/bench/gpu.py kept before issue 35
    old = {"softmax": ["softmax", "sigsoftmax", "gss", "softmax_matched"], "plif": ["plif", "plif_frozen"],
           "mos": ["mos", "moc", "mos_uniform", "mixtape"]}
    assert gpu.families() == list(old)
    assert {h: gpu.family_of(h) for heads in old.values() for h in heads} == \
        {h: f for f, heads in old.items() for h in heads}


def test_bench_heads_table_reads_its_targets_from_the_config():
    table = format_table({"softmax": [1.0], "sigsoftmax": [1.2], "gss": [1.05], "plif": [1.2], "plif_frozen": [2.0],
                          "mos": [2.0], "mixtape": [2.5]})
    verdicts = {line.split()[0]: line.split("  ")[-1].strip() for line in table.splitlines()[1:]}
    assert table.splitlines()[0].split()[-2:] == ["softmax", "target"]
    assert verdicts["sigsoftmax"] == "<= 1.10: MISSED" and verdicts["gss"] == "<= 1.10: ok"
    assert verdicts["plif"] == "<= 1.25: ok" and verdicts["mixtape"] == "< mos: MISSED"
    assert verdicts["plif_frozen"] == verdicts["mos"] == verdicts["softmax"] == ""
