"""Several seeds of one arm trained in one process, taking turns step by step (issue 57).

One paper-size softmax run keeps an H200 16-17% busy: the host issues many small kernels and the
GPU waits. Separate processes fill it only under NVIDIA MPS, which many clusters do not allow.
Here k runs of one arm share one process: each keeps its own ``Trainer`` (model, optimiser, data
order, checkpoint, run folder) and, on a GPU, its own CUDA stream, and the process issues one
training step of each in turn, so that one run's kernels fill the gaps of another's.

Why not one batched model: ``nn.LSTM`` has no vmap rule (pytorch issues 105982, 134606), and a
block-diagonal stack of the seeds is not the same maths (clipping and weight decay would mix
them). Why each run's numbers stay its own: torch draws dropout masks from one global generator
per device, so each run's generator state is swapped in before each of its turns and saved after
(``Turns``); the order of the other runs' steps then changes none of its draws. Each run's
metrics, weights and checkpoints equal its own single-process run's, bitwise on the CPU
(tests/train/test_group.py). Each run resumes from its own checkpoint; a run that diverges ends
``failed`` alone; the run folders are the ones ``python -m audit train`` writes.

Not yet: ``train.cuda_graphs`` in a group (a graph's generator state would need registering per
run), and the Snakemake rule that groups a study's seeds; the timings (``train_seconds``,
``tokens_per_second``) of a run in a group are the group's wall time shared by its runs.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import torch

from audit.errors import AuditError
from audit.train.run import epoch_done, out_of_memory, resume, write_run
from audit.train.trainer import Divergence, Trainer


class Turns:
    """The global generator states of several runs of one process, each swapped in for its turn."""

    def __init__(self):
        self.states: dict[int, tuple] = {}

    def keep(self, key: int, device: torch.device) -> None:
        """Save the generators' current state as run ``key``'s (right after its trainer is made)."""
        cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        self.states[key] = (torch.get_rng_state(), cuda, device)

    @contextlib.contextmanager
    def of(self, key: int):
        """Run ``key``'s turn: its generator states in, then saved back."""
        cpu, cuda, device = self.states[key]
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, device)
        try:
            yield
        finally:
            self.keep(key, device)


def check_group(settings: list[dict]) -> None:
    """One arm, one corpus, distinct seeds, no CUDA graphs: one line naming what differs."""
    if not settings:
        raise AuditError("train group: no runs given")
    first = {k: v for k, v in settings[0].items() if k != "seed"}
    for s in settings[1:]:
        other = {k: v for k, v in s.items() if k != "seed"}
        if other != first:
            keys = sorted(k for k in set(first) | set(other) if first.get(k) != other.get(k))
            raise AuditError(f"train group: seed {s['seed']} differs from seed {settings[0]['seed']} in "
                             f"{', '.join(keys)}; a group holds the seeds of one arm")
    seeds = [s["seed"] for s in settings]
    if len(set(seeds)) != len(seeds):
        raise AuditError(f"train group: a seed appears twice in {seeds}")
    if settings[0]["train"].get("cuda_graphs"):
        raise AuditError("train group: train.cuda_graphs is not supported in a group yet; "
                         "train these seeds one per process")


def train_group(settings: list[dict], corpus_path: str, out_dirs: list[str | os.PathLike], log=print) -> list[dict]:
    """Train (or resume) the runs ``settings`` (the seeds of one arm) in this process, one step of
    each in turn; write each run's ``model.pt`` and ``metrics.json`` into its ``out_dirs`` entry.

    Returns:
        Each run's metrics, in the order given (``status`` ``ok`` or ``failed``).
    """
    check_group(settings)
    if len(out_dirs) != len(settings):
        raise AuditError(f"train group: {len(settings)} runs but {len(out_dirs)} output folders")
    outs = [Path(o) for o in out_dirs]
    turns, trainers = Turns(), []
    for k, (s, out) in enumerate(zip(settings, outs)):
        try:
            trainer = resume(s, corpus_path, out / "work" / "last.pt", _tagged(log, s))
        except torch.cuda.OutOfMemoryError as err:
            raise out_of_memory(err, s, None, out / "work" / "oom.json") from None
        turns.keep(k, trainer.device)
        trainers.append(trainer)
    streams = [stream_for(t.device) for t in trainers]
    identities = [t.identity() for t in trainers]
    status = {k: ("ok", "") for k in range(len(trainers))}
    try:
        while live := [k for k, t in enumerate(trainers) if status[k][0] == "ok" and t.epoch < t.t["epochs"]]:
            rows = epochs_in_turn(trainers, live, turns, streams,
                                  lambda k, err: _fail(status, k, err, log, settings[k]))
            for k, row in rows.items():
                try:
                    with turns.of(k), on(streams[k]):
                        epoch_done(trainers[k], trainers[k].end_epoch(row), identities[k], outs[k],
                                   _tagged(log, settings[k]))
                except Divergence as err:
                    _fail(status, k, err, log, settings[k])
    except torch.cuda.OutOfMemoryError as err:   # the whole group retries: every run resumes
        raise out_of_memory(err, settings[0], trainers[0], outs[0] / "work" / "oom.json") from None
    for stream in streams:   # write_run copies the weights on the default stream: each run's work first
        if stream is not None:
            stream.synchronize()
    return [write_run(t, s, out, *status[k]) for k, (t, s, out) in enumerate(zip(trainers, settings, outs))]


def epochs_in_turn(trainers: list[Trainer], live: list[int], turns: Turns, streams: list,
                   failed) -> dict[int, dict]:
    """One epoch of each live run, one training step of each in turn; {run: the epoch's row}.
    A run that diverges leaves the turns (``failed(run, error)``); the others go on."""
    steps = {k: trainers[k].epoch_steps() for k in live}
    rows: dict[int, dict] = {}
    while steps:
        for k in list(steps):
            try:
                with turns.of(k), on(streams[k]):
                    next(steps[k])
            except StopIteration as end:
                rows[k] = end.value
                del steps[k]
            except Divergence as err:
                failed(k, err)
                del steps[k]
    return rows


def _fail(status: dict, k: int, err: Exception, log, settings: dict) -> None:
    status[k] = ("failed", f"{type(err).__name__}: {err}")
    _tagged(log, settings)(f"run failed: {status[k][1]}")


def stream_for(device: torch.device):
    """A CUDA stream of the run's own (after the default stream's work: its data and model), or None."""
    if device.type != "cuda":
        return None
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    return stream


def on(stream):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def _tagged(log, settings: dict):
    """The log with each line naming its seed (the runs of a group share one log)."""
    return lambda message: log(f"[seed {settings['seed']}] {message}")
