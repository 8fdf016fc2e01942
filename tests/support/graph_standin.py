"""A CUDA graph's semantics without a GPU, for audit.train.graphs' tests (tests/train/test_graphs.py,
tests/gpucheck/test_graphcheck.py): swapped in for ``graphs.default_backend`` on the simulated device."""

from __future__ import annotations

import torch

from audit.train import graphs


class ReplayStandIn:
    """A CUDA graph's semantics on any device: ``capture`` records the step and runs nothing;
    ``replay`` runs it on the static buffers and writes the results into the output tensors of
    the first replay, in place, as a graph overwrites its outputs. Counts what it did, and the
    host syncs and CPU-device ops inside the recorded steps (``sim``: the simulation)."""

    def __init__(self, sim=None):
        self.sim, self.warmups, self.captures, self.replays = sim, 0, 0, 0
        self.inside = []   # the simulation's record of each replay

    def warm_up(self, body):
        self.warmups += 1
        return body()

    def capture(self, body):
        self.captures += 1
        return {"body": body, "outputs": None}

    def replay(self, captured):
        self.replays += 1
        if self.sim is not None:
            self.sim.take()
        out = captured["body"]()
        if self.sim is not None:
            self.inside.append(self.sim.take())
        if captured["outputs"] is None:
            captured["outputs"] = out
        else:
            with torch.no_grad():
                for kept, new in zip(graphs._leaves(captured["outputs"]), graphs._leaves(out)):
                    kept.copy_(new)
        return captured["outputs"]
