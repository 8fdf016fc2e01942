"""The training step of one run replayed as CUDA graphs: ``train.cuda_graphs: true`` (issue 47).

Why: a paper-size softmax run is latency-bound on an H100/H200, not compute-bound (about 100
aten ops a step, each a kernel launch the host must issue; fp32, TF32 and bf16 steps took 18.6,
17.1 and 18.1 ms on an H200: docs/gpus.md). A CUDA graph issues the whole step - forward, AR/TAR
penalties, backward, gradient clipping and the SGD update - as one launch.

How: the AWD-LSTM draws a BPTT length per step and a graph has static shapes, so there is one
graph per length, all in one memory pool (``torch.cuda.graph(pool=...)``: graphs replayed one
after another can share their temporaries). Before a replay the step's ids, targets and carried
hidden state are copied into static buffers; after it the losses and the new hidden state are
read from the graph's own output tensors, which stay referenced so no later capture reuses
their memory. A length's first ``WARMUP`` steps run eagerly on a side stream (cuDNN and cuBLAS
choose kernels and workspaces; PyTorch's documented order), then it is captured and replayed.
Every step runs once: a warm-up step is a real step, a capture executes nothing.

Why the numbers stay those of the eager step: the graph records the eager step's own code
(``Trainer.step_body``). SGD's learning rate ``base * L / bptt`` is fixed for a length, so it is
a constant of that length's graph. Dropout masks come from the device's default generator, which
a captured graph advances by the same offsets at each replay as the eager ops would. What stays
outside the graph: the loss sum and the divergence check (they read the graph's outputs), and
the ASGD average (its weight 1 / (n + 1) changes every step). Equality with the eager path is
tested on the CPU with a stand-in that replays the recorded ops (tests/train/test_graphs.py) and
measured on a GPU by gpu-check's correctness step (50 steps at h = 32, fp32 tolerance; and at
paper size across a validation pass and the switch to averaging).

Why no captured tensor may move (issue 54): a graph keeps the addresses it captured, and a
replay reads and writes that memory whatever the Python tensors point to by then. Through
``nn.LSTM.forward`` with a swapped weight, cuDNN's flatten moved the LSTM's parameters to new
storage at every step (torch/nn/modules/rnn.py): a replay then updated memory the model no
longer read. The AWD-LSTM now calls the functional LSTM op (audit/model/bodies/awd_lstm.py), and
``GraphedSteps`` records the address (``data_ptr``) of every watched tensor (the parameters,
the optimiser's state, the static buffers) before a capture, and checks them after it and before
every replay: a moved one stops the run with one line, never a silently stale weight. Tested on
the simulated device, whose flatten moves storage as cuDNN does and whose graph stand-in replays
the recorded ops on the recorded memory (tests/support/graph_standin.py).

Limits, refused by ``check``: SGD only (AdamW's learning rate changes every step); a CUDA device.
"""

from __future__ import annotations

from typing import Callable

import torch

from audit.config.training import TrainSettings
from audit.errors import AuditError

WARMUP = 1  # eager steps of a length before its capture (cuDNN's and cuBLAS's first calls)


def check(train: TrainSettings, device: torch.device) -> None:
    """Refuse a run that asks for graphs where they cannot hold its numbers (one line, the key)."""
    if not train.cuda_graphs:
        return
    if device.type != "cuda":
        raise AuditError(f"train.cuda_graphs: CUDA graphs need a CUDA device; this run is on {device.type}")
    refusal = train.graphs_refusal()
    if refusal is not None:
        raise AuditError(f"train.cuda_graphs: {refusal}")


def _leaves(tree) -> list[torch.Tensor]:
    """The tensors of a hidden state (a tensor, or lists and tuples of them; None: none)."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, (list, tuple)):
        return [leaf for item in tree for leaf in _leaves(item)]
    return []


def _rebuild(tree, leaves):
    """``tree``'s structure with its tensors taken in order from the iterator ``leaves``."""
    if isinstance(tree, torch.Tensor):
        return next(leaves)
    if isinstance(tree, (list, tuple)):
        return type(tree)(_rebuild(item, leaves) for item in tree)
    return tree


