"""The complete examples of docs/heads.md and docs/bodies.md run as written: built into a language
model, trained a step, counted for the capacity-matched softmax."""

import math
from pathlib import Path

import pytest
import torch

from audit.config import check_study
from audit.model.language_model import LanguageModel, ModelConfig, count_parameters
from audit.model.params import head_counts
from tests.helpers import doc_blocks, doc_example, write_package

V = 50
SIZES = {"emb_size": 8, "hidden_size": 16, "n_layers": 2}


@pytest.fixture
def docs_pkg(tmp_path, monkeypatch):
    write_package(tmp_path, "docs_examples", {"heads_example": doc_example("heads.md"),
                                               "bodies_example": doc_example("bodies.md")})
    monkeypatch.syspath_prepend(str(tmp_path))
    return "docs_examples"


def test_heads_example_trains_and_normalises(docs_pkg):
    path = f"{docs_pkg}.heads_example:TemperatureSoftmax"
    torch.manual_seed(0)
    model = LanguageModel(ModelConfig.of(vocab_size=V, head=path, head_options={"init_temperature": 2.0}, **SIZES))
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
    softmax = count_parameters(LanguageModel(ModelConfig.of(vocab_size=V, **SIZES)))
    config = check_study({"study": "t", "seeds": [1], "model": SIZES,
                          "heads": [{"name": "softmax"}, {"name": "tempered", "import": path},
                                    {"name": "softmax_matched", "options": {"match": "tempered"}}]})
    counts = {name: (n, cfg) for name, n, cfg in head_counts(config, "ptb", V)}
    assert counts["softmax"][0] == softmax
    assert counts["tempered"][0] == softmax + 1                  # one learned temperature
    # one parameter more than softmax: the nearest softmax is softmax itself (d unchanged)
    assert counts["softmax_matched"][1].emb_size == SIZES["emb_size"]
    assert counts["softmax_matched"][0] == softmax


def test_bodies_example_streams_counts_and_trains(docs_pkg, ptb_corpus):
    from helpers import tiny_settings

    from audit.train.trainer import Trainer

    path = f"{docs_pkg}.bodies_example:GRUBody"
    torch.manual_seed(0)
    model = LanguageModel(ModelConfig.of(vocab_size=V, body=path, emb_size=8, dropout=0.0)).eval()
    d = 8
    # tied embedding V d, one GRU layer 3 (d d + d d + 2 d), decoder bias V
    assert count_parameters(model) == V * d + 3 * (2 * d * d + 2 * d) + V
    words = torch.randint(0, V, (9, 2))
    whole = model(words, model.init_hidden(2))[0]
    hidden, parts = model.init_hidden(2), []
    for start in (0, 4):                       # the carried state makes chunks equal one pass
        log_p, hidden, _, _ = model(words[start:start + 5 if start else 4], hidden)
        parts.append(log_p)
    torch.testing.assert_close(torch.cat(parts), whole)
    trainer = Trainer(tiny_settings(epochs=1, model={"body": path}), str(ptb_corpus), log=lambda m: None)
    row = trainer.run_epoch()
    assert row["valid_loss"] < math.log(len(trainer.vocab))   # it learns something in one epoch


@pytest.fixture
def docs_site(tmp_path, monkeypatch):
    """The modules the docs' configs name (myheads, mybodies) on sys.path, and a study folder
    holding configs/ as the current directory (the docs' commands read configs/mine.yaml)."""
    from tests.model.test_check import PARTS

    write_package(tmp_path / "site", "myheads", {"temperature": doc_example("heads.md"),
                                                  "scaled": doc_blocks("heads.md", "python")[0], "parts": PARTS})
    conv = next(block for block in doc_blocks("bodies.md", "python") if "class CausalConv" in block)
    write_package(tmp_path / "site", "mybodies", {"gru": doc_example("bodies.md"), "wide": PARTS, "conv": conv})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    (tmp_path / "study" / "configs").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "study")
    return tmp_path / "study"


def documented_commands(page: str) -> list[list[str]]:
    """The commands of the page's sh blocks, without the PYTHONPATH=... prefix and the comment."""
    import shlex

    return [[word for word in shlex.split(line, comments=True) if "=" not in word]
            for block in doc_blocks(page, "sh") for line in block.splitlines() if line.strip()]


def run_documented_check(page: str, config: dict, capsys) -> tuple[int, str]:
    """Write ``config`` to configs/mine.yaml and run the page's `python -m audit validate` on it."""
    import yaml

    from audit.__main__ import main

    Path("configs/mine.yaml").write_text(yaml.safe_dump(config))
    commands = documented_commands(page)
    validate = [c for c in commands if c[:4] == ["python", "-m", "audit", "validate"]]
    assert len(validate) == 1 and ["snakemake", "-n", "--configfile", "configs/mine.yaml"] in commands
    capsys.readouterr()
    code = main(validate[0][3:])
    return code, capsys.readouterr().err.strip()


@pytest.mark.parametrize("page", ["heads.md", "bodies.md"])
def test_docs_configs_pass_the_documented_check(docs_site, capsys, page):
    """Every YAML example of the page (the per-arm body of docs/bodies.md among them), completed
    with a study name and seeds, passes the check command the page documents."""
    import yaml

    blocks = [yaml.safe_load(block) for block in doc_blocks(page, "yaml")]
    assert blocks
    for block in blocks:
        assert run_documented_check(page, {"study": "docs", "seeds": [1], **block}, capsys) == (0, "")
    if page == "bodies.md":   # the per-arm syntax is documented, and it is an arm's own body
        assert any(arm.get("model", {}).get("body") == "mybodies.gru:GRUBody"
                   for block in blocks for arm in block.get("heads", []))


SMALL = {"emb_size": 16, "hidden_size": 64, "n_layers": 2}


@pytest.mark.parametrize("page, index, config", [
    # the meta-device rule: the page's own counter-example
    ("heads.md", 0, {"model": SMALL, "heads": [{"name": "softmax"},
                                                {"name": "scaled", "import": "myheads.scaled:ScaledSoftmax"}]}),
    # a size softmax_matched cannot reach (myheads.parts:ExtraHead: the softmax and 5000 idle parameters)
    ("heads.md", 1, {"model": {**SMALL, "body": "mybodies.gru:GRUBody"},
                     "heads": [{"name": "softmax"},
                               {"name": "mix", "import": "myheads.parts:ExtraHead", "options": {"extra": 5000}},
                               {"name": "softmax_matched", "options": {"match": "mix"}}]}),
    # a body whose d_out says 16 and whose features are 17 wide, on one arm
    ("bodies.md", 0, {"model": SMALL, "heads": [{"name": "softmax"},
                                                 {"name": "wide", "head": "softmax",
                                                  "model": {"body": "mybodies.wide:WideBody"}}]}),
])
def test_docs_error_lines_are_what_the_check_prints(docs_site, capsys, page, index, config):
    code, err = run_documented_check(page, {"study": "docs", "seeds": [1], **config}, capsys)
    assert code == 1 and err == doc_blocks(page, "text")[index].strip()
