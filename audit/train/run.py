"""Train one (corpus, head, seed) run, the job behind ``python -m audit train``: resume it from
its epoch checkpoint, train the epochs left (``audit.train.trainer``), write ``model.pt`` and
``metrics.json``.

Every epoch ends with an atomic checkpoint holding everything the next epoch depends on, so a
killed job restarted with the same settings resumes and ends with exactly the metrics of an
uninterrupted run on the CPU. A checkpoint written under other settings, data, device type or
``TRAINING_VERSION`` is never resumed (``audit.train.checkpoint`` decides, and the log says why
the run starts afresh). A non-finite loss ends the run with status ``failed`` and the reason,
instead of crashing. Running out of GPU memory is no property of the run: the job exits non-zero
with one line (``error: out of GPU memory ...``), writes no metrics, keeps its checkpoint and
records the event in ``work/oom.json``; Snakemake's ``retries:`` reruns it on a GPU of its own,
it resumes, and its metrics.json lists the events under ``gpu_oom_retries``.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import numpy as np
import torch

from audit.errors import AuditError
from audit.files import atomic_save, atomic_write_text
from audit.model.language_model import count_parameters
from audit.train import checkpoint, progress
from audit.train.trainer import Divergence, Trainer


# Test hook: when set to a file path that does not exist yet, the trainer creates that file and
# raises torch's out-of-memory error before its second epoch (once), so that the retry through
# Snakemake can be tested on a machine without a GPU. Never set outside tests.
INJECT_OOM_ENV = "AUDIT_INJECT_OOM_ONCE"


# metrics.json's reason for an epoch log without ``output_singular_values`` (runs table column
# ``output_spectrum_note``; the saturation figure draws such a head's anisotropy alone)
OUTPUT_SPECTRUM_NOTE = ("not measured: the head has no output_layer() (HeadProtocol), so there is no "
                        "output weight whose singular values to log")


def convergence_gain(rows: list[dict]) -> float | None:
    """Relative validation-perplexity gain of the last epoch, (ppl[E-1] - ppl[E]) / ppl[E-1]:
    0.05 means the last epoch still lowered it by 5%; None (JSON null, an empty cell of the runs
    table) with fewer than two epochs, where it is undefined."""
    if len(rows) < 2:
        return None
    before, last = rows[-2]["valid_ppl"], rows[-1]["valid_ppl"]
    return (before - last) / before


def resume(settings: dict, corpus_path: str, path: Path, log=print) -> Trainer:
    """A trainer for this run at the state of checkpoint ``path`` if it may be resumed, else fresh.

    The checkpoint must carry this run's identity (``checkpoint.load``) and, once loaded,
    reproduce the validation loss it logged (``Trainer.verify``). Otherwise it is deleted and
    the log gets one line saying why the run starts afresh. A finished run's checkpoint (as
    after ``snakemake -f``) passes the same checks and then trains no epoch: the run's files are
    rewritten from it with the same numbers.
    """
    trainer = Trainer(settings, corpus_path, log)
    state, reason = checkpoint.load(path, trainer.identity(), trainer.t["epochs"])
    if state is not None:
        try:
            trainer.load_state_dict(state)
            reason = trainer.verify()
        except Exception as err:  # readable, same fingerprint, yet it does not fit: never a crash loop
            reason = f"does not load into this run ({type(err).__name__}: {' '.join(str(err).split())[:200]})"
        else:
            if reason:
                reason = f"does not reproduce its validation loss ({reason})"
        if not reason:
            epochs = trainer.t["epochs"]
            log(f"resumed checkpoint {path} after epoch {trainer.epoch} of {epochs} (same run identity, "
                f"validation loss reproduced)" + ("; nothing left to train" if trainer.epoch == epochs else ""))
            return trainer
        trainer = Trainer(settings, corpus_path, log)  # loading moved weights and RNGs: build it afresh
    if reason:
        log(f"warning: checkpoint {path} {reason}: discarded, training afresh")
        checkpoint.discard(path)
    return trainer


def train(settings: dict, corpus_path: str, out_dir: str | os.PathLike, log=print) -> dict:
    """Train (or resume) one run; write ``model.pt`` and ``metrics.json`` into ``out_dir``.

    Returns:
        The metrics dict written to ``metrics.json`` (``status`` is ``ok`` or ``failed``).
    """
    out = Path(out_dir)
    last = out / "work" / "last.pt"
    oom_log = out / "work" / "oom.json"
    try:
        trainer = resume(settings, corpus_path, last, log)
    except torch.cuda.OutOfMemoryError as err:   # the model or its checkpoint does not fit
        raise out_of_memory(err, settings, None, oom_log) from None
    identity = trainer.identity()
    status, error = "ok", ""
    try:
        while trainer.epoch < trainer.t["epochs"]:
            _inject_oom_once(trainer.epoch)
            epoch_done(trainer, trainer.run_epoch(), identity, out, log)
    except Divergence as err:
        status, error = "failed", f"{type(err).__name__}: {err}"
        log(f"run failed: {error}")
    except torch.cuda.OutOfMemoryError as err:
        raise out_of_memory(err, settings, trainer, oom_log) from None
    return write_run(trainer, settings, out, status, error)


def epoch_done(trainer: Trainer, row: dict, identity: dict, out: Path, log=print) -> None:
    """After an epoch: the checkpoint, the progress record and the log line."""
    checkpoint.save(trainer.state_dict(), identity, trainer.t["epochs"], out / "work" / "last.pt")
    progress.record(out, trainer.log_rows, trainer.t["epochs"])  # for `python -m audit progress`
    log(f"epoch {row['epoch']:4d} | train loss {row['train_loss']:.4f} ppl {row['train_ppl']:9.2f} | "
        f"valid ppl {row['valid_ppl']:9.2f} | {row['tokens_per_second']:8.0f} tok/s"
        + (" | switched to ASGD" if row.get("switched_to_asgd") else ""))


def write_run(trainer: Trainer, settings: dict, out: Path, status: str, error: str) -> dict:
    """Write the run's ``model.pt`` and ``metrics.json`` (its best state, its log); the metrics."""
    oom_log = out / "work" / "oom.json"
    best = trainer.best
    weights = best["state"] if best["state"] is not None else trainer.model.state_dict()
    best_row = next((r for r in trainer.log_rows if r["epoch"] == best["epoch"]), {})
    rows = trainer.log_rows
    metrics = {
        "status": status, "error": error,
        "study": settings["study"], "corpus": settings["corpus"], "head": settings["name"],
        "seed": settings["seed"], "n_params": count_parameters(trainer.model),
        "epochs_run": trainer.epoch, "best_epoch": best["epoch"],
        "wall_seconds": sum(r["train_seconds"] for r in trainer.log_rows),
        # CPU time of the training steps alone (this process, all its threads): the share of a
        # study's CPU that trains models (`python -m audit bench study`)
        "train_cpu_seconds": sum(r.get("train_cpu_seconds", math.nan) for r in trainer.log_rows),
        "tokens_per_second": float(np.mean([r["tokens_per_second"] for r in trainer.log_rows])) if trainer.log_rows else math.nan,
        "train_ppl": best_row.get("train_ppl", math.nan), "valid_ppl": best_row.get("valid_ppl", math.nan),
        # the scale a verdict speaks for, and how converged the run is (the audit warns on both)
        "vocab_size": len(trainer.vocab), "emb_size": trainer.cfg.emb_size,
        "tokens_trained": int(sum(r.get("tokens", 0) for r in rows)),
        "asgd_epoch": next((r["epoch"] for r in rows if r.get("switched_to_asgd")), None),
        "valid_gain_last": convergence_gain(rows),
        "device": str(trainer.device), "model": trainer.cfg.to_dict(), "settings": settings,
        # provenance: each time a job of this run ran out of GPU memory and was rerun
        "gpu_oom_retries": json.loads(oom_log.read_text()) if oom_log.is_file() else [],
        "log": trainer.log_rows,
    }
    if trainer.model.head.output_layer() is None:   # say why the epoch log has no output spectrum
        metrics["output_spectrum_note"] = OUTPUT_SPECTRUM_NOTE
    atomic_save({"config": trainer.cfg.to_dict(), "state": weights, "vocab": trainer.vocab}, out / "model.pt")
    # the whole job's CPU so far (start-up, data, training, validation, checkpoints): exact, where
    # Snakemake's benchmark file samples a job's CPU every 30 s and misses its last seconds
    metrics["job_cpu_seconds"] = time.process_time()
    atomic_write_text(json.dumps(metrics, indent=1, sort_keys=True, allow_nan=True), out / "metrics.json")
    return metrics


