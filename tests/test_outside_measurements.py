"""Outside heads and bodies measured as far as they promise (issue 37, items 1 and 5): a head
with only ``forward()`` trains, is evaluated and reaches the runs table, and every measurement
it cannot support says "not measured" with the reason, in metrics.json / eval.json, the runs
table and the warnings of the page; the hidden-gap control of a softmax is keyed on the head's
``plain_softmax`` and the body's ``output_rank``, and runs.csv records each run's body."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from audit.evaluate import hidden_gap
from audit.evaluate.run import evaluate_run
from audit.report.checks import find_warnings
from audit.report.saturation import read_saturation, saturation
from audit.stats.runs_table import collect
from audit.train.run import train
from support.outside import GATED_PAIR, STUDY
from tests.helpers import TINY_EVALUATE, doc_example, tiny_settings, write_package

# the second head, GatedPair (two softmaxes mixed by a sigmoid gate, nothing but forward()),
# is support/outside.py's GATED_PAIR: the session's DAG study trains it too

# a softmax from outside that declares the trait the hidden-gap control keys on
OUTSIDE_SOFTMAX = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class PlainSoftmax(nn.Module):
    plain_softmax = True

    def __init__(self, spec):
        super().__init__()
        self.embedding = spec.embedding
        self.bias = nn.Parameter(torch.zeros(spec.vocab_size))

    def output_layer(self):
        return self.embedding.weight, self.bias

    def forward(self, h):
        return F.log_softmax(F.linear(h, self.embedding.weight, self.bias), dim=-1)
'''

RANKED_GRU = '''
from outside37.gru import GRUBody


class RankedGRU(GRUBody):
    """docs/bodies.md's GRU, stating the rank of its output: any point of (-1, 1)^d."""

    @property
    def output_rank(self):
        return self.d_out