class CudaGraphs:
    """The real backend: ``torch.cuda.CUDAGraph``s in one shared pool."""

    def __init__(self):
        self.pool = torch.cuda.graph_pool_handle()
        self.side = torch.cuda.Stream()

    def warm_up(self, body: Callable[[], tuple]) -> tuple:
        """Run ``body`` eagerly on a side stream (PyTorch's order before a capture). Each stream
        waits for the other's queued work, so a tensor the side stream allocated and the main
        stream reads is never reused by the side stream before that read."""
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            out = body()
        torch.cuda.current_stream().wait_stream(self.side)
        return out

    def capture(self, body: Callable[[], tuple]):
        """Record ``body`` (nothing runs): (graph, its output tensors)."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            outputs = body()
        return graph, outputs

    def replay(self, captured) -> tuple:
        """Run a captured step: its output tensors, overwritten in place."""
        graph, outputs = captured
        graph.replay()
        return outputs


def default_backend():
    """The backend a run gets: real CUDA graphs (tests substitute a stand-in on the simulated device)."""
    return CudaGraphs()


class GraphedSteps:
    """One run's training steps, each length's replayed from its graph after ``WARMUP`` eager ones.

    ``body(words, targets, hidden) -> (raw_loss, loss, new_hidden)`` is the whole step (the
    optimiser's update included); ``set_lr(length)`` sets the optimiser's learning rate for a
    step of that length (before a warm-up step and before a capture: the graph keeps it).
    ``words`` and ``targets`` are (L, B) slices of the batchified split; ``hidden`` is the
    carried state, whose structure and shapes stay fixed over a run. ``watched()`` names the
    tensors a step reads or writes that outlive it (parameters, optimiser state): none of them,
    nor a static buffer, may move while a graph holds its address (``check_addresses``).
    """

    def __init__(self, body: Callable, set_lr: Callable[[int], None], max_len: int, batch_size: int,
                 device: torch.device, backend=None, watched: Callable[[], dict] = dict):
        self.body, self.set_lr, self.watched = body, set_lr, watched
        self.backend = backend if backend is not None else default_backend()
        self.words = torch.zeros(max_len, batch_size, dtype=torch.long, device=device)
        self.targets = torch.zeros(max_len, batch_size, dtype=torch.long, device=device)
        self.hidden = None      # static copy of the carried hidden state (made at the first step)
        self.seen: dict[int, int] = {}
        self.graphs: dict[int, object] = {}  # length -> the backend's captured step
        self.addresses: dict[int, dict[str, int]] = {}  # length -> data_ptr of each watched tensor at capture
        self.replays = 0

    def _addresses(self) -> dict[str, int]:
        """The address of every tensor a graph keeps: the watched ones, the static buffers."""
        named = {**self.watched(), "static words": self.words, "static targets": self.targets,
                 **{f"static hidden state [{i}]": t for i, t in enumerate(_leaves(self.hidden))}}
        return {name: t.data_ptr() for name, t in named.items()}

    def check_addresses(self, n: int, when: str) -> None:
        """Stop (one line) if a tensor the graph of length ``n`` captured has moved since: its
        replays would read and update memory the model no longer uses."""
        captured, now = self.addresses[n], self._addresses()
        for name, address in captured.items():
            if now.get(name) != address:
                moved = f"{now[name]:#x}" if name in now else "gone"
                raise AuditError(f"train.cuda_graphs: {name} moved {when} the graph of BPTT length {n} was "
                                 f"captured (address {address:#x} -> {moved}); a replay would update memory "
                                 f"the model no longer reads")

    def _bind(self, words, targets, hidden):
        """Copy a step's inputs into the static buffers; the (L, B) views a graph reads."""
        n = words.size(0)
        if n > self.words.size(0):
            raise AuditError(f"train: a step of {n} rows exceeds the graphs' longest, {self.words.size(0)} "
                             f"(bptt + max_seq_len_delta)")
        if self.hidden is None:
            self.hidden = _rebuild(hidden, iter([t.detach().clone() for t in _leaves(hidden)]))
        else:
            for static, now in zip(_leaves(self.hidden), _leaves(hidden)):
                static.copy_(now)
        self.words[:n].copy_(words)
        self.targets[:n].copy_(targets)
        return self.words[:n], self.targets[:n]

    def step(self, words: torch.Tensor, targets: torch.Tensor, hidden) -> tuple:
        """One training step of ``words`` (L, B): (raw_loss, loss, new_hidden), as ``body`` gives."""
        n = words.size(0)
        count = self.seen.get(n, 0)
        self.seen[n] = count + 1
        self.set_lr(n)
        if count < WARMUP:  # an eager step; the inputs as they are
            return self.backend.warm_up(lambda: self.body(words, targets, hidden))
        static_words, static_targets = self._bind(words, targets, hidden)
        if n not in self.graphs:
            self.addresses[n] = self._addresses()
            self.graphs[n] = self.backend.capture(lambda: self.body(static_words, static_targets, self.hidden))
            self.check_addresses(n, "while")
        self.check_addresses(n, "since")
        self.replays += 1
        return self.backend.replay(self.graphs[n])
