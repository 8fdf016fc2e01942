"""The measurements of the debate since 2021 for one evaluated run (issue 24; docs/runs-table.md).

``audit.evaluate.run`` calls these on the loaded model; each returns eval.json fields, with
``None`` and a ``*_note`` saying why where a head has no such measurement (never a made-up
number):

- ``argmax_fields``: unargmaxable tokens over the box of the head's inputs. The exact tiers
  (``audit.evaluate.argmax``) for every head whose log-P is a softmax of ``W x + b`` after an
  increasing element-wise map shared by every word (softmax, the capacity-matched softmax,
  sigsoftmax, GSS, PLIF and its frozen control: the heads that declare ``order_preserving``,
  ``HeadProtocol``; MoC too, whose one softmax reads W xbar + b), with x the input of the
  head's output layer in its box: the head's ``argmax_box`` when it states one (MoC: xbar is a
  convex combination of tanh contexts, in [-1, 1]^d whatever the body), else the body's
  ``output_box`` ([-1, 1]^d for the AWD-LSTM, per coordinate from the Transformer's final
  LayerNorm). Every other head (MoS, its uniform-gate ablation, Mixtape, an outside head that
  does not declare ``order_preserving``) gets the witness search
  (``audit.evaluate.argmax_search``): a certified lower bound on its argmaxable tokens,
  ``unargmaxable`` None. A body with no box leaves the test unmeasured (except for a head with
  its own ``argmax_box``).
  The exact heads are tested a second time over the authors' box, [-100, 100]^d
  (``argmax.AUTHORS_BOX``, Grivas et al. 2022's setting, on which their claim is judged):
  ``unargmaxable_box100``, ``argmax_unresolved_box100``, ``argmax_seconds_box100``; the witness
  search, whose heads the authors did not test, runs over the body's box alone. Each box's
  unresolved tokens include those a bound of their LP stopped (``argmax.LP_ROUNDS``,
  ``argmax.LP_SECONDS``, a working set that stops growing: issue 49), counted apart as
  ``argmax_lp_unresolved`` and ``argmax_lp_unresolved_box100``; a claim on the unargmaxable
  tokens counts every unresolved one both ways (``configs/claims.yaml``).
- ``hidden_gap_fields``: the hidden size read from the double-centred log-P spectrum
  (``audit.evaluate.hidden_gap``), with its positive control on the heads that declare
  ``plain_softmax`` over a body that declares ``output_rank``: the estimate is the rank the body
  implies and the spectrum ends there (``hidden_gap.control``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from audit.errors import AuditError
from audit.evaluate import argmax, argmax_search, hidden_gap

ARGMAX_COLUMNS = ["token", "word", "status", "train_count"]


def exact_argmax_head(head) -> bool:
    """Whether the tiered exact test applies: a head with an output layer (``output_layer()``)
    that declares its log-P order-preserving in the logits of that layer (``order_preserving``,
    ``HeadProtocol``: the softmax family, and MoC's one softmax over W xbar + b). Declared, not
    inferred from ``from_logits``: a per-token map (a scale of its own per word) is a function
    of l alone too, yet it can make a token the argmax that W x + b never ranks first (issue 37:
    tests/evaluate/test_debate.py's affine head)."""
    return bool(getattr(head, "order_preserving", False)) and head.output_layer() is not None


def argmax_fields(head, train_ids: torch.Tensor, vocab: list[str], options: dict,
                  *, box, d_in: int | None = None) -> tuple[dict, pd.DataFrame]:
    """eval.json fields of the argmax test and the table of its unargmaxable and unresolved tokens.

    Args:
        head: the run's head (eval mode).
        train_ids: (N,) the training split's token ids: the tokens' training frequencies.
        vocab: the run's vocabulary (words of the table).
        options: ``evaluate.argmax`` (``lp_budget``, ``patience``, ``seed``, ``search_steps``,
            ``search_tokens``).
        box: the box the head's inputs live in, the body's ``output_box`` (``argmax.Box.of``: 1.0
            for the AWD-LSTM's tanh-bounded output, per-coordinate (lo, hi) for the
            Transformer's final LayerNorm); None: the body states none, and the test has no
            input set: not measured, unless the head states the box of its output layer's
            input itself (``argmax_box``, ``HeadProtocol``: MoC's tanh contexts). No default:
            the box is the body's, never assumed.
        d_in: the size of the head's input (the body's ``d_out``; default ``head.d_in``).

    Returns:
        (fields, table): fields ``ArgmaxResult.summary()`` or ``SearchResult.summary()`` plus
        ``argmax_box`` (``Box.describe``) and, for the exact heads, ``authors_box_fields``; or
        ``unargmaxable`` None with ``argmax_note``; table
        ``ARGMAX_COLUMNS``, one row per token proved unargmaxable or left unresolved, with its
        count in the training split.
    """
    name = getattr(head, "name", type(head).__name__)
    d_in = getattr(head, "d_in", None) if d_in is None else d_in
    counts = np.bincount(train_ids.cpu().numpy(), minlength=len(vocab))
    if exact_argmax_head(head):
        weight, bias = head.output_layer()
        W = weight.detach().double().cpu().numpy()
        b = None if bias is None else bias.detach().double().cpu().numpy()
        # a head whose output layer reads its own transform of h (MoC: tanh contexts) states
        # that input's box; else the layer reads h, in the body's box
        own = getattr(head, "argmax_box", None)
        layer_box = box if own is None else own
        if layer_box is not None:
            layer_box = argmax.Box.of(layer_box, W.shape[1])
            result = argmax.check(W, b, box=layer_box, seed=options["seed"], patience=options["patience"],
                                  lp_budget=options["lp_budget"])
            return ({**result.summary(), "argmax_box": layer_box.describe(), **authors_box_fields(W, b, options)},
                    _table(result.unargmaxable, result.unresolved, vocab, counts))
    elif box is not None:
        if d_in is None:
            raise AuditError(f"argmax search on head {name!r}: the size of its input is unknown (no d_in)")
        tokens = options["search_tokens"]
        found = argmax_search.search(head, box, d_in, steps=options["search_steps"],
                                     budget=None if tokens == "all" else int(tokens), seed=options["seed"])
        return ({**found.summary(), "argmax_box": argmax.Box.of(box, d_in).describe()},
                _table(np.zeros(0, dtype=np.int64), found.unresolved, vocab, counts))
    note = "not measured: the body states no box for the head's inputs (output_box None)"
    return ({"unargmaxable": None, "argmax_unresolved": None, "argmax_note": note},
            pd.DataFrame(columns=ARGMAX_COLUMNS))


def authors_box_fields(W: np.ndarray, b: np.ndarray | None, options: dict) -> dict:
    """eval.json fields of the exact test over the authors' box [-100, 100]^d (Grivas et al.
    2022; ``argmax.AUTHORS_BOX``), with the same seed, patience and LP budget as the body's box:
    ``unargmaxable_box100`` (proved), ``argmax_unresolved_box100`` (past the LP budget or stopped
    by a bound of their LP: neither argmaxable nor unargmaxable), ``argmax_lp_unresolved_box100``
    (those of them a bound stopped) and ``argmax_seconds_box100`` (CPU seconds, all tiers)."""
    result = argmax.check(W, b, box=argmax.AUTHORS_BOX, seed=options["seed"], patience=options["patience"],
                          lp_budget=options["lp_budget"])
    return {"unargmaxable_box100": int(result.unargmaxable.size),
            "argmax_unresolved_box100": int(result.unresolved.size),
            "argmax_lp_unresolved_box100": result.lp_unresolved,
            "argmax_seconds_box100": float(sum(result.seconds.values()))}


def _table(unargmaxable: np.ndarray, unresolved: np.ndarray, vocab: list[str], counts: np.ndarray) -> pd.DataFrame:
    """``ARGMAX_COLUMNS`` rows: the unargmaxable tokens, then the unresolved ones."""
    tokens = np.concatenate([unargmaxable, unresolved]).astype(np.int64)
    return pd.DataFrame({"token": tokens, "word": [vocab[t] for t in tokens],
                         "status": ["unargmaxable"] * unargmaxable.size + ["unresolved"] * unresolved.size,
                         "train_count": counts[tokens]})[ARGMAX_COLUMNS]


def hidden_gap_fields(sv: np.ndarray, plain_softmax: bool, d: int, body_rank: int | None,
                      body: str = "the body") -> dict:
    """eval.json fields of the hidden-size estimate from the double-centred log-P spectrum.

    Args:
        sv: singular values of the double-centred log-P rows, descending.
        plain_softmax: the head declares ``plain_softmax`` (``HeadProtocol``: log-P is
            log_softmax(W h + b), the built-in softmax and softmax_matched, or an outside head
            that says so); the control is keyed on this trait, never on the arm's or head's name.
        d: the output layer's width (columns of W).
        body_rank: the body's ``output_rank`` (d for the AWD-LSTM, d - 1 under the
            Transformer's final LayerNorm); None: the body states none, and no control applies.
        body: the body's name, for the note of a control that could not run.

    Returns:
        ``hidden_gap_dim``, ``hidden_gap_ratio`` (inf: the drop to unresolved values); on a
        plain softmax with a known body rank, ``hidden_gap_expected`` = min(body_rank, d) (the
        rank of its double-centred log-P), ``hidden_gap_miss`` = |dim - expected|,
        ``hidden_gap_residual`` = s_{expected+1} / s_1 and ``hidden_gap_ok``
        (``hidden_gap.control``); None on the other heads (no known rank). A plain softmax on a
        body that states no rank gets ``hidden_gap_note`` "not measured: ..." instead: the
        control a reader relies on did not run, and the warnings say so (issue 37: a GRU arm
        read 15 against d = 16 and nothing flagged it).
    """
    dim, ratio = hidden_gap.largest_gap(sv)
    out = {"hidden_gap_dim": dim, "hidden_gap_ratio": ratio, "hidden_gap_expected": None,
           "hidden_gap_miss": None, "hidden_gap_residual": None, "hidden_gap_ok": None}
    if not plain_softmax:
        return out
    if body_rank is None:
        out["hidden_gap_note"] = (f"not measured: the hidden-gap control of a softmax needs the rank of the "
                                  f"body's output, and body {body!r} states no output_rank (docs/bodies.md)")
        return out
    expected = min(int(body_rank), int(d))
    ok, residual = hidden_gap.control(sv, expected)
    out.update(hidden_gap_expected=expected, hidden_gap_miss=abs(dim - expected),
               hidden_gap_residual=residual, hidden_gap_ok=ok)
    return out
