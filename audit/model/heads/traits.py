"""Planning traits of the heads: what ``audit.plan.resources`` and ``audit.plan.memory`` read from a head
class, torch-free, without building a model.

``head_traits(name)`` answers for a registry name from the traits class here, and for an
import path "pkg.mod:Class" from the class itself (``audit.model.heads.head_class``: its own
members, ``HeadDefaults`` behind them). Each built-in head class (``audit.model.heads``) inherits the traits class of its name here, so
``head_class(name).timing_family`` and ``head_traits(name).timing_family`` are one member; a
head from outside the project gets ``HeadTraits``'s documented defaults (through
``HeadDefaults``) for every trait it does not declare (docs/heads.md, "Planning traits").
Torch-free because Snakemake evaluates every job's runtime and memory while it plans the DAG,
where importing torch costs seconds per call (tests/test_workflow.py).
"""

from __future__ import annotations

from audit.model.importpath import registered_traits
from audit.schema import schema_defaults


class HeadTraits:
    """The torch-free facts every head answers, with the defaults of a head that declares none.

    - ``name``: the registry name (``HEAD_TRAITS``, ``audit.model.heads.HEADS``).
    - ``defaults``: the options the head accepts, with their defaults: the one place a built-in
      head's options are written (config validation refuses any other option). Default: none.
    - ``order_preserving``: True when log-P is one increasing function of the logits
      l = W x + b of ``output_layer()``, the same for every token: argmax log-P = argmax l, so
      the argmax test runs its exact tiers (cheap tiers and LPs; ``audit.evaluate.debate``) and
      the planner times those rather than the witness search. Default False.
    - ``plain_softmax``: True when log-P is log_softmax(W h + b) of ``output_layer()``, no map in
      between: the hidden-gap control applies (``audit.evaluate.hidden_gap``). Default False.

    - ``matches_capacity``: True when the arm's model sizes are solved so that its parameter
      count matches the arm its ``options.match`` names (``audit.model.params``, the config
      check); its ``defaults`` then hold ``match``, ``tolerance`` and ``adjust_hidden``.
      Default False.

    An outside head must declare ``order_preserving`` and ``plain_softmax`` to be measured as one
    of the softmax family: the project never infers them from its name or from members it
    happens to have.

    Planning traits:

    - ``timing_family``: the family of LK Table 2 whose published V100 epoch time the GPU
      runtime scales from (``audit.plan.resources.V100_SECONDS_PER_EPOCH``): softmax, sigsoftmax,
      gss, plif or mos. Default "mos": the slowest family published, so an unmeasured head's
      GPU time errs long.
    - ``output_cost``: compute of the output layer relative to softmax's d' x V product
      (``python -m audit bench heads``). Default 24.2, MoS's at K = 15: the costliest measured,
      so an unmeasured head's time errs long.
    - ``train_vocab_floats``: floats one training token holds per vocabulary entry in the head
      (logits, log-probs, their gradients and the map's intermediates; ``audit.plan.memory``).
      Default 9, a transformed log-softmax's (the larger single-component figure).
    - ``components(options)``: vocabulary-sized softmax rows per token (MoS's K); default 1.
    - ``cost(experts)``: ``output_cost`` for a model of ``experts`` components; default
      ``output_cost``.
    - ``vocab_floats(options)``: ``train_vocab_floats`` for these options.
    - ``eval_vocab_floats(options)``: floats one token holds per vocabulary entry in a forward
      pass without gradients (the trainer's validation, the evaluation's chunks). Default 7.5 per
      component, PLIF's (the largest single-component figure).
    - ``search_decoders(options)``: d x V decoders one forward of the head runs, for the witness
      search's cost; default ``components(options)``.
    - ``param_count(d_in, emb, vocab, options, decoder_bias)``: the head's trainable parameters
      beyond the tied V x d embedding, or None: then the planner counts the whole model on
      PyTorch's meta device (``audit.model.params.count_params``), exact for any head.
    """

    defaults: dict = {}
    order_preserving = False
    plain_softmax = False
    matches_capacity = False
    timing_family = "mos"
    output_cost = 24.2
    train_vocab_floats = 9

    @classmethod
    def components(cls, options: dict) -> int:
        return 1

    @classmethod
    def cost(cls, experts: int) -> float:
        return cls.output_cost

    @classmethod
    def vocab_floats(cls, options: dict) -> float:
        return cls.train_vocab_floats

    @classmethod
    def eval_vocab_floats(cls, options: dict) -> float:
        return 7.5 * cls.components(options)

    @classmethod
    def search_decoders(cls, options: dict) -> int:
        return cls.components(options)

    @classmethod
    def param_count(cls, d_in: int, emb: int, vocab: int, options: dict, decoder_bias: bool) -> int | None:
        return None