def _inject_oom_once(epoch: int) -> None:
    """The ``AUDIT_INJECT_OOM_ONCE`` test hook (see INJECT_OOM_ENV): once, before epoch 2."""
    marker = os.environ.get(INJECT_OOM_ENV)
    if marker and epoch >= 1 and not os.path.exists(marker):
        Path(marker).touch()
        raise torch.cuda.OutOfMemoryError(f"injected by {INJECT_OOM_ENV} (test hook)")


def out_of_memory(err: Exception, settings: dict, trainer: Trainer | None, oom_log: Path) -> AuditError:
    """The one-line error of a training job that ran out of GPU memory, after recording it.

    No metrics.json is written (the run is not ``failed``: that is kept for divergence) and the
    last epoch checkpoint stays, so Snakemake's retry resumes where this attempt stopped.
    ``trainer`` is None when building the model (or loading its checkpoint) ran out of memory.
    """
    message = " ".join(str(err).split())[:300]
    epoch = trainer.epoch + 1 if trainer is not None else None
    device = str(trainer.device) if trainer is not None else settings["train"]["device"]
    events = json.loads(oom_log.read_text()) if oom_log.is_file() else []
    events.append({"epoch": epoch, "device": device,
                   "gpu_slots": int(os.environ.get("AUDIT_GPU_SLOTS") or 1), "error": message})
    oom_log.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(json.dumps(events, indent=1), oom_log)
    where = f"at epoch {epoch}" if trainer is not None else "while building the model"
    kept = (f"the checkpoint after epoch {trainer.epoch} is kept and a retry resumes it" if trainer is not None
            else "a retry starts it again")
    return AuditError(f"out of GPU memory: {settings['name']} seed {settings['seed']} {where} on {device} "
                      f"(holding {events[-1]['gpu_slots']} slot(s)); {kept} ({message})")
