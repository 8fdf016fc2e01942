"""The measurements of the debate since 2021 for one evaluated run (issue 24; README "Runs table").

``audit.evaluate.run`` calls these on the loaded model; each returns eval.json fields, with
``None`` and a ``*_note`` saying why where a head has no such measurement (never a made-up
number):

- ``argmax_fields``: unargmaxable tokens (``audit.evaluate.argmax``) of every head whose log-P is
  a softmax of ``W x + b`` after an increasing element-wise map (softmax, the capacity-matched
  softmax, sigsoftmax, GSS, PLIF and its frozen control: ``from_logits`` is not None), with x the
  last LSTM layer's output in [-1, 1]^d; and of MoC, whose one softmax reads W xbar + b with
  xbar a convex combination of tanh contexts, in the same box (the body's ``output_box``; a
  body without one, the Transformer, is not measured). MoS, its uniform-gate ablation and
  Mixtape have no exact test: not measured.
- ``hidden_gap_fields``: the hidden size read from the double-centred log-P spectrum
  (``audit.evaluate.hidden_gap``), with its positive control on the softmax heads (d_hat == d).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from audit.evaluate import argmax, hidden_gap

ARGMAX_COLUMNS = ["token", "word", "status", "train_count"]
# heads whose double-centred log-P has rank exactly d (the positive control of hidden_gap_ok)
SOFTMAX_HEADS = ("softmax", "softmax_matched")


def exact_argmax_head(head) -> bool:
    """Whether the tiered exact test applies: a head with an output layer (``output_layer()``)
    whose log-P is a softmax of W x + b after an increasing map (``from_logits``), or MoC's one
    softmax over W xbar + b (``transformed_logits`` of a head with ``contexts``)."""
    layer = head.output_layer()
    if layer is None:
        return False
    w = layer[0]
    if head.from_logits(torch.zeros(1, w.shape[0], dtype=w.dtype, device=w.device)) is not None:
        return True
    return hasattr(head, "contexts") and \
        head.transformed_logits(torch.zeros(1, head.d_in, dtype=w.dtype, device=w.device)) is not None


def argmax_fields(head, train_ids: torch.Tensor, vocab: list[str], options: dict,
                  box: float | None = argmax.BOX_BY_BODY["awd_lstm"]) -> tuple[dict, pd.DataFrame]:
    """eval.json fields of the argmax test and the table of its unargmaxable and unresolved tokens.

    Args:
        head: the run's head (eval mode).
        train_ids: (N,) the training split's token ids: the tokens' training frequencies.
        vocab: the run's vocabulary (words of the table).
        options: ``evaluate.argmax`` (``lp_budget``, ``patience``, ``seed``).
        box: half-width of the box the head's inputs live in (the body's ``output_box``: 1.0
            for the AWD-LSTM's tanh-bounded output); None: the body states none (the
            Transformer's final LayerNorm), and the test has no input set: not measured.

    Returns:
        (fields, table): fields ``ArgmaxResult.summary()`` plus ``argmax_box``, or ``unargmaxable``
        None with ``argmax_note``; table ``ARGMAX_COLUMNS``, one row per token proved
        unargmaxable or left unresolved, with its count in the training split.
    """
    note = None
    if box is None:
        note = "not measured: the body states no box for the head's inputs (output_box None)"
    elif not exact_argmax_head(head):
        note = (f"not measured: {getattr(head, 'name', type(head).__name__)} is a mixture of softmaxes or gives no softmax of one output "
                "layer (output_layer() and from_logits()), which has no exact test (a witness search would give only a lower bound on the argmaxable tokens)")
    if note is not None:
        return ({"unargmaxable": None, "argmax_unresolved": None, "argmax_note": note},
                pd.DataFrame(columns=ARGMAX_COLUMNS))
    weight, bias = head.output_layer()
    W = weight.detach().double().cpu().numpy()
    b = None if bias is None else bias.detach().double().cpu().numpy()
    result = argmax.check(W, b, box=box, seed=options["seed"], patience=options["patience"],
                          lp_budget=options["lp_budget"])
    counts = np.bincount(train_ids.cpu().numpy(), minlength=len(vocab))
    tokens = np.concatenate([result.unargmaxable, result.unresolved]).astype(np.int64)
    table = pd.DataFrame({"token": tokens, "word": [vocab[t] for t in tokens],
                          "status": ["unargmaxable"] * result.unargmaxable.size + ["unresolved"] * result.unresolved.size,
                          "train_count": counts[tokens]})
    return {**result.summary(), "argmax_box": box}, table[ARGMAX_COLUMNS]


def hidden_gap_fields(sv: np.ndarray, head_name: str, d: int, control: bool = True) -> dict:
    """eval.json fields of the hidden-size estimate from the double-centred log-P spectrum.

    Args:
        sv: singular values of the double-centred log-P rows, descending.
        head_name: the run's head type (``settings["head"]``).
        d: the output embedding size (columns of W).
        control: whether d_hat == d is expected of a softmax head on this body (the AWD-LSTM's
            outputs span d dimensions; a Transformer's final LayerNorm removes one, so its
            softmax reads d - 1 here and the control does not apply).

    Returns:
        ``hidden_gap_dim``, ``hidden_gap_ratio`` (inf: the drop to unresolved values) and
        ``hidden_gap_ok``: d_hat == d on the softmax heads, None on the others (no known rank).
    """
    dim, ratio = hidden_gap.largest_gap(sv)
    return {"hidden_gap_dim": dim, "hidden_gap_ratio": ratio,
            "hidden_gap_ok": (dim == d) if control and head_name in SOFTMAX_HEADS else None}
