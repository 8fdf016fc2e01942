"""A run's training settings as one typed value: ``TrainSettings``, the ``train`` section of
configs/schema.yaml.

Why: the keys added after the first studies (``optimizer``, ``warmup_steps``, ``cuda_graphs``)
are x-default, never written into a config, so that the settings of runs recorded before them
stay as they were (a run's settings are hashed into its identity). Each reader then had to know
the key's default: ``train.get("cuda_graphs", False)`` was written in four files and "CUDA graphs
need SGD" checked twice. Here every default is the schema's, read once, and what the settings
refuse is said once (``graphs_refusal``). Building one changes no dict: run identities stay.
Torch-free, so the config check and the trainer share it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from audit.errors import AuditError
from audit.schema import schema_defaults

_TRAIN = schema_defaults("train", unfilled=True)   # the `train` section: its one home
# study-wide keys (one GPU pool; audit.config.arms.STUDY_WIDE_TRAIN_KEYS): not a run's training
STUDY_WIDE = ("runs_per_gpu", "oom_retries", "gpu_memory_gb", "gpu_memory_margin", "seeds_per_process")


@dataclass(frozen=True)
class TrainSettings:
    """One run's training: its keys of the ``train`` section; every default is the schema's."""

    epochs: int = _TRAIN["epochs"]
    epoch_tokens: int | None = _TRAIN["epoch_tokens"]   # None: the whole split per epoch
    batch_size: int = _TRAIN["batch_size"]
    bptt: int = _TRAIN["bptt"]
    variable_bptt: bool = _TRAIN["variable_bptt"]
    max_seq_len_delta: int = _TRAIN["max_seq_len_delta"]
    lr: float = _TRAIN["lr"]
    wdecay: float = _TRAIN["wdecay"]
    clip: float = _TRAIN["clip"]
    alpha: float = _TRAIN["alpha"]                  # AR
    beta: float = _TRAIN["beta"]                    # TAR
    asgd: str = _TRAIN["asgd"]                      # nt | et | none
    optimizer: str = _TRAIN["optimizer"]            # sgd | adamw (x-default)
    warmup_steps: int = _TRAIN["warmup_steps"]      # adamw only (x-default)
    nonmono: int = _TRAIN["nonmono"]
    switch_epoch: int = _TRAIN["switch_epoch"]
    eval_batch_size: int = _TRAIN["eval_batch_size"]
    device: str = _TRAIN["device"]
    precision: str = _TRAIN["precision"]
    deterministic: bool = _TRAIN["deterministic"]
    cuda_graphs: bool = _TRAIN["cuda_graphs"]       # x-default false: runs recorded before it trained eagerly
    threads: int = _TRAIN["threads"]

    @classmethod
    def of(cls, train: dict, where: str = "train") -> "TrainSettings":
        """The settings of a run's (or a study's) ``train`` mapping; absent keys take the schema's
        defaults, study-wide keys are not a run's and are passed over.

        Raises:
            AuditError: a key the section does not have (``<where>.<key>: unknown train setting``).
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(train) - known - set(STUDY_WIDE))
        if unknown:
            raise AuditError(f"{where}.{unknown[0]}: unknown train setting")
        return cls(**{k: v for k, v in train.items() if k in known})

    @property
    def longest_chunk(self) -> int:
        """Rows of the longest training step (bptt, plus the variable draw's largest excess)."""
        return self.bptt + (self.max_seq_len_delta if self.variable_bptt else 0)

    def graphs_refusal(self) -> str | None:
        """Why these settings cannot train from CUDA graphs (the text after the key), or None.
        The device is the trainer's to check (audit.train.graphs.check): a config says ``auto``."""
        if self.cuda_graphs and self.optimizer != "sgd":
            return (f"needs optimizer sgd (got {self.optimizer!r}: AdamW's learning rate changes every step, "
                    f"a CUDA graph's is fixed)")
        return None
