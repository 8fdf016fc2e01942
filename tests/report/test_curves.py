"""Learning curves (audit.report.curves): per-epoch validation ppl, median and band over seeds."""

import json

from audit.plots import EMPTY_MARK
from audit.report.curves import curve_summary, learning_curves, read_curves


def _run(root, head, seed, ppl, status="ok"):
    run = root / "ptb" / head / str(seed)
    run.mkdir(parents=True)
    log = [{"epoch": i + 1, "valid_ppl": p, "train_seconds": 1.0} for i, p in enumerate(ppl)]
    (run / "metrics.json").write_text(json.dumps({"corpus": "ptb", "head": head, "seed": seed,
                                                  "status": status, "log": log}))
    return run


def test_median_and_band_over_the_seeds_that_reached_each_epoch(tmp_path):
    dirs = [_run(tmp_path, "softmax", 1, [300, 200, 150]), _run(tmp_path, "softmax", 2, [320, 210, 140]),
            _run(tmp_path, "softmax", 3, [310, 190]),                       # stopped after epoch 2
            _run(tmp_path, "mos", 1, [280, float("inf")], status="failed")]  # diverged
    curves = read_curves(dirs)
    assert len(curves) == 3 + 3 + 2 + 2
    summary = curve_summary(curves).set_index(["head", "epoch"])
    assert summary.loc[("softmax", 1), "median"] == 310 and summary.loc[("softmax", 1), "n"] == 3
    assert (summary.loc[("softmax", 2), "low"], summary.loc[("softmax", 2), "high"]) == (190, 210)
    assert summary.loc[("softmax", 3), "n"] == 2 and summary.loc[("softmax", 3), "median"] == 145
    assert ("mos", 2) not in summary.index   # a non-finite ppl is not drawn
    svg = learning_curves(curves)
    assert "softmax (n=3)" in svg and "mos (n=1)" in svg and EMPTY_MARK not in svg
    assert svg == learning_curves(read_curves(dirs))   # byte-identical per input


def test_no_logged_epoch_gives_an_empty_figure(tmp_path):
    curves = read_curves([_run(tmp_path, "softmax", 1, [])])
    assert curves.empty and EMPTY_MARK in learning_curves(curves)
