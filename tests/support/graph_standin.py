"""A CUDA graph's semantics without a GPU, for audit.train.graphs' tests (tests/train/test_graphs.py,
tests/gpucheck/test_graphcheck.py): swapped in for ``graphs.default_backend`` on the simulated device.

A CUDA graph records kernels on addresses: a replay reads and writes the memory its capture saw,
whatever the Python tensors point to by then. So the stand-in records the captured step as a
tape of aten ops, each operand held as an alias of the storage it had at that moment, and a
replay runs the tape on those aliases; no Python of the step runs again (issue 54). A parameter
that moved after the capture (the simulated cuDNN flatten of tests/support/fake_cuda.py) is then
left behind, as on a GPU: the replay updates its old storage and the model reads the new one.
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from support.fake_cuda import FakeCuda, Simulation

# ops that launch no kernel on a GPU, so a graph has nothing of them to replay: set_ and resize_
# change a tensor's metadata (which storage, which size), a scalar read is a sync (never in a step)
METADATA = {"set_", "resize_", "_local_scalar_dense"}


def _writes(func) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


def _replayed(func) -> bool:
    """Whether a graph holds a kernel of ``func``: not a metadata op, not a pure view (a view's
    memory is its base's, which the tape already holds)."""
    name = func._schema.name.split("::")[-1]
    returns = func._schema.returns
    view = bool(returns) and all(r.alias_info is not None for r in returns) and not _writes(func)
    return name not in METADATA and not view


def _alias(value):
    """A device tensor as a new tensor on the storage, offset, sizes and strides it has now (what a
    captured kernel's pointer means); anything else as it is."""
    if not isinstance(value, FakeCuda):
        return value
    elem = value.elem
    with _disable_current_modes():
        alias = torch.empty(0, dtype=elem.dtype).set_(elem.untyped_storage(), elem.storage_offset(),
                                                      elem.size(), elem.stride())
    wrapper = FakeCuda(alias)
    if Simulation.current is not None:
        Simulation.current._track(wrapper)   # held memory, as a graph's pool holds it
    return wrapper


def _storage(tensor: FakeCuda) -> int:
    return tensor.elem.untyped_storage().data_ptr()


class _Tape(TorchDispatchMode):
    """Records each op of a capture with aliases of its operands and results; remembers the
    contents of every storage older than the capture before the capture first writes it."""

    def __init__(self):
        super().__init__()
        # (func, args, kwargs, results, grad mode), tensors as _alias made them; the grad mode
        # because a kernel may choose by it (mkldnn's LSTM keeps its workspace only with grad on)
        self.ops = []
        self.fresh = set()  # storages the capture allocated
        self.saved = {}     # storage address -> (storage, its contents before the capture)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _writes(func):
            for t in tree_flatten((args, kwargs))[0]:
                if isinstance(t, FakeCuda) and _storage(t) not in self.fresh and _storage(t) not in self.saved:
                    with _disable_current_modes():
                        self.saved[_storage(t)] = (t.elem.untyped_storage(), t.elem.untyped_storage().clone())
        out = func(*args, **kwargs)
        if _replayed(func):
            self.ops.append((func, tree_map(_alias, args), tree_map(_alias, kwargs), tree_map(_alias, out),
                             torch.is_grad_enabled()))
            fresh = [r.alias_info is None for r in func._schema.returns]
            results = out if len(fresh) > 1 else (out,)
            for is_fresh, result in zip(fresh, results):
                if is_fresh:
                    self.fresh.update(_storage(t) for t in tree_flatten(result)[0] if isinstance(t, FakeCuda))
        return out

    def undo(self) -> None:
        """Give every storage older than the capture its contents back: a capture runs nothing."""
        with _disable_current_modes():
            for storage, contents in self.saved.values():
                storage.copy_(contents)
        self.saved = {}

    def replay(self) -> None:
        """Run the recorded kernels on the recorded memory; a result the op makes anew is
        copied into the memory the capture gave it (where the later ops read it)."""
        for func, args, kwargs, recorded, grad in self.ops:
            with torch.set_grad_enabled(grad):   # no operand requires grad: no autograd graph
                out = func(*args, **kwargs)
            fresh = [r.alias_info is None for r in func._schema.returns]
            pairs = zip(fresh, recorded if len(fresh) > 1 else (recorded,), out if len(fresh) > 1 else (out,))
            for is_fresh, kept, new in pairs:
                if is_fresh:
                    for k, n in zip(tree_flatten(kept)[0], tree_flatten(new)[0]):
                        if isinstance(k, FakeCuda):
                            with _disable_current_modes():
                                k.elem.copy_(n.elem)


class ReplayStandIn:
    """A CUDA graph's semantics on the simulated device: ``capture`` records the step's aten ops
    on the memory they touched (their effects undone, the device generator rewound: a capture
    runs nothing); ``replay`` runs that tape, writing into the same output tensors each time.
    Counts what it did, and the host syncs and CPU-device ops inside the replays (``sim``)."""

    def __init__(self, sim=None):
        self.sim, self.warmups, self.captures, self.replays = sim, 0, 0, 0
        self.inside = []   # the simulation's record of each replay

    def warm_up(self, body):
        self.warmups += 1
        return body()

    def capture(self, body):
        self.captures += 1
        sim = Simulation.current
        rng = sim.generator.get_state()
        tape = _Tape()
        with tape:
            outputs = body()
        tape.undo()
        sim.generator.set_state(rng)   # a capture draws nothing; each replay draws its step's masks
        return {"tape": tape, "outputs": outputs}

    def replay(self, captured):
        self.replays += 1
        if self.sim is not None:
            self.sim.take()
        captured["tape"].replay()
        if self.sim is not None:
            self.inside.append(self.sim.take())
        return captured["outputs"]
