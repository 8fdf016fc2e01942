"""The softmax head and its capacity-matched control (``softmax_matched``)."""

from __future__ import annotations

import torch.nn.functional as F

from audit.model.heads.base import Head
from audit.model.heads.traits import SoftmaxMatchedTraits, SoftmaxTraits


class Softmax(SoftmaxTraits, Head):
    """The plain softmax: log_softmax(W h + b). Log-P rank is at most d + 2."""

    def transformed_logits(self, h):
        return self.logits(h)

    def from_logits(self, logits):
        return F.log_softmax(logits, dim=-1)

    def forward(self, h):
        return self.from_logits(self.logits(h))


class SoftmaxMatched(SoftmaxMatchedTraits, Softmax):
    """A softmax whose embedding size is solved so that the model's parameter count matches
    another arm's (``options.match``); see ``audit.params.solve_matched_size``. The head itself
    is the plain softmax: only the model sizes differ."""

