"""audit/model/heads/traits.py, audit/model/bodies/traits.py: the planning traits heads and bodies
declare, importable without torch. Built-in classes answer through the torch-free traits classes they inherit; the planner's parameter count is the built
model's; an outside head or body that declares a built-in's traits is planned exactly as that
built-in, and one that declares none gets the documented defaults."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from audit.plan import bodycost, memory, resources
from audit.config import check_study, run_settings
from audit.model.bodies import BODIES
from audit.model.heads import HEADS, head_class
from audit.model.bodies.traits import body_traits
from audit.model.heads.traits import HEAD_OPTIONS, HEAD_TRAITS, HeadTraits, head_traits
from tests.helpers import write_package

REPO = Path(__file__).resolve().parents[2]

# An outside head and body that compute what MoS, the softmax and the AWD-LSTM compute (they wrap
# them) without subclassing them: what they declare is all the planner can know.
COPIES = textwrap.dedent('''
    import torch.nn as nn

    from audit.model.bodies import AWDLSTMBody
    from audit.model.heads import MoS, Softmax
    from audit.model.bodies.traits import AWDLSTMTraits


    class Wrapper(nn.Module):
        def __init__(self, spec):
            super().__init__()
            self.inner = self.built_in(spec)

        def forward(self, h):
            return self.inner(h)


    class MoSCopy(Wrapper):
        built_in = MoS
        defaults = {"experts": 15, "dropoutl": 0.29}
        projects_input = True
        timing_family = "mos"
        output_cost = 24.2
        train_vocab_floats = 2.5

        @classmethod
        def components(cls, options):
            return int({**cls.defaults, **options}["experts"])

        @classmethod
        def cost(cls, experts):
            return cls.output_cost * experts / 15

        @classmethod
        def vocab_floats(cls, options):
            return cls.train_vocab_floats * cls.components(options)

        @classmethod
        def eval_vocab_floats(cls, options):
            return 4 * cls.components(options) + 1


    class SoftmaxCopy(Wrapper):
        built_in = Softmax
        defaults = {}
        projects_input = False
        order_preserving = True   # the exact argmax test, timed as such
        timing_family = "softmax"
        output_cost = 1.0
        train_vocab_floats = 3


    class SoftmaxBare(Wrapper):
        """Declares no planning trait."""
        built_in = Softmax
        defaults = {}
        projects_input = False


    class SoftmaxDocumentedDefaults(SoftmaxBare):
        """Declares, by value, what docs/heads.md says a head that declares none gets."""
        timing_family = "mos"
        output_cost = 24.2
        train_vocab_floats = 9
        order_preserving = False


    class LSTMBare(nn.Module):
        """The AWD-LSTM, wrapped, declaring no planning trait."""

        def __init__(self, cfg, embedding):
            super().__init__()
            self.inner = AWDLSTMBody(cfg, embedding)
            self.d_out = self.inner.d_out

        def init_hidden(self, batch_size):
            return self.inner.init_hidden(batch_size)

        def forward(self, words, hidden):
            return self.inner(words, hidden)


    class LSTMCopy(LSTMBare):
        # the AWD-LSTM's formulas, declared (its parameter count is left to the meta device)
        macs_per_token = AWDLSTMTraits.macs_per_token
        train_floats = AWDLSTMTraits.train_floats
        eval_floats = AWDLSTMTraits.eval_floats
        host_train_floats = AWDLSTMTraits.host_train_floats
        state_copies = AWDLSTMTraits.state_copies
        eval_window = AWDLSTMTraits.eval_window
''')


@pytest.fixture
def copies(tmp_path, monkeypatch):
    write_package(tmp_path, "i35copies", {"parts": COPIES})
    monkeypatch.syspath_prepend(str(tmp_path))
    return "i35copies.parts"


def paper_settings(head: str, device: str) -> dict:
    path = REPO / "configs" / "paper-ptb.yaml"
    config = check_study(yaml.safe_load(path.read_text()), str(path))
    s = run_settings(config, "ptb", head, config["seeds"][0])
    s["train"]["device"] = device
    return s


def plan(s: dict) -> dict:
    """Every figure the planners give a run."""
    return {"gpu_s_per_token": resources.seconds_per_token(s, True),
            "cpu_s_per_token": resources.seconds_per_token(s, False),
            "train_minutes": resources.train_minutes(s), "evaluate_minutes": resources.evaluate_minutes(s),
            "train_mem_mb": resources.train_mem_mb(s), "evaluate_mem_mb": resources.evaluate_mem_mb(s),
            "argmax_seconds": resources.argmax_seconds(s), "n_params": resources.n_params(s),
            "train_bytes": memory.train_bytes(s), "evaluate_bytes": memory.evaluate_bytes(s)}


def test_the_traits_modules_import_no_torch():
    """The planner and config validation read them while Snakemake parses the workflow; the
    packages they live in load their torch parts lazily (``__getattr__``)."""
    code = ("import sys, audit.model.heads.traits, audit.model.bodies.traits; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_built_in_classes_answer_through_their_traits_classes():
    """One member, two ways to read it: the torch class inherits the torch-free traits class of
    its name, and the exact argmax the planner times is the one the evaluator runs: both read
    ``order_preserving`` (audit/plan/resources.py, audit/evaluate/debate.py), declared torch-free
    with ``plain_softmax`` on the traits class."""
    assert set(HEADS) == set(HEAD_TRAITS)
    for name, cls in HEADS.items():
        assert issubclass(cls, head_traits(name)) and cls.name == name
        # the options a built-in accepts are written once, on its traits class (torch-free)
        assert "defaults" not in vars(cls) and cls.defaults is HEAD_TRAITS[name].defaults is HEAD_OPTIONS[name], name
        for member in ("order_preserving", "plain_softmax"):
            assert member not in vars(cls) and getattr(cls, member) is getattr(HEAD_TRAITS[name], member), (name, member)
    assert not hasattr(HeadTraits, "exact_argmax")  # one trait, not two that could disagree
    for name, cls in BODIES.items():
        assert issubclass(cls, body_traits(name)) and cls.name == name


def test_the_bodies_state_how_the_matched_softmax_may_grow():
    """size_step and hidden_grows, which audit/model/params.py used to decide by the body's name:
    the Transformer's d in steps of its head count (twice it for rotary positions), the
    AWD-LSTM's H grows the count when it has an inner layer, an outside body promises nothing."""
    from audit.model.bodies.registry import BodyDefaults
    from audit.model.params import size_step
    from audit.model.language_model import ModelConfig

    transformer, lstm = body_traits("transformer"), body_traits("awd_lstm")
    assert transformer.size_step({"n_heads": 4, "positions": "learned"}) == 4
    assert transformer.size_step({"n_heads": 4, "positions": "rotary"}) == 8
    assert lstm.size_step({"n_layers": 3}) == BodyDefaults.size_step({}) == 1
    assert [lstm.hidden_grows({"n_layers": n}) for n in (1, 2, 3)] == [False, True, True]
    assert not transformer.hidden_grows({"n_layers": 4}) and not BodyDefaults.hidden_grows({})
    cfg = ModelConfig.of(vocab_size=10, body="transformer", n_heads=3, positions="rotary")
    assert size_step(cfg) == 6 and size_step(ModelConfig.of(vocab_size=10)) == 1


