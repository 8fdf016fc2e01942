"""The evaluator asks heads and bodies about themselves (issue 35, item 1): the exact argmax test
and the gradient share read the protocol members ``order_preserving``, ``argmax_box`` and
``layer_logits`` of a head and ``output_box`` of a body, so a head or body from outside that
declares them is measured exactly as the built-in one is, and ``audit/evaluate`` keeps no table
of built-in names."""

import ast
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn

from audit.config import check_section
from audit.evaluate import argmax, debate
from audit.evaluate import gradient_share as gs
from audit.model.bodies import BODIES
from audit.model.heads import HEADS, HeadSpec, build_head
from tests.helpers import write_package

VOCAB = [f"w{i}" for i in range(30)]
OPTIONS = {**check_section("evaluate", {}, "evaluate options")["argmax"], "search_steps": 30, "search_tokens": "all"}
TRAIN = torch.arange(30).repeat_interleave(torch.arange(30, 0, -1))   # word i seen 30 - i times

# a softmax that says what it is through the protocol alone: no from_logits, no built-in base
LAYER_SOFTMAX = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerSoftmax(nn.Module):
    order_preserving = True
    plain_softmax = True

    def __init__(self, spec):
        super().__init__()
        self.embedding = spec.embedding
        self.bias = nn.Parameter(torch.zeros(spec.vocab_size))

    def output_layer(self):
        return self.embedding.weight, self.bias

    def transformed_logits(self, h):
        return F.linear(h, self.embedding.weight, self.bias)

    def layer_logits(self, h):
        return F.linear(h, self.embedding.weight, self.bias).unsqueeze(-2), lambda l: F.log_softmax(l[..., 0, :], -1)

    def forward(self, h):
        return F.log_softmax(F.linear(h, self.embedding.weight, self.bias), dim=-1)


class FromLogitsSoftmax(nn.Module):
    """The same softmax stating ``from_logits`` and no ``layer_logits``: the default one
    (HeadDefaults) differentiates through ``from_logits``, as for the built-in family."""

    order_preserving = True

    def __init__(self, spec):
        super().__init__()
        self.embedding = spec.embedding
        self.bias = nn.Parameter(torch.zeros(spec.vocab_size))

    def output_layer(self):
        return self.embedding.weight, self.bias

    def from_logits(self, logits):
        return F.log_softmax(logits, dim=-1)

    def forward(self, h):
        return self.from_logits(F.linear(h, self.embedding.weight, self.bias))


class TanhContext(nn.Module):
    """log_softmax(W tanh(A h + c) + b): its output layer reads tanh features, in [-1, 1]^d
    whatever the body (MoC with one expert, written from outside)."""

    order_preserving = True
    argmax_box = 1.0

    def __init__(self, spec):
        super().__init__()
        self.embedding = spec.embedding
        self.context = nn.Linear(spec.d_in, spec.embedding.weight.shape[1])
        self.bias = nn.Parameter(torch.zeros(spec.vocab_size))

    def output_layer(self):
        return self.embedding.weight, self.bias

    def _logits(self, h):
        return F.linear(torch.tanh(self.context(h)), self.embedding.weight, self.bias)

    def layer_logits(self, h):
        return self._logits(h).unsqueeze(-2), lambda l: F.log_softmax(l[..., 0, :], -1)

    def forward(self, h):
        return F.log_softmax(self._logits(h), dim=-1)
