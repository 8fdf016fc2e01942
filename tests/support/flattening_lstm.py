"""The AWD-LSTM layer's forward as it was before issue 54, for tests that need today's path beside
the new one: the dropped ``weight_hh`` went in through ``torch.func.functional_call``, so
``nn.LSTM.forward`` saw a swapped weight and re-flattened (on a GPU, and on the simulated device
of tests/support/fake_cuda.py, moving every parameter of the layer to new storage), and
evaluation called the module itself. ``install(monkeypatch)`` puts it back in place."""

from __future__ import annotations

from torch.func import functional_call

from audit.model.bodies.awd_lstm import WeightDropLSTM


def functional_call_forward(self, x, hidden):
    """WeightDropLSTM.forward before issue 54 (audit/model/bodies/awd_lstm.py at 19f3457)."""
    if not (self.training and self.wdrop > 0):
        return self.lstm(x, hidden)
    params = dict(self.lstm.named_parameters())
    params["weight_hh_l0"] = self.drop_hh(params["weight_hh_l0"])
    return functional_call(self.lstm, params, (x, hidden))


def install(monkeypatch) -> None:
    """Train and evaluate through the pre-issue-54 forward for the rest of the test."""
    monkeypatch.setattr(WeightDropLSTM, "forward", functional_call_forward)
