"""What the argmax test of one evaluate job costs at most, from the study's size alone.

``audit.plan.resources.argmax_seconds`` adds these to the evaluate job's runtime: the exact tiers
of the heads that declare ``order_preserving`` (audit/evaluate/argmax.py: witness, dominated,
braid, then at most ``evaluate.argmax.lp_budget`` LPs per box, each within its bounds) over two
boxes, or the witness search of the others (audit/evaluate/argmax_search.py: at most
``search_tokens`` tokens x (``search_steps`` + the starts) passes of the head). Torch-free, like
the rest of the planner; every constant says where it comes from (``python -m audit bench
argmax``, one thread, CPU seconds).
"""

from __future__ import annotations

from audit.model.heads.traits import head_traits
from audit.plan import bodycost

# the argmax test (audit/evaluate/argmax.py, on the CPU even in a GPU job) of the heads with the
# exact test (those that declare ``order_preserving``, audit/evaluate/debate.py) runs over two
# boxes, the body's and the authors' [-100, 100]^d (ARGMAX_BOXES), each with its own LP budget
# (evaluate.argmax.lp_budget tokens). A token's LP is bounded (issue 49): LP_SECONDS wall seconds
# for its set-up and every solve of its constraint generation (HiGHS's time_limit: what is left),
# then at most one round past that deadline: SciPy's set-up of a working set of at most LP_ROWS x
# LP_ROUNDS rows, the residual product over the V - 1 rows and the witness check of the last
# point (``argmax_lp_seconds``). The two figures below mirror audit/evaluate/argmax.py's (this
# room may not import that one: tests/plan/test_resources.py checks that they agree). A token
# needs far less: 0.27 CPU-s at most at V = 10,000, d = 400 (issue 24's one LP over all rows
# took 5.5-11 s there, 11 s a token until the bounds).
ARGMAX_BOXES = 2
ARGMAX_LP_SECONDS = 10.0           # argmax.LP_SECONDS
ARGMAX_LP_MAX_ROWS = 64 * 100      # argmax.LP_ROWS x argmax.LP_ROUNDS
# seconds per entry of the round past the deadline, one thread: SciPy's linprog set-up of the
# working set (a dense (rows, d + 1) matrix: 0.24 s at 6,400 x 401, 9.2e-8 to 9.6e-8 an entry at
# d = 64-400) and, per V (d + 1) entry, the token's set-up, one residual product and the final
# witness check (5.5e-9 to 1.6e-8 at V = 2,000-33,278, d = 64-400; busy 2-core machine)
ARGMAX_LP_ROW_ENTRY_SECONDS = 1.0e-7
ARGMAX_LP_VOCAB_ENTRY_SECONDS = 2.0e-8
# the witness, dominated and braid tiers, per box: 8.0 CPU-s at V = 10,000, d = 400, where the
# V^2 d products dominate; at small d many more tokens reach the dominance and braid tiers, whose
# cost grows as V^2 plus a braid walk per token: 1.7, 2.8, 6.0 and 38.5 CPU-s at V = 2,000, 3,000,
# 5,000 and 16,000, d = 64 (bench argmax's layer, one thread; d = 64 was the slowest of d = 16-400
# at V = 3,000), fitted by the two constants below; a box costs the larger of the two regimes
ARGMAX_CHEAP_SECONDS = 8.0 / (10_000**2 * 400)
ARGMAX_CHEAP_PER_PAIR, ARGMAX_CHEAP_PER_TOKEN = 1.1e-7, 6.5e-4
# the witness search of the other heads (audit/evaluate/argmax_search.py): CPU seconds of one
# token's ascent step (forward and backward of the head) per multiply-add of the head's forward,
# timed at PTB paper size (MoS, 15 experts, d' = 620, d = 280: 4.4 ms per token-step for 44.6M
# multiply-adds on a full block; `bench argmax` measured 0.32 s for a token that runs all 100
# steps, so this errs long); a token costs at most its steps plus ~20 passes (the centre's
# gradient, the starts' forward, every start's PROBE steps, the float64 re-checks)
ARGMAX_SEARCH_SECONDS_PER_MAC = 4.4e-3 / 44.6e6
ARGMAX_SEARCH_START_PASSES = 20
# ... plus a fixed cost per token-step, which the paper size hides and a small head shows: `bench
# argmax` (one thread) gave 33 us to 0.65 ms a token-step at 34 thousand to 2 million multiply-adds
# (V = 500-8,000, K = 2-15, d = 32-64), 1.3-7x the per-MAC rate alone (the default study's MoS:
# 15-17 ms a token here, 25 ms on the H200 node's CPU, where 3 ms was planned); 0.45 ms bounds
# every one of them and adds 10% at paper size
ARGMAX_SEARCH_STEP_SECONDS = 4.5e-4


def argmax_lp_seconds(vocab: int, d: int) -> float:
    """Wall seconds one token's LP can take at most over a (V, d) layer (the bounds of
    audit/evaluate/argmax.py): ``ARGMAX_LP_SECONDS``, then the one round that may start just
    before its deadline (SciPy's set-up of the largest working set, one residual product and the
    witness check over the V - 1 rows)."""
    rows = min(vocab - 1, ARGMAX_LP_MAX_ROWS)
    return (ARGMAX_LP_SECONDS + ARGMAX_LP_ROW_ENTRY_SECONDS * rows * (d + 1)
            + ARGMAX_LP_VOCAB_ENTRY_SECONDS * vocab * (d + 1))


def argmax_cheap_seconds(vocab: int, d: int) -> float:
    """CPU seconds of the witness, dominated and braid tiers over one box, for a (V, d) layer."""
    return max(ARGMAX_CHEAP_SECONDS * vocab * vocab * d,
               ARGMAX_CHEAP_PER_PAIR * vocab * vocab + ARGMAX_CHEAP_PER_TOKEN * vocab)


def argmax_search_seconds(settings: dict, vocab: int) -> float:
    """CPU seconds of the witness search at most: every searched token runs all its steps, each a
    fixed cost plus the head's multiply-adds per position: a mixture's latent layer (d' -> K d)
    and K decoders (d x V), K the head's ``search_decoders`` (Mixtape's 4; an outside head's
    default, its ``components``: one, the softmax's)."""
    dims, options = bodycost.model_sizes(settings), settings["evaluate"]["argmax"]
    d, last = dims["emb_size"], dims["last_size"] or dims["emb_size"]
    experts = head_traits(settings["head"]).search_decoders(settings.get("options", {}))
    macs = (last * experts * d if experts > 1 else 0) + experts * d * vocab
    tokens = vocab if options["search_tokens"] == "all" else min(vocab, int(options["search_tokens"]))
    passes = options["search_steps"] + ARGMAX_SEARCH_START_PASSES
    return (ARGMAX_SEARCH_STEP_SECONDS + ARGMAX_SEARCH_SECONDS_PER_MAC * macs) * tokens * passes