'''


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    root = write_package(tmp_path_factory.mktemp("site"), "traits35", {"heads": LAYER_SOFTMAX})
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(root))
        yield root


def _pair(builtin: str, outside: str, d: int, d_in: int, options: dict | None = None):
    """The built-in head and the outside one on the same tied embedding, with the same weights."""
    torch.manual_seed(0)
    embedding = nn.Embedding(30, d)
    nn.init.normal_(embedding.weight, 0.0, 1.0)
    ours = build_head(builtin, HeadSpec(d_in=d_in, embedding=embedding, options=options or {}))
    theirs = build_head(f"traits35.heads:{outside}", HeadSpec(d_in=d_in, embedding=embedding))
    with torch.no_grad():
        ours.bias.normal_(0.0, 1.0)
        theirs.bias.copy_(ours.bias)
        if outside == "TanhContext":      # MoC's one latent map, the same weights
            theirs.context.weight.copy_(ours.latent.weight)
            theirs.context.bias.copy_(ours.latent.bias)
    return ours.double().eval(), theirs.double().eval()


def _untimed(fields: dict) -> dict:
    return {k: v for k, v in fields.items() if "seconds" not in k}


def _share(head, x: np.ndarray, y: np.ndarray, d_in: int) -> dict:
    obs = gs.GradientShare(head, torch.from_numpy(y), d_in=d_in)
    obs.add(torch.from_numpy(x))
    return obs.summary()


def test_an_outside_softmax_gets_the_exact_argmax_test_and_the_gradient_share_of_the_built_in(package):
    """On the old code the outside head, lacking ``from_logits`` and MoS's ``contexts``, was refused
    by the gradient share ("not measured") though it is the built-in softmax."""
    ours, theirs = _pair("softmax", "LayerSoftmax", d=3, d_in=3)
    lo, hi = np.array([-0.5, 0.0, -2.0]), np.array([1.0, 0.4, 0.5])
    mine, my_table = debate.argmax_fields(ours, TRAIN, VOCAB, OPTIONS, box=(lo, hi), d_in=3)
    yours, your_table = debate.argmax_fields(theirs, TRAIN, VOCAB, OPTIONS, box=(lo, hi), d_in=3)
    assert mine["unargmaxable"] > 0 and "unargmaxable_box100" in yours
    assert _untimed(yours) == _untimed(mine) and your_table.equals(my_table)
    rng = np.random.default_rng(7)
    x, y = rng.uniform(-1, 1, size=(12, 3)), rng.integers(0, 30, size=12)
    expected = _share(ours, x, y, 3)
    assert 0.0 < expected["gradient_share"] < 1.0
    assert _share(theirs, x, y, 3) == pytest.approx(expected, rel=1e-12)
    # a head stating from_logits alone is measured too (the default layer_logits; so it was before)
    _, stated = _pair("softmax", "FromLogitsSoftmax", d=3, d_in=3)
    assert _share(stated, x, y, 3) == pytest.approx(expected, rel=1e-12)


def test_the_built_in_heads_state_their_evaluation_traits():
    """MoC alone reads a box of its own; Mixtape alone has no layer logits (per-word gates)."""
    h = torch.zeros(2, 4)
    for name, cls in HEADS.items():
        assert cls.argmax_box == (1.0 if name == "moc" else None), name
        options = {"softmax_matched": {"match": "softmax"}}.get(name, {})
        head = cls(HeadSpec(d_in=4, embedding=nn.Embedding(30, 4), options=options)).eval()
        layer = head.layer_logits(h)
        if name == "mixtape":
            assert layer is None
            continue
        logits, log_p_of = layer
        assert logits.shape == (2, head.options.get("experts", 1) if name in ("mos", "mos_uniform") else 1, 30)
        assert torch.allclose(log_p_of(logits), head(h), atol=1e-6), name


def test_a_head_stating_the_box_of_its_layers_input_is_tested_there_not_in_the_bodys(package):
    """The outside twin of MoC (one expert: xbar = tanh(A h + c)) declares ``argmax_box`` 1.0 and
    is tested over [-1, 1]^3 on a body whose box is [-3, 3]^4, as MoC is; the old code tested
    MoC alone there (an isinstance) and the outside head over the body's box."""
    ours, theirs = _pair("moc", "TanhContext", d=3, d_in=4, options={"experts": 1, "dropoutl": 0.0})
    mine, my_table = debate.argmax_fields(ours, TRAIN, VOCAB, OPTIONS, box=3.0, d_in=4)
    yours, your_table = debate.argmax_fields(theirs, TRAIN, VOCAB, OPTIONS, box=3.0, d_in=4)
    W, b = (t.detach().numpy() for t in ours.output_layer())
    assert mine["argmax_box"] == 1.0 and mine["unargmaxable"] == argmax.check(W, b, box=1.0).unargmaxable.size
    assert _untimed(yours) == _untimed(mine) and your_table.equals(my_table)
    # with no box from the body, the head's own still gives the test
    assert debate.argmax_fields(theirs, TRAIN, VOCAB, OPTIONS, box=None, d_in=4)[0]["argmax_box"] == 1.0
    rng = np.random.default_rng(8)
    x, y = rng.normal(size=(9, 4)), rng.integers(0, 30, size=9)
    assert _share(theirs, x, y, 4) == pytest.approx(_share(ours, x, y, 4), rel=1e-12)


def test_the_exact_test_runs_over_the_box_the_caller_passes_none_assumed():
    """``argmax_fields`` has no default box (the old one was ``BOX_BY_BODY["awd_lstm"]``): the
    body's ``output_box`` is passed, a box of 0.25 gives a different count than 1.0."""
    torch.manual_seed(0)
    embedding = nn.Embedding(30, 3)
    nn.init.normal_(embedding.weight, 0.0, 1.0)
    h = build_head("softmax", HeadSpec(d_in=3, embedding=embedding)).double().eval()
    with torch.no_grad():
        h.bias.normal_(0.0, 1.0)
    with pytest.raises(TypeError, match="box"):
        debate.argmax_fields(h, TRAIN, VOCAB, OPTIONS, d_in=3)
    small = debate.argmax_fields(h, TRAIN, VOCAB, OPTIONS, box=0.25, d_in=3)[0]
    W, b = (t.detach().numpy() for t in h.output_layer())
    assert small["argmax_box"] == 0.25
    assert small["unargmaxable"] == argmax.check(W, b, box=0.25).unargmaxable.size
    assert small["unargmaxable"] != argmax.check(W, b, box=1.0).unargmaxable.size


def test_the_evaluator_names_no_built_in_head_or_body():
    """No quoted built-in head or body name, and no built-in head or body class, in
    ``audit/evaluate``: what it needs of them is a protocol member (docs/heads.md, docs/bodies.md)."""
    names = set(HEADS) | set(BODIES)
    classes = {cls.__name__ for cls in (*HEADS.values(), *BODIES.values())}
    found = []
    for path in sorted((Path(__file__).resolve().parents[2] / "audit" / "evaluate").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
            elif isinstance(node, ast.Name) and node.id in classes:
                found.append(f"{path.name}:{node.lineno} {node.id}")
            elif isinstance(node, ast.alias) and node.name in classes:
                found.append(f"{path.name} imports {node.name}")
    assert found == []


SCALED_GRU = '''
import torch.nn as nn
import torch.nn.functional as F