def test_only_the_matched_softmax_matches_capacity():
    assert [n for n, cls in HEAD_TRAITS.items() if cls.matches_capacity] == ["softmax_matched"]
    assert head_class("softmax_matched").matches_capacity and not HeadTraits.matches_capacity


@pytest.mark.parametrize("body", ["awd_lstm", "transformer"])
@pytest.mark.parametrize("head", sorted(HEADS))
@pytest.mark.parametrize("decoder_bias", [True, False])
def test_planned_parameters_are_the_built_models(head, body, decoder_bias):
    """resources.n_params (the traits' declared counts) == count_params (meta device) == the sum
    of numel over a model built on the CPU, for every built-in head on both bodies."""
    import torch

    from audit.model.language_model import LanguageModel, ModelConfig
    from audit.model.params import count_params

    options = {"plif": {"knots": 7}, "plif_frozen": {"knots": 7}, "mos": {"experts": 3}, "moc": {"experts": 3},
               "mos_uniform": {"experts": 3}, "mixtape": {"gate_embedding_size": 5}}.get(head, {})
    model = {"body": body, "emb_size": 8, "hidden_size": 12, "n_layers": 2, "n_heads": 2, "context_size": 6,
             "decoder_bias": decoder_bias}
    if head_class(head).projects_input and body == "awd_lstm":
        model["last_size"] = 10  # d' != d: the head's own projection is counted at its input size
    settings = {"head": head, "options": options, "model": model, "corpus": "ptb", "vocab_size": 50}
    cfg = ModelConfig.of(vocab_size=50, head=head, head_options=options, **model)
    torch.manual_seed(0)
    built = sum(p.numel() for p in LanguageModel(cfg).parameters() if p.requires_grad)
    assert resources.n_params(settings) == count_params(cfg) == built


