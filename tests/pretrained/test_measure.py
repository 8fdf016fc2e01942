"""One checkpoint measured: each figure against an independent computation of it (transformers'
own loss, a dense SVD, a least-squares projection, explicit cosines), and the planted defects
found: the unargmaxable token of tiny-16's final head (and not before it was planted), the d - 1
of the hidden gap at V = 50,304."""

import numpy as np
import pytest
import torch

from audit.pretrained import example, load, suite
from audit.pretrained.measure import measure
from audit.pretrained.stream import read_lines, tokenise
from tests.pretrained.conftest import example_config

OPTIONS = {"argmax": {"lp_budget": 20, "patience": 50, "seed": 0, "search_steps": 0, "search_tokens": 0},
           "gradient_share": {"contexts": 120}, "hidden_gap": True}


def _load(config, model, seed, revision):
    source = load.locate(config["pretrained"], suite.Job(model, seed, revision))
    return load.load(source, torch.device("cpu"))


@pytest.fixture(scope="module")
def text_lines(mirror):
    return read_lines(mirror / "ptb" / "test.txt", 40)


def reference_loss(model, ids: torch.Tensor, window: int, stride: int) -> float:
    """Mean NLL by transformers' own causal-LM loss over the same windows, the scored positions of
    each window given as labels and the rest ignored (-100)."""
    total, count, scored, begin = 0.0, 0, 1, 0
    with torch.no_grad():
        while scored < ids.numel():
            end = min(begin + window, ids.numel())
            labels = ids[begin:end].clone()
            labels[:scored - begin] = -100
            loss = model(input_ids=ids[begin:end][None], labels=labels[None]).loss
            total, count = total + float(loss) * (end - scored), count + end - scored
            scored, begin = end, begin + stride
    return total / count


def test_perplexity_and_sentences_match_transformers_loss(example_root, text_lines):
    config = example_config(example_root, window=64, stride=24, contexts=100)
    model, tokenizer = _load(config, "tiny-16", 0, "step40")
    text = tokenise(tokenizer, text_lines)
    result, arrays, tables = measure(model, tokenizer, text, config["pretrained"], {**config["evaluate"], **OPTIONS},
                                     name="tiny-16", argmax=False)
    assert result["test_tokens"] == text.ids.numel() - 1
    assert result["test_loss"] == pytest.approx(reference_loss(model, text.ids, 64, 24), abs=1e-5)
    assert tables["sentences"]["nll"].sum() == pytest.approx(result["test_loss"] * result["test_tokens"], rel=1e-9)
    assert len(tables["sentences"]["nll"]) == len(text_lines) and result["ppl_stride"] == 24


def test_the_planted_unargmaxable_token_is_found(example_root, text_lines):
    config = example_config(example_root, window=64, stride=32, contexts=100)
    found = {}
    for revision in ("step60", "step80"):       # step80 carries the plant; step60 is the same run before it
        model, tokenizer = _load(config, "tiny-16", 1, revision)
        text = tokenise(tokenizer, text_lines)
        result, _, tables = measure(model, tokenizer, text, config["pretrained"], {**config["evaluate"], **OPTIONS},
                                    name="tiny-16", argmax=True)
        table = tables["argmax_tokens"]
        found[revision] = set(table.loc[table["status"] == "unargmaxable", "token"])
        assert result["unargmaxable_box100"] >= (revision == "step80")
    assert example.PLANTED[0] in found["step80"] and example.PLANTED[0] not in found["step60"]


@pytest.fixture(scope="module")
def wide(tmp_path_factory, example_root):
    """A checkpoint with V = 50,304 rows (Pythia's padded vocabulary) and d = 8, in the layout."""
    folder = tmp_path_factory.mktemp("wide") / "wide" / "step1"
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(example_root / "example" / "tiny-16-seed0" / "step40")
    example.save_checkpoint(example.new_model(3, d=8, layers=1, rows=50304), tokenizer, folder)
    return folder


def test_streamed_paths_at_v_50304(wide, text_lines):
    model, tokenizer = load.load(load.Source(str(wide), None, "wide revision step1"), torch.device("cpu"))
    section = {"window": 128, "stride": 64, "contexts": 120}
    text = tokenise(tokenizer, text_lines[:12])
    result, arrays, _ = measure(model, tokenizer, text, section, OPTIONS, name="wide", argmax=False)
    with torch.no_grad():
        h = model.base_model(input_ids=text.ids[:128][None]).last_hidden_state[0, :120].double()
        log_p = torch.log_softmax(model.get_output_embeddings()(h.float()), -1).double().numpy()
    dense = np.linalg.svd(log_p, compute_uv=False)
    assert result["contexts"] == 120 and result["vocab_size"] == 50304
    np.testing.assert_allclose(arrays["log_p_sv"][:8], dense[:8], rtol=1e-5)       # W h: the d directions
    np.testing.assert_allclose(arrays["log_p_sv"], dense, atol=1e-7 * dense[0])     # the rest: float32 noise
    assert result["hidden_gap_expected"] == 7 and result["hidden_gap_dim"] == 7 and result["hidden_gap_ok"]
    W = model.get_output_embeddings().weight.detach().double().numpy()
    A = np.hstack([W, np.ones((W.shape[0], 1))])
    g = np.exp(log_p)
    g[np.arange(120), text.ids[1:121].numpy()] -= 1.0
    kept = A @ np.linalg.lstsq(A, g.T, rcond=None)[0]
    assert result["gradient_share"] == pytest.approx(float(((kept * kept).sum(0) / (g * g).sum(1)).mean()), rel=1e-6)
    assert result["gradient_floor"] == pytest.approx(np.sqrt(9 / 50304))
    unit = h.numpy() / np.linalg.norm(h.numpy(), axis=1, keepdims=True)
    cos = unit @ unit.T
    assert result["anisotropy"] == pytest.approx((cos.sum() - 120) / (120 * 119), abs=1e-9)
    np.testing.assert_allclose(arrays["head_sv"], np.linalg.svd(W, compute_uv=False), rtol=1e-8)