# Costs relative to softmax's d' x V product, measured by `python -m audit bench heads`
# (docs/benchmarks.md: one CPU thread, d = 400, V = 10,000; PLIF at its busy-machine 1.28x).
class SoftmaxTraits(HeadTraits):
    name = "softmax"
    defaults = {}
    order_preserving = True
    plain_softmax = True  # softmax_matched inherits both: only its sizes differ
    timing_family = "softmax"
    output_cost = 1.0
    # floats per vocabulary entry, fitted to the simulated device's peaks (audit.plan.memory): a plain
    # log-softmax keeps 3 (logits, log-probs, a gradient)
    train_vocab_floats = 3

    @classmethod
    def eval_vocab_floats(cls, options):
        # without gradients: logits and log-probs. The forward-only figures of the single-softmax
        # heads are the simulated device's (tests/plan/test_memory.py), rounded up to a half
        return 2

    @classmethod
    def param_count(cls, d_in, emb, vocab, options, decoder_bias):
        return vocab if decoder_bias else 0


class SoftmaxMatchedTraits(SoftmaxTraits):
    name = "softmax_matched"
    # the arm whose parameter count to match (``options.match``), and how: the schema's
    # $defs/softmax_matched_options, where their defaults live
    defaults = {"match": None, **schema_defaults("softmax_matched_options", unfilled=True)}
    matches_capacity = True


class SigSoftmaxTraits(SoftmaxTraits):
    name = "sigsoftmax"
    defaults = {}
    # one increasing map for every word: argmax log-P = argmax l (GSS and PLIF inherit it; PLIF's
    # f is increasing and shared by all words, its frozen control's too)
    order_preserving = True
    plain_softmax = False  # a map sits between the logits and the softmax
    timing_family = "sigsoftmax"
    output_cost = 1.075
    # a transformed log-softmax keeps element-wise intermediates: the simulated device kept up to 9,
    # a real H200 (fp32) 4.3 at paper-wt2 and 2.4 at paper-ptb, GSS the same (both its maps are one
    # fused expression; docs/gpu/NVIDIA-H200-2026-11-26-memory.json): the larger GPU figure, with room
    train_vocab_floats = 4.5

    @classmethod
    def eval_vocab_floats(cls, options):
        return 3   # logits, the transformed logits, log-probs


class GSSTraits(SigSoftmaxTraits):
    name = "gss"
    defaults = {"c": 0.0, "k": 2.0}
    timing_family = "gss"
    output_cost = 1.095


class PLIFTraits(SigSoftmaxTraits):
    name = "plif"
    defaults = {"knots": 100_000, "bound": 20.0, "w_scale": 1.0, "lr": 0.02, "seed": None}  # plif_frozen's too
    timing_family = "plif"
    output_cost = 1.28
    trainable = True  # the slopes train (the frozen control's do not, and are not counted)
    # PLIF's interpolation keeps the knot indices and weights per entry: an H200 measured 7.4
    # (paper-ptb) and 8.4 (paper-wt2) floats, so 9, not SigSoftmax's 4.5
    train_vocab_floats = 9

    @classmethod
    def eval_vocab_floats(cls, options):
        return 7.5   # the knot index (int64) and the segment's pieces besides logits and log-probs: 7.1

    @classmethod
    def param_count(cls, d_in, emb, vocab, options, decoder_bias):
        knots = int({**cls.defaults, **options}["knots"]) if cls.trainable else 0
        return super().param_count(d_in, emb, vocab, options, decoder_bias) + knots


class PLIFFrozenTraits(PLIFTraits):
    name = "plif_frozen"
    output_cost = 1.119
    trainable = False