@pytest.mark.parametrize("device", ["cuda", "cpu"])
@pytest.mark.parametrize("built_in, copy", [("mos", "MoSCopy"), ("softmax", "SoftmaxCopy")])
def test_an_outside_head_and_body_that_declare_the_traits_get_the_built_ins_plan(copies, built_in, copy, device):
    """The paper-size MoS (K = 15) and softmax of configs/paper-ptb.yaml on the AWD-LSTM, against
    the same models from outside: runtime, memory, argmax time and parameters all equal."""
    ours = paper_settings(built_in, device)
    theirs = paper_settings(built_in, device)
    theirs["head"] = f"{copies}:{copy}"
    theirs["model"]["body"] = f"{copies}:LSTMCopy"
    assert plan(theirs) == plan(ours)
    assert bodycost.note(resources._dims(theirs)) is None  # nothing left to a rule


def test_an_outside_head_that_declares_nothing_gets_the_documented_defaults(copies):
    """SoftmaxBare declares no trait: it is planned as HeadTraits documents (the slowest published
    family, the costliest measured output layer, a transformed head's 9 floats per word, the
    witness search), which differs from the softmax it computes by exactly those choices."""
    bare = paper_settings("softmax", "cuda")
    bare["head"] = f"{copies}:SoftmaxBare"
    stated = {**bare, "head": f"{copies}:SoftmaxDocumentedDefaults"}
    assert plan(bare) == plan(stated)
    cls = head_class(bare["head"])
    assert (cls.timing_family, cls.output_cost, cls.train_vocab_floats, cls.order_preserving) == \
        (HeadTraits.timing_family, HeadTraits.output_cost, HeadTraits.train_vocab_floats, False) == ("mos", 24.2, 9, False)
    assert cls.eval_vocab_floats({}) == HeadTraits.eval_vocab_floats({}) == 7.5
    softmax = paper_settings("softmax", "cuda")
    t, vocab = softmax["train"], 10_000
    window = t["bptt"] + (t["max_seq_len_delta"] if t.get("variable_bptt", True) else 0)
    assert memory.train_bytes(bare) - memory.train_bytes(softmax) == pytest.approx(t["batch_size"] * window * (9 - 3) * vocab * 4)
    search = resources.argmax_search_seconds(softmax, vocab)   # one decoder, the search's budget
    assert resources.argmax_seconds(bare) == search != resources.argmax_seconds(softmax)


def test_an_outside_body_that_declares_nothing_is_planned_by_the_stated_rule(copies):
    """LSTMBare computes the AWD-LSTM but declares no cost trait: its work is its meta-device
    parameter count plus the attention term, its activations the larger built-in figure, and the
    plan says so in one note."""
    s = paper_settings("softmax", "cuda")
    s["model"]["body"] = f"{copies}:LSTMBare"
    dims, vocab = resources._dims(s), 10_000
    lstm = sum(4 * h * (i + h) + 8 * h for i, h in [(400, 1150), (1150, 1150), (1150, 400)])
    assert resources.n_params(s) == vocab * 400 + lstm + vocab
    attention = 2 * dims["n_layers"] * dims["context_size"] * 400
    assert bodycost.body_macs(dims, vocab) == lstm + attention
    awd = bodycost.train_floats({**dims, "body": "awd_lstm"}, 75, False)
    transformer = bodycost.train_floats({**dims, "body": "transformer"}, 75, True)
    assert bodycost.train_floats(dims, 75, False) == max(awd, transformer)
    assert bodycost.note(dims).startswith(f"note: model.body '{copies}:LSTMBare' is not built in: costed")
