"""A simulated CUDA device: CPU tensors that say ``cuda:0`` to Python, and a record of what a GPU would pay.

No GPU is available to this project's development machines or CI, yet the first GPU to run the
code is a user's, on thousands of GPU-hours. This module proves the CUDA path as far as a CPU can:

- ``FakeCuda`` is a tensor subclass that wraps a real CPU tensor (``elem``). Python sees
  ``device == cuda:0`` and ``is_cuda``; C++ and the autograd engine see a CPU tensor (a wrapper
  that claimed CUDA to C++ would crash on a CPU-only build). Every number is computed on the CPU,
  so every number is real.
- ``Simulation`` (a ``TorchDispatchMode``) sees every aten op. It unwraps the operands, runs the op
  on the CPU, and wraps the results when an operand was on the device or the op was asked for
  ``device="cuda"``. It records:

  * ``mixed``: ops that mix device tensors with non-scalar CPU tensors (an error on a real GPU);
  * ``cpu_generator``: random ops on the device given a CPU generator;
  * ``syncs``: every host synchronisation: ``item``/``bool``/``int``/``float`` (one
    ``_local_scalar_dense``), device-to-host copies, blocking host-to-device copies, ops whose
    output size depends on the data (bincount, nonzero, boolean indexing, ...), linalg ops that
    check their info on the host, and ``torch.cuda.synchronize``;
  * ``ops``: the number of aten ops, a proxy for kernel launches on a real GPU;
  * ``live``/``peak``: live bytes held by device tensors (freed when their wrapper dies), the
    peak since ``reset_peak``.

  Random ops on the device draw from the simulation's own generator (the CUDA default generator
  of a real GPU, separate from the CPU's), which ``torch.cuda.get_rng_state`` and friends expose.
- ``simulated_cuda()`` patches ``torch.cuda`` so that one device is available, makes
  ``torch.load(map_location="cuda")`` give CPU tensors (``load_state_dict`` then copies them onto
  the device, as on a GPU), lets the optimisers take their multi-tensor (foreach) path as on a
  GPU, and can raise ``torch.cuda.OutOfMemoryError`` when the device's live bytes pass a limit.

- ``flatten_parameters``: an LSTM on the simulated device packs its weights as cuDNN's
  ``torch._cudnn_rnn_flatten_weight`` does on a GPU (issue 54): one new flat buffer, every weight
  copied into it and moved onto its slot, so each weight's storage (``data_ptr``) changes. Torch
  calls it from ``LSTM.forward`` whenever a weight tensor was swapped since the last call
  (``functional_call``), at ``Module.to`` and when a module is copied; off CUDA torch's own
  returns at once, which is why a proof that parameters never move needs this one.

What it cannot show: kernel times, cuDNN's choices, TF32 or atomics' rounding, real memory
fragmentation; those stay on docs/gpus.md's "Still owed" list.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
import warnings
import weakref
from collections import Counter
from dataclasses import dataclass, field
from unittest import mock

import torch
import torch.optim.optimizer as _optimizer
import torch.utils._foreach_utils as _foreach_utils
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
CUDA0 = torch.device("cuda", 0)

# ops whose output size depends on the data: the host must read a count back (a sync on a GPU)
DATA_DEPENDENT = {"bincount", "nonzero", "nonzero_static", "_unique", "_unique2", "unique_dim",
                  "unique_consecutive", "unique_dim_consecutive", "masked_select", "histc"}
# linalg ops that read their error code (info) back to raise on a singular/failed input
HOST_CHECKED = {"_linalg_check_errors", "linalg_cholesky_ex", "linalg_inv_ex", "linalg_solve_ex",
                "_linalg_eigh", "_linalg_svd", "linalg_lu_factor_ex", "linalg_ldl_factor_ex"}
# ops that only read metadata or make views: no kernel on a GPU
NO_KERNEL = {"detach", "view", "_unsafe_view", "alias", "t", "transpose", "permute", "expand",
             "slice", "select", "unsqueeze", "squeeze", "as_strided", "split", "split_with_sizes",
             "unbind", "view_as_real", "view_as_complex", "_reshape_alias", "sym_size", "sym_stride",
             "sym_numel", "sym_storage_offset", "is_same_size", "lift_fresh", "unfold", "diagonal"}


class FakeCuda(torch.Tensor):
    """A CPU tensor (``elem``) that reports ``cuda:0`` to Python."""

    elem: torch.Tensor
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, elem: torch.Tensor, requires_grad: bool = False):
        r = torch.Tensor._make_wrapper_subclass(
            cls, elem.size(), strides=elem.stride(), storage_offset=elem.storage_offset(),
            dtype=elem.dtype, layout=elem.layout, device=elem.device, requires_grad=requires_grad)
        r.elem = elem
        return r

    @property
    def device(self):
        return CUDA0

    @property
    def is_cuda(self):
        return True

    @property
    def is_cpu(self):
        return False

    def get_device(self):
        return 0

    def data_ptr(self):
        # the address a GPU kernel (and a CUDA graph) would use: the wrapped storage's; it changes
        # when the simulated cuDNN flatten moves the tensor (``flatten_parameters`` below)
        return self.elem.data_ptr()

    def __repr__(self):
        return f"FakeCuda({self.elem!r}, device='cuda:0')"

    # Python-level copies to the host (C++ would see a CPU tensor already and return it as is)
    def cpu(self, memory_format=torch.preserve_format):
        return _to_host(self, None, memory_format)

    def to(self, *args, **kwargs):
        device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
        if device is not None and device.type == "cpu":
            return _to_host(self, dtype, memory_format or torch.preserve_format)
        if dtype is None or dtype == self.dtype:
            return self
        return super().to(dtype=dtype, non_blocking=non_blocking)

    def cuda(self, *args, **kwargs):
        return self

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        # host data copied to the device, as on a GPU (C++ would make a CPU tensor here)
        host = torch.tensor(data, dtype=dtype or self.dtype, requires_grad=False)
        if device is not None and torch.device(device).type == "cpu":
            return host.requires_grad_(requires_grad)
        return aten._to_copy(host, device=CUDA0).requires_grad_(requires_grad)

    def numpy(self, *args, **kwargs):
        return _to_host(self, None, torch.preserve_format).numpy(*args, **kwargs)

    def tolist(self):
        return _to_host(self, None, torch.preserve_format).tolist()

    def __reduce_ex__(self, protocol):
        # torch.save writes a CUDA tensor's storage through the host: so do we (plain CPU data)
        return _to_host(self, None, torch.preserve_format).__reduce_ex__(protocol)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            out = FakeCuda(self.elem.clone(), requires_grad=self.requires_grad)
        if getattr(self, "_is_param", False):  # a Parameter stays one (nn.Parameter's own mark)
            out._is_param = True
        memo[id(self)] = out
        return out

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError(f"a simulated CUDA tensor reached {func} outside the simulation")


def _to_host(tensor: FakeCuda, dtype, memory_format) -> torch.Tensor:
    """A device-to-host copy: a plain CPU tensor, recorded as a sync."""
    sim = Simulation.current
    if sim is not None:
        sim.sync("device-to-host copy", tensor.elem.numel() * tensor.elem.element_size())
    with torch.no_grad():
        out = tensor.elem.clone(memory_format=memory_format)
    return out if dtype is None else out.to(dtype)


@dataclass
class Record:
    ops: int = 0                                   # aten ops (kernel-launching ones)
    syncs: Counter = field(default_factory=Counter)   # reason -> count
    mixed: list = field(default_factory=list)      # op names that mixed devices
    cpu_generator: list = field(default_factory=list)
    where: list = field(default_factory=list)      # (reason, short stack) of each sync, when traced

    @property
    def n_syncs(self) -> int:
        return sum(self.syncs.values())


class Simulation(TorchDispatchMode):
    """The dispatch mode behind ``simulated_cuda``; see the module docstring."""

    current: "Simulation | None" = None

    def __init__(self, memory_limit: int | None = None, trace: bool = False):
        super().__init__()
        self.record = Record()
        self.generator = torch.Generator().manual_seed(0)  # the device's default generator
        self.memory_limit = memory_limit
        self.trace = trace
        self.live = 0
        self.peak = 0
        self.sync_debug_mode = 0              # torch.cuda.set_sync_debug_mode (0 off, 1 warn, 2 error)
        self.streams: list = []               # torch.cuda.Stream objects made (the stand-in _Stream)
        self._sizes: dict[int, int] = {}   # storage address -> bytes, for the live count
        self._users: dict[int, int] = {}   # storage address -> wrappers holding it

    # ----- what is recorded ------------------------------------------------------------------
    def take(self) -> Record:
        """The record since the last take, and a fresh one."""
        record, self.record = self.record, Record()
        return record

    def sync(self, reason: str, nbytes: int = 0) -> None:
        self.record.syncs[reason] += 1
        if self.sync_debug_mode == 1:  # torch.cuda.set_sync_debug_mode("warn"): CUDA's own warning text
            warnings.warn(f"called a synchronizing CUDA operation ({reason}, simulated)", UserWarning, stacklevel=2)
        elif self.sync_debug_mode == 2:
            raise RuntimeError(f"called a synchronizing CUDA operation ({reason}, simulated)")
        if self.trace:
            stack = [f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno} {f.name}" for f in traceback.extract_stack()[-12:-2]
                     if "fake_cuda" not in f.filename and "torch/" not in f.filename]
            self.record.where.append((reason, stack[-3:]))

    def reset_peak(self) -> None:
        self.peak = self.live

    # ----- memory: bytes of distinct storages held by device tensors --------------------------
    def _track(self, wrapper: FakeCuda) -> None:
        """Count the storage once while any wrapped tensor (the tensor or a view) holds it."""
        storage = wrapper.elem.untyped_storage()
        key = storage.data_ptr()
        if key == 0:
            return
        users = self._users.get(key, 0)
        if users == 0:
            nbytes = storage.nbytes()
            if self.memory_limit is not None and self.live + nbytes > self.memory_limit:
                raise torch.cuda.OutOfMemoryError(
                    f"CUDA out of memory (simulated). Tried to allocate {nbytes} bytes with {self.live} "
                    f"of {self.memory_limit} bytes in use")
            self._sizes[key] = nbytes
            self.live += nbytes
            self.peak = max(self.peak, self.live)
        self._users[key] = users + 1
        weakref.finalize(wrapper.elem, self._release, key)  # not the wrapper: swap_tensors refuses weakrefs

    def _release(self, key) -> None:
        self._users[key] -= 1
        if self._users[key] == 0:
            del self._users[key]
            self.live -= self._sizes.pop(key)

    # ----- the dispatch ----------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name.split("::")[-1]
        flat, _ = tree_flatten((args, kwargs))
        on_device = [a for a in flat if isinstance(a, FakeCuda)]
        # torch.func (vmap, jacrev) wraps tensors in its own wrappers: their device is not known here
        host = [a for a in flat if isinstance(a, torch.Tensor) and not isinstance(a, FakeCuda)
                and not torch._C._functorch.is_functorch_wrapped_tensor(a)]
        device_kw = kwargs.get("device")
        to_cuda = device_kw is not None and torch.device(device_kw).type == "cuda"
        to_cpu = device_kw is not None and torch.device(device_kw).type == "cpu"
        if name not in NO_KERNEL:
            self.record.ops += 1

        if name == "_local_scalar_dense" and on_device:
            self.sync("item/bool/int/float")
        elif name == "_to_copy" and on_device and to_cpu:
            self.sync("device-to-host copy")
        elif name == "_to_copy" and host and to_cuda:
            if not kwargs.get("non_blocking", False):
                self.sync("blocking host-to-device copy")
        elif name == "copy_" and len(args) >= 2:
            dst, src = args[0], args[1]
            non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
            if isinstance(dst, FakeCuda) and not isinstance(src, FakeCuda) and src.dim() > 0 and not non_blocking:
                self.sync("blocking host-to-device copy")
            elif not isinstance(dst, FakeCuda) and isinstance(src, FakeCuda):
                self.sync("device-to-host copy")
        elif on_device and any(t.dim() > 0 for t in host):
            self.record.mixed.append(name)
        if on_device or to_cuda:
            if name in DATA_DEPENDENT or (name == "index" and any(
                    isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in flat[1:])):
                self.sync(f"data-dependent size ({name})")
            elif name in HOST_CHECKED:
                self.sync(f"host-checked linalg ({name})")
            elif name in ("equal", "is_nonzero"):
                self.sync(f"host read ({name})")

        def unwrap(a):
            if isinstance(a, FakeCuda):
                return a.elem
            if isinstance(a, torch.device) and a.type == "cuda":
                return torch.device("cpu")
            return a

        uargs, ukwargs = tree_map(unwrap, args), tree_map(unwrap, kwargs)
        if "device" in ukwargs and ukwargs["device"] is not None and torch.device(ukwargs["device"]).type == "cuda":
            ukwargs["device"] = torch.device("cpu")
        random = torch.Tag.nondeterministic_seeded in func.tags and (on_device or to_cuda)
        if random:
            generator = kwargs.get("generator")
            if generator is not None:
                self.record.cpu_generator.append(name)
                out = func(*uargs, **ukwargs)
            else:  # the device's own stream, as CUDA's default generator
                saved = torch.default_generator.get_state()
                torch.default_generator.set_state(self.generator.get_state())
                try:
                    out = func(*uargs, **ukwargs)
                finally:
                    self.generator.set_state(torch.default_generator.get_state())
                    torch.default_generator.set_state(saved)
        else:
            out = func(*uargs, **ukwargs)
        if not (on_device or to_cuda) or (name == "_to_copy" and to_cpu):
            return out
        owners = {id(a.elem): a for a in on_device}

        def wrap(o):
            if not isinstance(o, torch.Tensor) or isinstance(o, FakeCuda):
                return o
            if id(o) in owners:   # in place or out=: the operand itself
                return owners[id(o)]
            w = FakeCuda(o)
            self._track(w)
            return w

        return tree_map(wrap, out)


def flatten_parameters(module: torch.nn.RNNBase) -> None:
    """``RNNBase.flatten_parameters`` on the simulated device: what cuDNN does on a GPU.

    The same short-circuits as torch's (torch/nn/modules/rnn.py: every flat weight a tensor of
    one dtype on the device, no two sharing an address; cuDNN's acceptance is taken as given),
    then what ``_cudnn_rnn_flatten_weight`` does: a new buffer of all the weights' elements, each
    weight copied into its slot and moved there (its storage and ``data_ptr`` change; a tensor
    made from the old storage before, e.g. ``.data``, keeps the old). Flattening weights that
    already lie in one buffer packs them anew, as cuDNN does.
    """
    weights = module._flat_weights
    if len(weights) != len(module._flat_weights_names) or not all(isinstance(w, FakeCuda) for w in weights):
        return
    if len({w.dtype for w in weights}) != 1 or len({w.data_ptr() for w in weights}) != len(weights):
        return
    with torch.no_grad():
        flat = torch.empty(sum(w.numel() for w in weights), dtype=weights[0].dtype, device=CUDA0)
        offset = 0
        for w in weights:
            slot = flat[offset:offset + w.numel()].view_as(w)
            slot.copy_(w)
            # the wrapper keeps its identity (optimiser, autograd) and takes the slot's storage,
            # as set_ does to a GPU tensor; the old storage is freed once nothing else holds it
            # (the slot's own wrapper counted its storage for the simulation's live bytes)
            w.elem = slot.elem
            offset += w.numel()


class _Stream:
    """``torch.cuda.Stream`` on the simulated device: one CPU runs every op in program order, so a
    stream orders nothing here; it records how many streams a process made and how often work
    was issued on each (``Simulation.streams``)."""

    def __init__(self, sim: "Simulation | None" = None, device=None, priority: int = 0):
        self.sim = sim
        if sim is not None:
            sim.streams.append(self)
        self.entered = 0

    def wait_stream(self, stream) -> None:
        pass

    def synchronize(self) -> None:
        if self.sim is not None:
            self.sim.sync("torch.cuda.Stream.synchronize")


class _Rng:
    """``torch.cuda``'s RNG functions, backed by the simulation's generator."""

    def __init__(self, sim: Simulation):
        self.sim = sim

    def get_rng_state(self, device="cuda"):
        return self.sim.generator.get_state()

    def set_rng_state(self, state, device="cuda"):
        self.sim.generator.set_state(state.cpu() if isinstance(state, FakeCuda) else state)

    def manual_seed(self, seed):
        self.sim.generator.manual_seed(int(seed))

    def get_rng_state_all(self):
        return [self.get_rng_state()]

    def set_rng_state_all(self, states):
        self.set_rng_state(states[0])


@contextlib.contextmanager
def simulated_cuda(memory_limit: int | None = None, total_memory: int = 80 * 2 ** 30, trace: bool = False):
    """Run the body with one simulated CUDA device; yields the ``Simulation`` (its ``record``).

    Args:
        memory_limit: device bytes beyond which an allocation raises ``torch.cuda.OutOfMemoryError``
            (None: no limit).
        total_memory: what ``torch.cuda.mem_get_info``/``get_device_properties`` report.
        trace: keep a short stack per sync in ``record.where`` (slow; for finding a sync).
    """
    sim = Simulation(memory_limit=memory_limit, trace=trace)
    rng = _Rng(sim)

    def synchronize(device=None):
        sim.sync("torch.cuda.synchronize")

    @contextlib.contextmanager
    def stream(s):
        if s is not None:
            s.entered += 1
        yield

    def set_sync_debug_mode(debug_mode):
        # torch's modes: "default"/0 off, "warn"/1 a warning per sync, "error"/2 an error
        sim.sync_debug_mode = {"default": 0, "warn": 1, "error": 2}.get(debug_mode, debug_mode)

    props = mock.Mock(total_memory=total_memory, name="Simulated CUDA device")
    props.name = "Simulated CUDA device (CPU)"
    cuda = torch.cuda
    patches = [
        mock.patch.object(cuda, "is_available", lambda: True),
        mock.patch.object(cuda, "device_count", lambda: 1),
        mock.patch.object(cuda, "_lazy_init", lambda: None),
        mock.patch.object(cuda, "is_initialized", lambda: True),
        mock.patch.object(cuda, "current_device", lambda: 0),
        mock.patch.object(cuda, "set_device", lambda device: None),
        mock.patch.object(cuda, "synchronize", synchronize),
        mock.patch.object(cuda, "Stream", lambda device=None, priority=0: _Stream(sim, device, priority)),
        mock.patch.object(cuda, "stream", stream),
        mock.patch.object(cuda, "current_stream", lambda device=None: _Stream()),
        mock.patch.object(cuda, "set_sync_debug_mode", set_sync_debug_mode),
        # a CUDA build of torch (e.g. 2.11 from PyPI, tested on a CPU-only machine) would hand the
        # simulated tensors to cuDNN, which checks the device's properties: they are CPU tensors
        mock.patch.object(torch.backends.cudnn, "is_acceptable", lambda tensor: False),
        # ...and cuDNN's flatten moves an LSTM's weights to new storage (issue 54; flatten_parameters above)
        mock.patch.object(torch.nn.RNNBase, "flatten_parameters", flatten_parameters),
        mock.patch.object(cuda, "get_sync_debug_mode", lambda: sim.sync_debug_mode),
        mock.patch.object(cuda, "get_rng_state", rng.get_rng_state),
        mock.patch.object(cuda, "set_rng_state", rng.set_rng_state),
        mock.patch.object(cuda, "get_rng_state_all", rng.get_rng_state_all),
        mock.patch.object(cuda, "set_rng_state_all", rng.set_rng_state_all),
        mock.patch.object(cuda, "manual_seed", rng.manual_seed),
        mock.patch.object(cuda, "manual_seed_all", rng.manual_seed),
        mock.patch.object(cuda, "get_device_name", lambda device=None: props.name),
        mock.patch.object(cuda, "get_device_properties", lambda device=None: props),
        mock.patch.object(cuda, "mem_get_info", lambda device=None: (total_memory - sim.live, total_memory)),
        mock.patch.object(cuda, "memory_allocated", lambda device=None: sim.live),
        mock.patch.object(cuda, "max_memory_allocated", lambda device=None: sim.peak),
        mock.patch.object(cuda, "reset_peak_memory_stats", lambda device=None: sim.reset_peak()),
        mock.patch.object(cuda, "empty_cache", lambda: None),
        # foreach (multi-tensor) kernels, as the optimisers and clipping choose on a real GPU
        mock.patch.object(_optimizer, "_foreach_supported_types", _optimizer._foreach_supported_types + [FakeCuda]),
        mock.patch.object(_foreach_utils, "_foreach_supported_types", _foreach_utils._foreach_supported_types + [FakeCuda]),
    ]
    original_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        # C++ Tensor.to would build a CUDA device guard, which a CPU-only build cannot
        device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
        if device is not None and device.type == "cuda" and not isinstance(self, FakeCuda):
            return aten._to_copy(self, dtype=dtype or self.dtype, device=CUDA0, non_blocking=non_blocking,
                                 memory_format=memory_format or torch.preserve_format)
        return original_to(self, *args, **kwargs)

    def to_cuda(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
        return self if isinstance(self, FakeCuda) else to(self, CUDA0, non_blocking=non_blocking)

    group = _foreach_utils._group_tensors_by_device_and_dtype

    def group_on_device(tensorlistlist, with_indices=False):
        # C++ groups by the device it sees (the CPU); callers then move results .to(that device)
        out = {}
        for (device, dtype), value in group(tensorlistlist, with_indices).items():
            first = next((t for t in value[0][0] if t is not None), None) if value[0] else None
            out[(CUDA0 if isinstance(first, FakeCuda) else device, dtype)] = value
        return out

    import torch.nn.utils.clip_grad as _clip_grad
    import torch.optim.swa_utils as _swa_utils

    patches += [mock.patch.object(module, "_group_tensors_by_device_and_dtype", group_on_device)
                for module in (_foreach_utils, _optimizer, _clip_grad, _swa_utils)]
    original_tensor = torch.tensor

    def tensor(data, *args, device=None, **kwargs):
        if device is None or torch.device(device).type != "cuda":
            return original_tensor(data, *args, device=device, **kwargs)
        requires_grad = kwargs.pop("requires_grad", False)
        host = original_tensor(data, *args, **kwargs)
        return aten._to_copy(host, device=CUDA0).requires_grad_(requires_grad)  # a blocking copy

    patches.append(mock.patch.object(torch, "tensor", tensor))
    # Module.to must swap whole Parameter objects (torch.utils.swap_tensors), as tied weights stay
    # one object: replacing a CPU Parameter's data by a wrapper (set_data) leaves a plain tensor
    # without storage, which C++ then reads
    # (load_state_dict keeps its copy_ into the existing parameters, as on a GPU)
    def swap_in_apply():
        return sys._getframe(1).f_code.co_name == "_apply"

    patches += [mock.patch.object(torch.__future__, "get_swap_module_params_on_conversion", swap_in_apply),
                mock.patch.object(torch.Tensor, "to", to), mock.patch.object(torch.Tensor, "cuda", to_cuda)]
    registry = torch.serialization._package_registry
    # map_location="cuda": storages stay on the CPU (plain tensors), copied onto the device later
    registry.insert(0, (0, lambda obj: None, lambda obj, location: obj if location.startswith("cuda") else None))
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        previous, Simulation.current = Simulation.current, sim
        try:
            with sim:
                yield sim
        finally:
            Simulation.current = previous
            registry.pop(0)


def on_device(tensor: torch.Tensor) -> bool:
    """True for a simulated CUDA tensor."""
    return isinstance(tensor, FakeCuda)


def lock_dir_env(tmp_path) -> dict:
    """Environment for audit.device's slot locks in a test folder."""
    return {"AUDIT_GPU_LOCK_DIR": os.fspath(tmp_path / "gpu-locks"), "AUDIT_RUNS_PER_GPU": "1"}
