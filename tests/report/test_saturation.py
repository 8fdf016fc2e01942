"""Saturation and anisotropy over training (audit.report.saturation), from tiny per-epoch logs."""

import json

import numpy as np
import pytest

from audit.plots import EMPTY_MARK
from audit.report.saturation import band, erank_share, read_saturation, saturation, spectrum_at


def _run(root, head, seed, cosines, spectra, status="ok", corpus="ptb"):
    run = root / corpus / head / str(seed)
    run.mkdir(parents=True)
    log = [{"epoch": i + 1, "valid_ppl": 100.0, "valid_input_cosine": c, "output_singular_values": s}
           for i, (c, s) in enumerate(zip(cosines, spectra))]
    (run / "metrics.json").write_text(json.dumps({"corpus": corpus, "head": head, "seed": seed,
                                                  "status": status, "log": log}))
    return run


def test_erank_share_of_flat_and_peaked_spectra():
    assert erank_share([2.0, 2.0, 2.0, 2.0]) == pytest.approx(1.0)
    assert erank_share([5.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)   # one direction of four
    p = np.array([3.0, 1.0]) / 4
    assert erank_share([3.0, 1.0]) == pytest.approx(np.exp(-(p * np.log(p)).sum()) / 2)
    assert np.isnan(erank_share([])) and np.isnan(erank_share([0.0, 0.0]))


def test_median_band_and_spectra_over_seeds(tmp_path):
    dirs = [_run(tmp_path, "softmax", 1, [0.10, 0.30], [[4, 2, 1], [8, 2, 1]]),
            _run(tmp_path, "softmax", 2, [0.20, 0.50], [[4, 4, 2], [8, 4, 2]]),
            _run(tmp_path, "softmax", 3, [0.60], [[2, 2, 2]]),               # stopped after epoch 1
            _run(tmp_path, "mos", 1, [0.05, 0.07], [[3, 3, 3], [3, 3, 3]])]
    (tmp_path / "old").mkdir()   # a run logged before issue 24: no rows, no error
    (tmp_path / "old" / "metrics.json").write_text(json.dumps(
        {"corpus": "ptb", "head": "softmax", "seed": 9, "status": "ok", "log": [{"epoch": 1, "valid_ppl": 90.0}]}))
    data = read_saturation(dirs + [tmp_path / "old"])
    assert len(data) == 2 + 2 + 1 + 2
    cos = band(data, "input_cosine").set_index(["head", "epoch"])
    assert cos.loc[("softmax", 1), "median"] == pytest.approx(0.20) and cos.loc[("softmax", 1), "n"] == 3
    assert (cos.loc[("softmax", 2), "low"], cos.loc[("softmax", 2), "high"]) == (0.30, 0.50)
    er = band(data, "erank_share").set_index(["head", "epoch"])
    assert er.loc[("mos", 1), "median"] == pytest.approx(1.0)
    last = spectrum_at(data, "last").set_index("head")
    # seeds' last epochs: [8,2,1]/8, [8,4,2]/8, [2,2,2]/2 -> median per index
    assert last.loc["softmax", "spectrum"] == pytest.approx([1.0, 0.5, 0.25])
    first = spectrum_at(data, "first").set_index("head")
    assert first.loc["softmax", "spectrum"] == pytest.approx([1.0, 1.0, 0.5])
    svg = saturation(data)
    assert "softmax (n=3)" in svg and "mos (n=1)" in svg and "spectral saturation" in svg and EMPTY_MARK not in svg
    assert svg == saturation(read_saturation(dirs + [tmp_path / "old"]))   # byte-identical per input


def test_logs_before_issue_24_give_an_empty_figure(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"corpus": "ptb", "head": "softmax", "seed": 1, "status": "ok",
                                                  "log": [{"epoch": 1, "valid_ppl": 90.0}]}))
    data = read_saturation([run])
    assert data.empty and EMPTY_MARK in saturation(data)


def test_a_trained_tiny_run_draws_the_figure(ptb_corpus, tmp_path):
    # the trainer's own log, not a hand-written one
    from audit.train.run import train
    from helpers import tiny_settings

    run = tmp_path / "ptb" / "softmax" / "1"
    metrics = train(tiny_settings(epochs=2, train_tokens=2000), str(ptb_corpus), run, log=lambda m: None)
    data = read_saturation([run])
    assert list(data["epoch"]) == [1, 2] and len(data["singular_values"].iloc[0]) == metrics["emb_size"]
    assert "softmax (n=1)" in saturation(data)
