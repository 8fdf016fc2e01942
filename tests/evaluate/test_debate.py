"""argmax_fields (audit.evaluate.debate): which heads get the exact tiers, which the witness search,
in which box, and the eval.json fields and token table each writes."""

import math

import numpy as np
import pytest
import torch
import torch.nn as nn

from audit.config import check_section
from audit.evaluate import argmax, debate
from audit.model.heads import HeadSpec, build_head

VOCAB = [f"w{i}" for i in range(30)]
OPTIONS = {**check_section("evaluate", {}, "evaluate options")["argmax"], "search_steps": 30, "search_tokens": "all"}
TRAIN = torch.arange(30).repeat_interleave(torch.arange(30, 0, -1))   # word i seen 30 - i times


def head(name, d=3, d_in=3, **options):
    torch.manual_seed(0)
    embedding = nn.Embedding(30, d)
    nn.init.normal_(embedding.weight, 0.0, 1.0)
    out = build_head(name, HeadSpec(d_in=d_in, embedding=embedding, options=options))
    with torch.no_grad():
        out.bias.normal_(0.0, 1.0)
    return out.eval()


def test_a_softmax_head_gets_the_exact_tiers_in_the_bodys_box():
    h = head("softmax")
    lo, hi = np.array([-0.5, 0.0, -2.0]), np.array([1.0, 0.4, 0.5])
    fields, table = debate.argmax_fields(h, TRAIN, VOCAB, OPTIONS, box=(lo, hi), d_in=3)
    W, b = (t.detach().double().numpy() for t in h.output_layer())
    exact = argmax.check(W, b, box=(lo, hi), lp_budget=OPTIONS["lp_budget"])
    assert fields["unargmaxable"] == exact.unargmaxable.size > 0
    assert fields["argmax_argmaxable"] + fields["unargmaxable"] + fields["argmax_unresolved"] == 30
    assert fields["argmax_box"] == {"lo": lo.tolist(), "hi": hi.tolist()} and "argmax_note" not in fields
    assert table["token"].tolist() == exact.unargmaxable.tolist()
    assert (table["train_count"] == 30 - table["token"]).all()
    assert (table["word"] == "w" + table["token"].astype(str)).all()


def test_a_mixture_gets_the_witness_search_and_claims_no_unargmaxable_count():
    h = head("mos", d=3, d_in=4, experts=2, dropoutl=0.0)
    fields, table = debate.argmax_fields(h, TRAIN, VOCAB, OPTIONS, box=1.0, d_in=4)
    found = fields["argmax_argmaxable"]
    assert fields["unargmaxable"] is None and 0 < found < 30 and found + fields["argmax_unresolved"] == 30
    assert fields["argmax_note"] == (f"lower bound from a witness search: at least {found} argmaxable, "
                                     f"{30 - found} unresolved")
    assert fields["argmax_box"] == 1.0 and fields["argmax_seconds"] > 0
    assert (table["status"] == "unresolved").all() and len(table) == 30 - found


def test_the_search_token_budget_reaches_eval_json():
    h = head("mixtape", d=3, d_in=4, gate_embedding_size=2, frequent_token_fraction=0.5)
    fields, table = debate.argmax_fields(h, TRAIN, VOCAB, {**OPTIONS, "search_tokens": 5}, box=1.0, d_in=4)
    assert fields["argmax_searched_tokens"] == 5 and fields["argmax_argmaxable"] <= 5
    assert "beyond the evaluate.argmax.search_tokens budget of 5" in fields["argmax_note"]
    assert set(range(5, 30)) <= set(table["token"])


def test_moc_reads_tanh_contexts_so_its_box_is_the_unit_box_on_any_body():
    h = head("moc", d=3, d_in=4, experts=2, dropoutl=0.0)
    for box in (None, 7.0):     # a body without a box, or with a wider one: MoC's W still reads [-1, 1]^d
        fields, _ = debate.argmax_fields(h, TRAIN, VOCAB, OPTIONS, box=box, d_in=4)
        assert fields["argmax_box"] == 1.0 and isinstance(fields["unargmaxable"], int)


@pytest.mark.parametrize("name", ["softmax", "mos"])
def test_a_body_without_a_box_leaves_the_test_unmeasured(name):
    h = head(name, d=3, d_in=3, **({"experts": 2, "dropoutl": 0.0} if name == "mos" else {}))
    fields, table = debate.argmax_fields(h, TRAIN, VOCAB, OPTIONS, box=None, d_in=3)
    assert fields["unargmaxable"] is None and fields["argmax_note"].startswith("not measured: the body states no box")
    assert table.empty


