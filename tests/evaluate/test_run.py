import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from audit.data.corpus import load
from audit.evaluate.run import evaluate_run, load_model, sentence_index, sentence_sums, stream_rows
from audit.train.run import train
from audit.train.trainer import batchify
from audit.train.validation import evaluate_loss
from helpers import TINY_EVALUATE, tiny_settings

V = 2_000  # the capped PTB these tests evaluate on (below)


@pytest.fixture(scope="module")
def ptb_corpus(ptb_corpus_2k):
    """PTB capped at its 2,000 most frequent words (tests/conftest.py; issue 48): an evaluation's
    argmax tiers and reverse-mode Jacobian grow as V^2 (about 20 s an argmax call at V = 10,000),
    and what these tests check (every measurement against an independent computation, the rank
    bounds, the failed and stuck jobs) holds at any V above the rank."""
    return ptb_corpus_2k


def train_and_sharpen(settings, corpus, run_dir, scale=20.0):
    """Train briefly, then scale the tied embedding so that logits vary by several units across
    contexts, as in a trained model: a barely trained tiny model's log-P is numerically close to
    rank 1, which would test nothing about the heads' rank bounds."""
    train(settings, corpus, run_dir, log=lambda m: None)
    blob = torch.load(run_dir / "model.pt", weights_only=False)
    for key in ("encoder.weight", "head.embedding.weight"):  # one tied matrix, saved under both names
        blob["state"][key] *= scale
    torch.save(blob, run_dir / "model.pt")


