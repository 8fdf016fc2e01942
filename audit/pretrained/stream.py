"""The evaluation text tokenised by a checkpoint's own tokenizer, and streamed through it.

Each non-empty line of the text (``audit.data.text.lines``: strict UTF-8, gzip by name) is one
sentence, tokenised as ``line.strip() + "\\n"``, as raw text reads; the sentences are joined,
after the tokenizer's beginning-of-text token when it has one (Pythia's ``<|endoftext|>``, id 0),
so every text token is predicted. Why per line: the multi-bootstrap resamples test sentences
(``audit.stats.multiboot``), so every predicted position must know its sentence.

Perplexity is computed over sliding windows (``window`` tokens a pass, ``stride`` new tokens
scored a window after the first; the first window scores its window - 1 predictions): every
position from 1 to N - 1 is scored exactly once, with at least ``window - stride`` tokens of
context once past the first window (``stride`` < ``window``: a window's first scored position is
predicted from the token before it, inside the window). eval.json states both. Bounded: ceil((N - window) / stride)
+ 1 windows, each one forward pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from audit.data.text import lines
from audit.errors import AuditError


@dataclass(frozen=True)
class Text:
    """Token ids (N,) int64, the sentence of each predicted position 1..N-1 (N - 1,) and the
    predicted tokens per sentence (S,)."""

    ids: torch.Tensor
    sentence_of: torch.Tensor
    sentence_tokens: np.ndarray


def read_lines(path: str, max_lines: int | None) -> list[str]:
    """The text's non-empty lines, stripped; the first ``max_lines`` of them when set."""
    out = []
    for _, line in lines(path):
        if line.strip():
            out.append(line.strip())
            if max_lines is not None and len(out) >= max_lines:
                break
    if not out:
        raise AuditError(f"{path}: no text to evaluate on (every line is blank)")
    return out


def tokenise(tokenizer, sentences: list[str]) -> Text:
    """``Text`` of ``sentences`` under ``tokenizer`` (module docstring)."""
    encoded = tokenizer([s + "\n" for s in sentences], add_special_tokens=False)["input_ids"]
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    ids = ([start] if start is not None else []) + [t for piece in encoded for t in piece]
    owner = ([0] if start is not None else []) + [i for i, piece in enumerate(encoded) for _ in piece]
    if len(ids) < 2:
        raise AuditError("pretrained: the text gives fewer than two tokens")
    sentence_of = torch.tensor(owner[1:], dtype=torch.int64)
    tokens = np.bincount(sentence_of.numpy(), minlength=len(sentences)).astype(np.int64)
    return Text(torch.tensor(ids, dtype=torch.int64), sentence_of, tokens)


def windows(n: int, window: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, end, first scored position) of every window over n tokens: positions
    first..end-1 are predicted from ids[begin:end], each position once (module docstring)."""
    spans, begin, scored = [], 0, 1
    while scored < n:
        end = min(begin + window, n)
        spans.append((begin, end, scored))
        scored = end
        begin += stride
    return spans


@torch.no_grad()
def stream(model, text: Text, window: int, stride: int, limit: int | None, totals: dict | None = None,
           observers: tuple = (), progress=None) -> Iterator[torch.Tensor]:
    """Yield float32 log-P row blocks of the first ``limit`` predicted positions (all if None).

    With ``totals`` (keys ``nll`` float, ``tokens`` int, ``sentence_nll`` (S,) float64) the
    pass runs over every window and sums the NLL into it; without, it stops once ``limit`` rows
    are out. ``observers`` are ``(collector, kind)`` pairs fed every scored block in order, kind
    ``"log_p"`` the log-probabilities, ``"h"`` the output layer's input (``audit.evaluate.run``'s
    stream_rows contract). ``progress(done, total)`` is called after each window.
    """
    device = next(model.parameters()).device
    layer = model.get_output_embeddings()
    spans = windows(text.ids.numel(), window, stride)
    emitted = 0
    for k, (begin, end, first) in enumerate(spans):
        if totals is None and limit is not None and emitted >= limit:
            return
        chunk = text.ids[begin:end].to(device)[None]
        h = model.base_model(input_ids=chunk).last_hidden_state[0, first - begin - 1:end - begin - 1]
        log_p = torch.log_softmax(layer(h).float(), dim=-1)
        for collector, kind in observers:
            collector.add(log_p if kind == "log_p" else h)
        if totals is not None:
            targets = text.ids[first:end].to(device)
            nll = -log_p.gather(1, targets[:, None])[:, 0].double()
            totals["nll"] = totals["nll"] + nll.sum()
            totals["tokens"] += targets.numel()
            totals["sentence_nll"].index_add_(0, text.sentence_of[first - 1:end - 1].to(device), nll)
        take = log_p.shape[0] if limit is None else max(0, min(log_p.shape[0], limit - emitted))
        if progress is not None:
            progress(k + 1, len(spans))
        if take:
            emitted += take
            yield log_p[:take]


class Anisotropy:
    """Streaming observer (kind ``"h"``): the mean cosine similarity of the output layer's inputs
    over all pairs i != j of the first ``limit`` positions (Godey et al. 2024's anisotropy of the
    last layer), from the sum of unit vectors: (||sum u_i||^2 - n) / (n (n - 1))."""

    def __init__(self, limit: int):
        self.limit, self.seen, self.total = limit, 0, None

    def add(self, h: torch.Tensor) -> None:
        take = max(0, min(h.shape[0], self.limit - self.seen))
        if take:
            unit = torch.nn.functional.normalize(h[:take].double(), dim=-1).sum(0)
            self.total = unit if self.total is None else self.total + unit
            self.seen += take

    def value(self) -> float:
        n = self.seen
        if n < 2:
            raise AuditError("anisotropy: fewer than two positions were streamed")
        return float(((self.total * self.total).sum().item() - n) / (n * (n - 1)))
