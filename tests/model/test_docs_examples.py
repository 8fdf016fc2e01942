"""The complete examples of docs/heads.md and docs/bodies.md run as written: built into a language
model, trained a step, counted for the capacity-matched softmax."""

import pytest
import torch

from audit.config import check_study
from audit.model.awd_lstm import LanguageModel, ModelConfig, count_parameters
from audit.model.params import head_counts
from tests.helpers import doc_example, write_package

V = 50
SIZES = {"emb_size": 8, "hidden_size": 16, "n_layers": 2}


@pytest.fixture
def docs_pkg(tmp_path, monkeypatch):
    write_package(tmp_path, "docs_examples", {"heads_example": doc_example("heads.md")})
    monkeypatch.syspath_prepend(str(tmp_path))
    return "docs_examples"


def test_heads_example_trains_and_normalises(docs_pkg):
    path = f"{docs_pkg}.heads_example:TemperatureSoftmax"
    torch.manual_seed(0)
    model = LanguageModel(ModelConfig(vocab_size=V, head=path, head_options={"init_temperature": 2.0}, **SIZES))
    words = torch.randint(0, V, (6, 3))
    log_p, hidden, _, _ = model(words, model.init_hidden(3))
    assert log_p.shape == (6, 3, V)
    torch.testing.assert_close(log_p.exp().sum(-1), torch.ones(6, 3))
    before = model.head.log_temperature.item()
    torch.nn.functional.nll_loss(log_p.reshape(-1, V), words.reshape(-1)).backward()
    torch.optim.SGD(model.parameters(), lr=1.0).step()
    assert model.head.log_temperature.item() != before          # the temperature is trained
    assert model.head.transformed_logits(torch.zeros(1, 1, 8)).shape == (1, 1, V)


def test_heads_example_is_counted_and_matched(docs_pkg):
    path = f"{docs_pkg}.heads_example:TemperatureSoftmax"
    softmax = count_parameters(LanguageModel(ModelConfig(vocab_size=V, **SIZES)))
    config = check_study({"study": "t", "seeds": [1], "model": SIZES,
                          "heads": [{"name": "softmax"}, {"name": "tempered", "import": path},
                                    {"name": "softmax_matched", "options": {"match": "tempered"}}]})
    counts = {name: (n, cfg) for name, n, cfg in head_counts(config, "ptb", V)}
    assert counts["softmax"][0] == softmax
    assert counts["tempered"][0] == softmax + 1                  # one learned temperature
    # one parameter more than softmax: the nearest softmax is softmax itself (d unchanged)
    assert counts["softmax_matched"][1].emb_size == SIZES["emb_size"]
    assert counts["softmax_matched"][0] == softmax