'''


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    root = write_package(tmp_path_factory.mktemp("site"), "outside37",
                         {"gated": GATED_PAIR, "plain": OUTSIDE_SOFTMAX, "gru": doc_example("bodies.md"),
                          "ranked": RANKED_GRU})
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(root))
        yield root


def _run(head, body, corpus, mirror, out):
    entry = {"name": head.rsplit(":", 1)[-1].lower(), "import": head} if ":" in head else {"name": head}
    settings = tiny_settings(entry=entry, model=None if body is None else {"body": body})
    metrics = train(settings, str(corpus), out, log=lambda m: None)
    result = evaluate_run(out, str(corpus), str(mirror / "wordsim"), options=TINY_EVALUATE)
    return metrics, result


def test_a_forward_only_head_trains_is_evaluated_and_says_what_it_does_not_measure(package, ptb_corpus, mirror,
                                                                                   tmp_path):
    """Issue 37, item 1: the trainer read the output spectrum unconditionally (KeyError at the end
    of epoch 1, and the failed jobs blocked runs.csv and the report)."""
    head = "outside37.gated:GatedPair"
    metrics, result = _run(head, None, ptb_corpus, mirror, tmp_path / "run")
    assert metrics["status"] == "ok" and metrics["epochs_run"] == 2 and math.isfinite(metrics["valid_ppl"])
    assert all("output_singular_values" not in row and -1 < row["valid_input_cosine"] < 1 for row in metrics["log"])
    assert metrics["output_spectrum_note"].startswith("not measured: the head has no output_layer()")
    # evaluated: perplexity, ranks, the witness search and the Jacobian through forward() alone
    assert result["status"] == "ok" and 1 < result["test_ppl"] < 10_000 and result["press_rank"] >= 1
    assert result["unargmaxable"] is None and result["argmax_note"].startswith("lower bound from a witness search")
    assert result["argmax_argmaxable"] + result["argmax_unresolved"] == result["vocab_size"]
    assert result["gradient_share"] is None and result["gradient_share_note"].startswith("not measured")
    assert result["f_logits_note"].startswith("not measured: the head has no transformed_logits()")
    assert "f_logits_press_rank" not in result and 0 <= result["jacobian_fraction_below"] <= 1
    # no control without plain_softmax: no number, and no claim that one was owed
    assert result["hidden_gap_ok"] is None and "hidden_gap_note" not in result and result["hidden_gap_dim"] >= 1

    runs, _ = collect([tmp_path / "run"])
    row = runs.iloc[0]
    assert row["head"] == "gatedpair"     # the arm's name
    assert row["body"] == "awd_lstm" and row["output_spectrum_note"] == metrics["output_spectrum_note"]
    assert row["f_logits_note"] == result["f_logits_note"] and pd.isna(row["unargmaxable"])
    warned = find_warnings(runs, {"stats": {"min_seeds": 2}}).query("kind == 'not_measured'")
    assert sorted(warned["metric"]) == ["f_logits", "gradient_share", "output_spectrum"]
    assert all(detail.startswith("not measured") and detail.endswith("(1 run)") for detail in warned["detail"])
    # the saturation figure keeps the head's anisotropy and says its output spectrum is not measured
    data = read_saturation([tmp_path / "run"])
    assert len(data) == 2 and data["input_cosine"].between(-1, 1).all() and data["erank_share"].isna().all()
    assert "not measured (no output_layer())" in saturation(data)


def test_a_softmax_on_a_body_without_output_rank_says_its_control_did_not_run(package, ptb_corpus, mirror, tmp_path):
    """Issue 37, item 5: docs/bodies.md's GRU (no output_rank) under the built-in softmax read a
    hidden size of 15 against d = 16 and nothing flagged it."""
    body = "outside37.gru:GRUBody"
    _, result = _run("softmax", body, ptb_corpus, mirror, tmp_path / "run")
    assert result["hidden_gap_ok"] is None and result["hidden_gap_expected"] is None
    assert result["hidden_gap_note"] == ("not measured: the hidden-gap control of a softmax needs the rank of the "
                                         f"body's output, and body {body!r} states no output_rank (docs/bodies.md)")
    runs, _ = collect([tmp_path / "run"])
    assert runs.iloc[0]["body"] == body
    warned = find_warnings(runs, {"stats": {"min_seeds": 2}}).query("kind == 'not_measured'")
    # the GRU states no output_box either: its argmax test is not measured, and said so too
    assert list(warned["metric"]) == ["argmax", "hidden_gap"]
    assert warned["detail"].iloc[1].startswith(result["hidden_gap_note"])
    assert warned["detail"].iloc[0].startswith("not measured: the body states no box")


def test_the_hidden_gap_control_keys_on_the_heads_and_bodys_traits_not_names(package, ptb_corpus, mirror, tmp_path):
    """An outside head declaring plain_softmax on a GRU declaring output_rank gets the control:
    the body's rank expected, and the verdict of ``hidden_gap.control`` on the spectrum written."""
    body = "outside37.ranked:RankedGRU"
    _, result = _run("outside37.plain:PlainSoftmax", body, ptb_corpus, mirror, tmp_path / "run")
    d = 8   # tiny_settings' emb_size
    assert result["hidden_gap_expected"] == d and "hidden_gap_note" not in result
    sv = np.load(tmp_path / "run" / "spectrum.npz")["log_p_centred_sv"]
    ok, residual = hidden_gap.control(sv, d)
    assert result["hidden_gap_ok"] is ok and result["hidden_gap_residual"] == pytest.approx(residual)
    assert result["hidden_gap_miss"] == abs(hidden_gap.largest_gap(sv)[0] - d)
    runs, _ = collect([tmp_path / "run"])
    assert runs.iloc[0]["body"] == body
    flagged = find_warnings(runs, {"stats": {"min_seeds": 2}}).query("kind == 'hidden_gap'")
    assert len(flagged) == (0 if ok else 1)


@pytest.mark.slow
def test_a_forward_only_head_and_an_outside_body_through_the_dag(outside_study):
    """The whole DAG with a forward-only head and docs/bodies.md's GRU under a softmax: every job
    succeeds, runs.csv records each arm's body, and the page lists what was not measured.

    The study is the session's ``outside_study`` (tests/conftest.py, support/outside.py; issue 48),
    shared with tests/test_outside_head.py: this test's arms softmax, gated and gru at the size
    this test ran alone (two seeds, one epoch, 20,000 training tokens, 200 contexts), beside that
    test's tempered and softmax_matched arms (AWD-LSTM bodies). It still proves what it did: the
    Snakemake run exits 0 with a forward-only head in it, every run is ok, each arm's body is in
    runs.csv, and the notes of what was not measured reach the runs table and the page."""
    workdir, proc = outside_study
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = pd.read_csv(workdir / "reports" / STUDY / "runs.csv")
    assert (runs["status"] == "ok").all() and len(runs) == 5 * 2   # five arms x two seeds
    assert runs.groupby("head")["body"].first().to_dict() == {"gated": "awd_lstm", "gru": "outside37.gru:GRUBody",
                                                              "softmax": "awd_lstm", "softmax_matched": "awd_lstm",
                                                              "tempered": "awd_lstm"}
    gated = runs[runs["head"] == "gated"]
    assert gated["output_spectrum_note"].str.startswith("not measured").all() and gated["unargmaxable"].isna().all()
    assert runs.loc[runs["head"] == "gru", "hidden_gap_note"].str.contains("states no output_rank").all()
    assert runs.loc[runs["head"] == "softmax", "hidden_gap_ok"].notna().all()   # the AWD-LSTM states its rank
    page = (workdir / "reports" / STUDY / "audit.html").read_text()
    assert "Measurements not taken" in page and "states no output_rank" in page and "no output_layer()" in page