class ScaledGRU(nn.Module):
    """One GRU layer, its output doubled: every feature lies in (-2, 2)^d, and it says so."""

    output_box = 2.0

    def __init__(self, cfg, embedding):
        super().__init__()
        self.embedding = embedding
        self.gru = nn.GRU(cfg.emb_size, cfg.emb_size)
        self.dropout = cfg.dropout
        self.d_out = cfg.emb_size

    def init_hidden(self, batch_size):
        return self.embedding.weight.new_zeros(1, batch_size, self.d_out)

    def forward(self, words, hidden):
        raw, hidden = self.gru(F.embedding(words, self.embedding.weight), hidden)
        raw = 2.0 * raw
        return F.dropout(raw, self.dropout, self.training), raw, hidden
'''


def test_an_outside_body_and_head_are_evaluated_as_the_built_in_softmax_on_that_body(package, ptb_corpus_2k, mirror,
                                                                                     tmp_path):
    """The whole evaluation of a run: the outside body's own ``output_box`` (2.0, not the unit box)
    is the exact test's box, and the outside softmax trained on it gets every number the built-in
    softmax gets on the same body and seed (the same training: a tied decoder and a zero bias),
    the gradient share included. No LP and one braid step (``lp_budget`` 0, ``patience`` 1): the
    tiers before the LP are what a box changes, at a fraction of the CPU. On PTB capped at 2,000
    words (issue 48: the tiers grow as V^2; 35 s of CI at V = 10,000)."""
    from audit.evaluate.run import evaluate_run, load_model
    from audit.train.run import train
    from tests.helpers import TINY_EVALUATE, tiny_settings

    ptb_corpus = ptb_corpus_2k
    (package / "traits35" / "bodies.py").write_text(SCALED_GRU)
    body = {"body": "traits35.bodies:ScaledGRU"}
    evaluate = {**TINY_EVALUATE, "argmax": {**TINY_EVALUATE["argmax"], "lp_budget": 0, "patience": 1}}
    results = {}
    for name, entry in (("builtin", None), ("outside", {"name": "layer", "import": "traits35.heads:LayerSoftmax"})):
        out = tmp_path / name
        train(tiny_settings(model=body, entry=entry, epochs=1, train_tokens=3000), str(ptb_corpus), out,
              log=lambda m: None)
        results[name] = evaluate_run(out, str(ptb_corpus), str(mirror / "wordsim"), options=evaluate)
    builtin, outside = results["builtin"], results["outside"]
    model, _ = load_model(tmp_path / "builtin" / "model.pt", torch.device("cpu"))
    W, b = (t.detach().double().numpy() for t in model.head.output_layer())
    options = {**check_section("evaluate", {}, "evaluate options")["argmax"], **evaluate["argmax"]}

    def direct(box):
        result = argmax.check(W, b, box=box, seed=options["seed"], patience=options["patience"],
                              lp_budget=options["lp_budget"])
        return _untimed(result.summary())

    assert builtin["argmax_box"] == 2.0 and direct(2.0) != direct(1.0)
    assert {k: builtin[k] for k in direct(2.0)} == direct(2.0)
    assert 0.0 < outside["gradient_share"] < 1.0 and "gradient_share_note" not in outside
    # a benchmark with too few pairs among 2,000 words is NaN in both (NaN != NaN: compared as text)
    same = lambda r: {**_untimed(r), "wordsim": {k: repr(v) for k, v in r["wordsim"].items()}}  # noqa: E731
    assert same(outside) == same(builtin)
