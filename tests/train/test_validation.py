"""audit/train/validation.py: one validation pass's loss, input anisotropy and output spectrum (the
same numbers through the trainer's epoch log: tests/train/test_trainer.py)."""

import numpy as np
import pytest
import torch

from audit.train.validation import validation_pass


def test_anisotropy_of_parallel_and_opposite_inputs():
    # u, u, -u: pairs (+1, -1, -1) -> mean -1/3, whatever the lengths; through a stub model
    class Stub(torch.nn.Module):
        def init_hidden(self, batch):
            return None

        def forward(self, words, hidden):
            h = torch.tensor([[1.0, 2.0], [2.0, 4.0], [-3.0, -6.0]]).view(1, 3, 2)[:, : words.size(1)]
            return torch.zeros(1, words.size(1), 4).log_softmax(-1), hidden, h, h

    out = validation_pass(Stub(), torch.zeros(2, 3, dtype=torch.long), bptt=1,
                          output_weight=torch.tensor([[3.0, 0.0], [0.0, 4.0], [0.0, 0.0]]))
    assert out["input_cosine"] == pytest.approx(-1 / 3)
    assert out["output_singular_values"] == pytest.approx([4.0, 3.0])
    assert out["valid_loss"] == pytest.approx(np.log(4))