@pytest.fixture(scope="module")
def trained(ptb_corpus, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    train_and_sharpen(tiny_settings(head="sigsoftmax", epochs=1, alpha=0.0, beta=0.0), ptb_corpus, run_dir)
    return run_dir


def test_eval_matches_an_independent_computation(trained, ptb_corpus, mirror):
    result = evaluate_run(trained, str(ptb_corpus), str(mirror / "wordsim"), options=TINY_EVALUATE)
    model, vocab = load_model(trained / "model.pt", torch.device("cpu"))
    from audit.data.corpus import load

    test = load(ptb_corpus).test[:1000]
    loss = evaluate_loss(model, batchify(test, 1, torch.device("cpu")), 20)  # same stream, other code path
    assert result["test_ppl"] == pytest.approx(math.exp(loss), rel=1e-6)
    assert result["test_tokens"] == 999 and result["contexts"] == 300
    # Press rank from a materialised float64 SVD of the same float32 rows
    rows = torch.cat(list(stream_rows(model, test, 20, 300))).double().numpy()
    assert rows.shape == (300, V)
    sv = np.linalg.svd(rows, compute_uv=False)
    tol = 0.5 * math.sqrt(sum(rows.shape) + 1) * sv[0] * np.finfo(np.float32).eps
    assert result["press_rank"] == int((sv > tol).sum())
    assert len(result["wordsim"]) == 13 and result["wordsim_found"]["EN-WS-353-ALL"] > 50  # 83 pairs in the 2,000 words
    spectrum = np.load(trained / "spectrum.npz")
    k = result["press_rank"]  # values above the tolerance agree; below it the float64 Gram resolves ~1e-8 of s_max
    assert np.allclose(spectrum["log_p_sv"][:k], sv[:k], rtol=1e-6)
    written = json.loads((trained / "eval.json").read_text())
    assert written["press_rank"] == result["press_rank"] and written["job_cpu_seconds"] > 0
    # per-sentence sums from the same pass: they add up to the corpus NLL, and their token
    # counts are the lines of the raw test file (words + <eos>; the first token is not predicted)
    sentences = np.load(trained / "sentences.npz")
    assert sentences["nll"].sum() == pytest.approx(result["test_loss"] * result["test_tokens"], rel=1e-12)
    lines = [len(line.split()) + 1 for line in (mirror / "ptb" / "test.txt").read_text().splitlines()]
    counts = sentences["tokens"]
    assert counts.sum() == 999 and counts[0] == lines[0] - 1
    assert counts[1:-1].tolist() == lines[1:len(counts) - 1] and counts[-1] <= lines[len(counts) - 1]


def test_sentence_index_by_hand():
    vocab = ["<eos>", "a", "b"]
    of, tokens = sentence_index(torch.tensor([1, 2, 0, 1, 0, 2]), vocab)
    assert of.tolist() == [0, 0, 1, 1, 2] and tokens.tolist() == [2, 2, 1]
    # a blank first line (WikiText-2): its <eos> is never predicted, so the sentence is dropped
    of, tokens = sentence_index(torch.tensor([0, 1, 0]), vocab)
    assert of.tolist() == [1, 1] and tokens.tolist() == [0, 2]
    kept = sentence_sums(torch.tensor([0.0, 3.5], dtype=torch.float64), tokens)
    assert kept["nll"].tolist() == [3.5] and kept["tokens"].tolist() == [2]


def test_softmax_rank_is_d_plus_2_and_logit_rank_d_plus_1(ptb_corpus, mirror, tmp_path):
    train_and_sharpen(tiny_settings(head="softmax", epochs=1, alpha=0.0, beta=0.0), ptb_corpus, tmp_path)
    result = evaluate_run(tmp_path, str(ptb_corpus), str(mirror / "wordsim"), options=TINY_EVALUATE)
    assert result["press_rank"] == 8 + 2
    assert result["f_logits_press_rank"] == 8 + 1
    # the positive control: the double-centred log-P's largest gap is at d, from the second pass
    assert result["hidden_gap_dim"] == 8 and result["hidden_gap_ok"] is True and result["hidden_gap_ratio"] > 100
    sv = np.load(tmp_path / "spectrum.npz")["log_p_centred_sv"]
    assert sv.shape == (300,) and sv[7] / sv[8] == pytest.approx(result["hidden_gap_ratio"]) or \
        (np.isinf(result["hidden_gap_ratio"]) and sv[8] < 1e-7 * sv[0])
    # every token of the sharpened head is settled: witnesses and LPs (budget 20) or unresolved
    settled = sum(result[f"argmax_{t}_tokens"] for t in ("witness", "braid", "dominated", "lp"))
    assert settled + result["argmax_unresolved"] == V and result["argmax_box"] == 1.0
    table = pd.read_csv(tmp_path / "argmax_tokens.csv")
    assert len(table) == result["unargmaxable"] + result["argmax_unresolved"]
    assert (table["status"] == "unargmaxable").sum() == result["unargmaxable"]
    counts = np.bincount(load(ptb_corpus).train[:6000].numpy(), minlength=V)
    assert (table["train_count"].to_numpy() == counts[table["token"].to_numpy()]).all()
    assert 0.0 < result["gradient_share"] < 1.0 and result["gradient_share_tokens"] == 300


def test_a_mixture_gets_its_gradient_share_and_a_witness_search_lower_bound(ptb_corpus, mirror, tmp_path):
    train_and_sharpen(tiny_settings(head="mos", epochs=1, alpha=0.0, beta=0.0), ptb_corpus, tmp_path)
    result = evaluate_run(tmp_path, str(ptb_corpus), str(mirror / "wordsim"), options=TINY_EVALUATE)
    # no unargmaxable count: the search proves only argmaxability, of the 40 tokens it searched
    found = result["argmax_argmaxable"]
    assert result["unargmaxable"] is None and result["argmax_searched_tokens"] == 40 and 0 < found <= 40
    assert result["argmax_note"].startswith(f"lower bound from a witness search: at least {found} argmaxable, "
                                            f"{V - found} unresolved")
    assert result["argmax_unresolved"] == V - found and result["argmax_seconds"] > 0
    assert 0.0 < result["gradient_share"] < 1.0
    assert result["hidden_gap_ok"] is None and result["hidden_gap_dim"] >= 1
    table = pd.read_csv(tmp_path / "argmax_tokens.csv")
    assert len(table) == result["argmax_unresolved"] and (table["status"] == "unresolved").all()


def test_failed_run_is_recorded_not_evaluated(ptb_corpus, mirror, tmp_path):
    train(tiny_settings(lr=1e30, clip=1e30), ptb_corpus, tmp_path, log=lambda m: None)
    result = evaluate_run(tmp_path, str(ptb_corpus), str(mirror / "wordsim"), options=TINY_EVALUATE)
    # nothing but the status (and the job's own CPU, which audit.bench.study reads)
    assert set(result) == {"status", "job_cpu_seconds"} and result["status"] == "failed"
    assert (tmp_path / "wordsim_pairs.csv").read_text().strip() == "benchmark,word1,word2,gold,cosine"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour: CUDA is present here")
def test_evaluation_runs_on_the_runs_train_device(trained, ptb_corpus, mirror, tmp_path):
    """rules/evaluate.smk requests a GPU from train.device: the job must use that device, not
    `auto` (a `cpu` study on a GPU host would take an uncounted GPU; a `cuda` job without one
    would silently compute on the CPU)."""
    import shutil

    from audit.errors import AuditError

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["settings"]["train"]["device"] = "cuda"
    (run / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(AuditError, match="'cuda' but no CUDA device"):
        evaluate_run(run, str(ptb_corpus), str(mirror / "wordsim"), options=TINY_EVALUATE)


@pytest.mark.parametrize("head", ["softmax", "mos"])
def test_every_measurement_runs_on_the_transformer_body(head, ptb_corpus, mirror, tmp_path):
    from helpers import TRANSFORMER, TRANSFORMER_TRAIN

    options = {"mos": {"experts": 2, "dropoutl": 0.0}}.get(head, {})
    settings = tiny_settings(head=head, epochs=1, model=TRANSFORMER, **TRANSFORMER_TRAIN)
    settings["options"] = options
    train_and_sharpen(settings, ptb_corpus, tmp_path)
    result = evaluate_run(tmp_path, str(ptb_corpus), str(mirror / "wordsim"), options=TINY_EVALUATE)
    assert result["status"] == "ok" and math.isfinite(result["test_ppl"])
    assert result["test_tokens"] == 999 and result["contexts"] == 300
    d = settings["model"]["emb_size"]
    if head == "softmax":
        # the final LayerNorm's output is gamma * n + beta with n summing to zero: it spans a
        # (d - 1)-dimensional affine space, so log-P = W h + b - lse has rank d + 1 (not the
        # AWD-LSTM's d + 2) and the logits d
        assert result["press_rank"] == d + 1 and result["f_logits_press_rank"] == d
    else:                  # a mixture of two softmaxes exceeds it
        assert result["press_rank"] > d + 2
    # the argmax test runs in the final LayerNorm's box: beta -/+ |gamma| sqrt(d - 1) per coordinate
    box = result["argmax_box"]
    assert len(box["lo"]) == len(box["hi"]) == d and all(a < b for a, b in zip(box["lo"], box["hi"]))
    if head == "softmax":
        assert isinstance(result["unargmaxable"], int) and "argmax_note" not in result
    else:
        assert result["unargmaxable"] is None and result["argmax_note"].startswith("lower bound from a witness search")
    assert 0 <= result["jacobian_fraction_below"] <= 1 and result["wordsim"]
    arrays = np.load(tmp_path / "spectrum.npz")
    assert len(arrays["log_p_sv"]) == min(300, result["vocab_size"])
    assert (tmp_path / "topk.csv").read_text().count("\n") > 1


# `python -m audit evaluate` with HiGHS replaced by a solver stuck on one point: the lower corner of
# the LP's box with r = 1, which breaks rows already in the working set, whatever rows it is given
# (issue 49: the job stayed in the argmax LP for over ten minutes at 100% CPU)
STUCK_EVALUATE = """
import sys, types
import numpy as np
from audit.evaluate import argmax, run

def stuck(cost, A_ub, b_ub, bounds, method, options):
    return types.SimpleNamespace(status=0, x=np.array([lo for lo, _ in bounds[:-1]] + [1.0]), message="stub")

argmax.linprog = stuck
sys.exit(run.main(sys.argv[1:]))
"""


def test_an_evaluate_job_whose_lp_never_settles_ends_with_the_tokens_unresolved(ptb_corpus, mirror, tmp_path):
    """The job under a wall-time cap: it ends, with the LP's tokens unresolved. A 500-word PTB run
    keeps the job short (its argmax tiers take a second, not the minutes of the 10,000-word one)."""
    import subprocess
    import sys

    from audit.data.corpus import restrict_vocab, save

    corpus = tmp_path / "corpus_v500.pt"
    save(restrict_vocab(load(ptb_corpus), 500), corpus)
    run_dir = tmp_path / "run"
    train_and_sharpen(tiny_settings(head="sigsoftmax", epochs=1, alpha=0.0, beta=0.0), corpus, run_dir)
    args = ["--run-dir", str(run_dir), "--corpus", str(corpus), "--wordsim-dir", str(mirror / "wordsim"),
            "--options", json.dumps(TINY_EVALUATE)]
    # the wall-time cap: the job takes ~5 s here; before the bounds it never ended
    proc = subprocess.run([sys.executable, "-c", STUCK_EVALUATE, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((run_dir / "eval.json").read_text())
    # every token the LP budget (20 per box) let in is stopped by a bound: unresolved in both boxes
    # (but a token the stuck point happens to make the argmax: a witness), and counted apart
    for box in ("", "_box100"):
        stopped = result[f"argmax_lp_unresolved{box}"]
        assert 19 <= stopped <= 20 and result[f"argmax_unresolved{box}"] > stopped, box
    settled = sum(result[f"argmax_{t}_tokens"] for t in ("witness", "braid", "dominated", "lp"))
    assert settled + result["argmax_unresolved"] == 500 and result["argmax_lp_tokens"] <= 1
    table = pd.read_csv(run_dir / "argmax_tokens.csv")
    assert (table["status"] == "unresolved").sum() == result["argmax_unresolved"]
