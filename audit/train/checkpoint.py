"""Epoch checkpoints of one training run: the run's identity, saving, and the resume decision.

A checkpoint (``work/last.pt`` in the run folder) is resumed only when the run now asked for
would have computed exactly the trajectory the checkpoint is part of. Its *identity* records
everything that trajectory depends on: the run settings less the labels and the evaluation
settings (which no training number depends on), a digest of the token ids trained and validated
on, the device type the numbers were computed on, the torch version, the checkpoint layout
``FORMAT`` and the trainer's ``TRAINING_VERSION`` (bumped by hand when the training math
changes). Anything else makes the run start afresh, with one log line saying why.

``train.epochs`` is left out of the identity on purpose: nothing in training depends on the
planned number of epochs (the learning rate is constant apart from the per-batch scaling by
sequence length, NT-ASGD looks only at past validation losses, ET-ASGD at ``switch_epoch``, the
best weights are the best so far, there is no early stop, and the sequence-length RNG is carried
in the checkpoint). A checkpoint after epoch k therefore lies on the trajectory of every run
planned with at least k epochs, so raising ``epochs`` continues a finished run and ends with
exactly the numbers of a run planned with the larger value from the start; a checkpoint beyond
the planned number of epochs cannot be wound back and is discarded.

A checkpoint that cannot be read (truncated, not a checkpoint, an older layout) is discarded
with a warning, so a damaged file never turns into a crash loop.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch

from audit.files import atomic_save

FORMAT = 2  # layout of the checkpoint dict; 1 was the unversioned dict of the trainer's state

# run-settings keys that label a run or configure its evaluation: no training number depends on them
LABEL_KEYS = ("study", "name", "grid_point", "arm_group", "evaluate")
# train.epochs: see the module docstring; train.device: the resolved device type is compared instead
# (``auto`` and ``cuda`` on a GPU machine train the same way, ``auto`` on a CPU machine does not)
UNCOMPARED_TRAIN_KEYS = ("epochs", "device")


def data_digest(vocab: list[str], *tensors: torch.Tensor) -> str:
    """SHA-256 of the vocabulary and of the id tensors (shape and values) a run trains on."""
    digest = hashlib.sha256(json.dumps(vocab).encode())
    for tensor in tensors:
        digest.update(repr(tuple(tensor.shape)).encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def run_identity(settings: dict, *, device_type: str, data: str, training_version: int) -> dict:
    """What a run's training trajectory depends on, as a JSON-serialisable dict.

    Args:
        settings: the run settings (``audit.config.run_settings``).
        device_type: the device the run computes on (``cpu``, ``cuda``, ...), as resolved.
        data: ``data_digest`` of the vocabulary and batchified train and valid ids.
        training_version: the trainer's hand-bumped version of its training math.
    """
    trajectory = {k: v for k, v in settings.items() if k not in LABEL_KEYS}
    trajectory["train"] = {k: v for k, v in settings["train"].items() if k not in UNCOMPARED_TRAIN_KEYS}
    return {"format": FORMAT, "training_version": training_version, "torch": torch.__version__,
            "device_type": device_type, "data": data, "settings": trajectory}


def fingerprint(identity: dict) -> str:
    """SHA-256 of the identity's canonical JSON: equal identities give equal fingerprints."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    """The keys (dotted paths) whose values differ, as ``key old -> new``, in sorted key order."""
    out = []
    for key in sorted(set(old) | set(new), key=str):
        a, b, name = old.get(key, "<unset>"), new.get(key, "<unset>"), f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            out += differences(a, b, name + ".")
        elif a != b:
            if name == "data" or name.startswith("data."):
                out.append("data (token ids or vocabulary)")  # two digests say nothing readable
            else:
                out.append(f"{name.removeprefix('settings.')} {json.dumps(a)} -> {json.dumps(b)}")
    return out


def save(trainer_state: dict, identity: dict, planned_epochs: int, path: str | os.PathLike) -> None:
    """Write a checkpoint atomically: the trainer's state with the identity it was computed under."""
    atomic_save({"format": FORMAT, "identity": identity, "fingerprint": fingerprint(identity),
                 "planned_epochs": planned_epochs, "trainer": trainer_state}, path)


def load(path: str | os.PathLike, identity: dict, epochs: int) -> tuple[dict | None, str]:
    """Read a checkpoint and decide whether the run with ``identity`` and ``epochs`` may resume it.

    Tensors are loaded onto the CPU (the CPU RNG state must stay there; the trainer copies the
    weights onto its device).

    Returns:
        ``(trainer_state, "")`` when it may be resumed; ``(None, reason)`` otherwise, where the
        reason is one line that follows "checkpoint <path>" (empty when there is no checkpoint).
    """
    path = Path(path)
    if not path.is_file():
        return None, ""
    try:
        blob = torch.load(path, weights_only=False, map_location="cpu")
    except Exception as err:  # truncated zip, garbage, a pickle of a class that no longer exists, ...
        return None, f"is unreadable ({type(err).__name__}: {' '.join(str(err).split())[:200]})"
    if not (isinstance(blob, dict) and isinstance(blob.get("trainer"), dict) and isinstance(blob.get("identity"), dict)):
        return None, "is not a checkpoint of this trainer (an older layout without a run fingerprint)"
    if blob.get("format") != FORMAT or blob.get("fingerprint") != fingerprint(identity):
        changed = differences(blob["identity"], identity) or ["its fingerprint"]
        return None, "was written under other settings: " + "; ".join(changed)
    done = blob["trainer"].get("epoch")
    if not isinstance(done, int) or done > epochs:
        return None, f"is after epoch {done} but the run now plans {epochs} epochs"
    return blob["trainer"], ""


def discard(path: str | os.PathLike) -> None:
    """Remove a checkpoint that will not be resumed, so the run folder never holds one that
    disagrees with the metrics written beside it."""
    Path(path).unlink(missing_ok=True)


def host_cpu() -> str:
    """The CPU model and architecture of this host (``/proc/cpuinfo``'s model name where there is
    one): a checkpoint written on the same model must reproduce its logged loss bit for bit."""
    import platform

    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{platform.machine()} {model}"
