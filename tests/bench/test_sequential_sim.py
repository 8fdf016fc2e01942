"""LK's published arms of the group-sequential benchmark are read from audit/data/published.csv."""

from audit.bench import sequential_sim as sim


def test_published_effects_are_the_numbers_the_bench_kept():
    # the constants audit/bench/sequential_sim.py held before issue 35 (shared/reference/protocol.md section 6)
    heads = ("softmax", "ss", "gss", "plif", "mos")
    effects = {
        "table1": {"ptb": ((57.08, 0.10), (57.03, 0.15), (57.02, 0.13), (56.81, 0.11), (54.88, 0.26)),
                   "wt2": ((64.63, 0.09), (64.35, 0.18), (64.51, 0.13), (64.15, 0.17), (61.97, 0.43))},
        "table2": {"ptb": ((57.08, 0.09), (57.05, 0.15), (57.00, 0.14), (56.80, 0.11), (54.91, 0.26)),
                   "wt2": ((64.63, 0.08), (64.35, 0.17), (64.50, 0.13), (64.16, 0.17), (61.96, 0.40))},
    }
    assert sim.HEADS == heads and sim.EFFECTS == effects
    assert [list(v) for v in sim.EFFECTS.values()] == [["ptb", "wt2"]] * 2  # corpus order: the printed order