def test_the_exact_heads_are_also_tested_in_the_authors_box():
    """Issue 33: Grivas et al. 2022 counted over [-100, 100]^d; the body's [-1, 1]^d makes tokens
    unargmaxable far more easily. The authors' count is checked against one plain LP per token
    (no tiers), and it is smaller here: a box holding the body's can only free tokens."""
    h = head("softmax")
    fields, _ = debate.argmax_fields(h, TRAIN, VOCAB, OPTIONS, box=1.0, d_in=3)
    W, b = (t.detach().double().numpy() for t in h.output_layer())
    by_lp = sum(argmax.chebyshev_lp(W, b, c, 100.0) <= argmax.LP_TOL for c in range(30))
    body = sum(argmax.chebyshev_lp(W, b, c, 1.0) <= argmax.LP_TOL for c in range(30))
    assert fields["unargmaxable_box100"] == by_lp and fields["unargmaxable"] == body
    assert by_lp < body and fields["argmax_unresolved_box100"] == 0 and fields["argmax_seconds_box100"] > 0
    # a budget of 0 LPs leaves the authors' box's survivors unresolved, never argmaxable
    tight = debate.argmax_fields(h, TRAIN, VOCAB, {**OPTIONS, "lp_budget": 0}, box=1.0, d_in=3)[0]
    assert tight["unargmaxable_box100"] + tight["argmax_unresolved_box100"] >= by_lp
    # the witness search's heads get no authors' box (their count is not the authors' test)
    mos = debate.argmax_fields(head("mos", d=3, d_in=4, experts=2, dropoutl=0.0), TRAIN, VOCAB, OPTIONS, box=1.0, d_in=4)[0]
    assert "unargmaxable_box100" not in mos


AFFINE_HEAD = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class PerTokenAffine(nn.Module):
    """log_softmax(exp(s) * (W h + b)): every logit scaled by its own exp(s_v), with every
    optional member of the protocol but the order_preserving trait."""

    def __init__(self, spec):
        super().__init__()
        self.embedding = spec.embedding
        self.bias = nn.Parameter(torch.zeros(spec.vocab_size))
        self.log_scale = nn.Parameter(torch.zeros(spec.vocab_size))

    def output_layer(self):
        return self.embedding.weight, self.bias

    def from_logits(self, logits):
        return F.log_softmax(logits * self.log_scale.exp(), dim=-1)

    def transformed_logits(self, h):
        return F.linear(h, self.embedding.weight, self.bias) * self.log_scale.exp()

    def forward(self, h):
        return self.from_logits(F.linear(h, self.embedding.weight, self.bias))
'''


def test_a_per_token_map_gets_the_witness_search_not_the_exact_test(tmp_path, monkeypatch):
    """Issue 37, item 3: five tokens in d = 2, W = (e1, e2, -e1, -e2, 0.4 (e1 + e2)), b = 0.
    0.4 (x1 + x2) < max(x1, x2) wherever that max is positive, so over [-1, 1]^2 token 4 is never
    the argmax of W x + b; scaled by exp(s_4) = 2 it is at x = (1, 1) (1.6 against 1). A head
    that does not declare order_preserving must not be judged by W x + b."""
    from audit.model.heads import head_class
    from tests.helpers import write_package

    monkeypatch.syspath_prepend(str(write_package(tmp_path, "affine_heads_37", {"affine": AFFINE_HEAD})))
    embedding = nn.Embedding(5, 2)
    h = build_head("affine_heads_37.affine:PerTokenAffine", HeadSpec(d_in=2, embedding=embedding))
    with torch.no_grad():
        embedding.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [0.4, 0.4]]))
        h.log_scale[4] = math.log(2.0)
    assert head_class("affine_heads_37.affine:PerTokenAffine").order_preserving is False   # HeadDefaults
    assert int(h(torch.ones(1, 1, 2)).argmax()) == 4          # the head's own argmax at x = (1, 1)
    W, b = (t.detach().double().numpy() for t in h.output_layer())
    assert argmax.check(W, b, box=1.0).unargmaxable.tolist() == [4]   # what the exact test says of W x + b
    vocab, train = VOCAB[:5], torch.arange(5)
    fields, table = debate.argmax_fields(h, train, vocab, OPTIONS, box=1.0, d_in=2)
    assert fields["unargmaxable"] is None and fields["argmax_argmaxable"] == 5 and fields["argmax_unresolved"] == 0
    assert "unargmaxable_box100" not in fields and table.empty
    # the same head declaring the trait (wrongly, here) is what gets the exact test
    monkeypatch.setattr(type(h), "order_preserving", True, raising=False)
    assert debate.argmax_fields(h, train, vocab, OPTIONS, box=1.0, d_in=2)[0]["unargmaxable"] == 1


@pytest.mark.parametrize("name, exact", [("softmax", True), ("softmax_matched", True), ("sigsoftmax", True),
                                         ("gss", True), ("plif", True), ("plif_frozen", True), ("moc", True),
                                         ("mos", False), ("mos_uniform", False), ("mixtape", False)])
def test_the_built_in_heads_declare_which_ones_keep_the_argmax(name, exact):
    from audit.model.heads import HEADS

    assert HEADS[name].order_preserving is exact
    assert HEADS[name].plain_softmax is (name in ("softmax", "softmax_matched"))