class MoSTraits(HeadTraits):
    name = "mos"
    defaults = {"experts": 15, "dropoutl": 0.29}  # mos_uniform's and moc's too
    timing_family = "mos"
    output_cost = 24.2  # K = 15 softmaxes
    # per component: the loss forms the mixture at the targets alone (_TargetMixture), so no
    # (T, B, V) mixture exists: the logits and the kept softmax in the forward, the softmax and
    # the logits' gradient in the backward, 2 in fp32 (the simulated device's 2; an H200's
    # transformer-paper MoS 2.1, docs/gpus.md); under bf16 autocast the bf16 logits and their
    # float32 copy add 0.5 (that H200: 14.2 GB in bf16 against 12.7 GB in fp32). The plan takes
    # the larger. (The 3.3 planned before was a validation chunk's, measured by a memory step
    # that validated at the longest training sequence: eval_vocab_floats.)
    train_vocab_floats = 2.5
    uses_prior = True  # mos_uniform has no prior layer

    @classmethod
    def components(cls, options):
        return int({**cls.defaults, **options}["experts"])

    @classmethod
    def cost(cls, experts):
        return cls.output_cost * experts / 15  # the bench's 24.2x is for K = 15 softmaxes

    @classmethod
    def vocab_floats(cls, options):
        k = cls.components(options)
        # K = 1 was never measured: planned as a transformed single softmax, as it always was
        return cls.train_vocab_floats * k if k > 1 else HeadTraits.train_vocab_floats

    @classmethod
    def eval_vocab_floats(cls, options):
        # the full mixture (mixture_log_probs): K logits, K log-softmaxes, their K sums with
        # log pi and logsumexp's K shifted copies (ATen's kernel exponentiates x - max into a new
        # tensor), then log-P. An H200's paper-ptb MoS validated 10 x 110 tokens at 4.2 per
        # component with the state (3.21 GB; docs/gpus.md)
        return 4 * cls.components(options) + 1

    @classmethod
    def param_count(cls, d_in, emb, vocab, options, decoder_bias):
        k = int({**cls.defaults, **options}["experts"])
        latent = d_in * k * emb + k * emb       # Linear(d_in -> K d), with bias
        prior = d_in * k if cls.uses_prior else 0  # Linear(d_in -> K), no bias
        return latent + prior + (vocab if decoder_bias else 0)


class MoSUniformTraits(MoSTraits):
    name = "mos_uniform"
    uses_prior = False


class MoCTraits(MoSTraits):
    """MoC and Mixtape share MoS's body and batch; their extra work is far below K softmaxes, so
    MoS's published time bounds theirs (``timing_family`` mos)."""

    name = "moc"
    output_cost = 1.69
    train_vocab_floats = 3  # one plain log-softmax over the mixed context
    order_preserving = True   # one softmax over W xbar + b: argmax log-P = argmax (W xbar + b)

    @classmethod
    def components(cls, options):
        return 1  # the contexts are mixed before one softmax

    @classmethod
    def cost(cls, experts):
        return cls.output_cost

    @classmethod
    def vocab_floats(cls, options):
        return cls.train_vocab_floats

    @classmethod
    def eval_vocab_floats(cls, options):
        return 2  # one plain log-softmax, not MoS's mixture


class MixtapeTraits(HeadTraits):
    """Four component logits only for the frequent words: one vocabulary-sized row per token;
    the witness search counts it as K = 4 decoders (errs long)."""

    name = "mixtape"
    defaults = {"experts": 4, "gate_embedding_size": 160, "frequent_token_fraction": 0.1,
                "dropoutc": 0.0, "dropoutg": 0.0, "noise_std": 0.0}
    timing_family = "mos"
    output_cost = 1.745
    # one vocabulary-sized softmax plus the frequent words' four component logits and gates: an
    # H200 measured 4.8 floats at paper-ptb (0.85 GB where 9 planned 1.07)
    train_vocab_floats = 5

    @classmethod
    def eval_vocab_floats(cls, options):
        return 4.5   # the simulated device's 4.15

    @classmethod
    def search_decoders(cls, options):
        return 4

    @classmethod
    def param_count(cls, d_in, emb, vocab, options, decoder_bias):
        o = {**cls.defaults, **options}
        gates, frequent = int(o["gate_embedding_size"]), int(float(o["frequent_token_fraction"]) * vocab)
        context = d_in * 4 * emb + 4 * emb             # H_k, b_k
        gate = d_in * 3 * gates + 3 * gates + d_in * 3  # U_j, c_j; u_j (no bias)
        return context + gate + frequent * (gates + 3) + (vocab if decoder_bias else 0)  # v_x, beta_x


BUILT_IN = (SoftmaxTraits, SigSoftmaxTraits, GSSTraits, PLIFTraits, PLIFFrozenTraits, MoSTraits, MoCTraits,
            MoSUniformTraits, MixtapeTraits, SoftmaxMatchedTraits)

HEAD_TRAITS = {cls.name: cls for cls in BUILT_IN}  # the built-in heads; audit.model.heads.HEADS agrees
# each built-in head's options with their defaults (config validation reads them without torch)
HEAD_OPTIONS = {name: cls.defaults for name, cls in HEAD_TRAITS.items()}
DEFAULT_HEAD = SoftmaxTraits.name  # a ModelConfig's head when none is named


def head_traits(name: str) -> type:
    """The class that answers the traits of the head ``name`` (a registry name or an import
    path; only the latter imports torch, which validating it has already done)."""
    return registered_traits("head", name, HEAD_TRAITS, _outside)


def _outside(path: str) -> type:
    from audit.model.heads import head_class

    return head_class(path)
