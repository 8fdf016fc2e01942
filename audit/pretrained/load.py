"""Load one checkpoint of a pretrained suite as data: never code, weights only.

A checkpoint is found on disk first (``suite.local_dir``: ``<root>/<repo id>/<revision>/``, the
Hugging Face layout), else, only with ``pretrained.hub: true`` and the hub not switched off
(``HF_HUB_OFFLINE``), by its hub id and revision. ``locate`` decides before any work, so a job
whose checkpoint is neither on disk nor reachable stops in one line naming the model, the
revision and the fix.

Why so strict: a Hugging Face folder can carry Python (``auto_map``) and pickles
(``pytorch_model.bin``). Here ``trust_remote_code`` is always False, so only the classes of
``transformers`` itself are built, and only for the causal-LM families whose last layers this
module knows (``FAMILIES``: the final LayerNorm whose box the argmax test needs and the output
layer); weights load from safetensors where the folder has them, else through ``torch.load``
with ``weights_only=True`` (tensors only, no objects). A model type outside ``FAMILIES`` is
refused from its config.json, before any weight is read.
"""

from __future__ import annotations

import math
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from audit.errors import AuditError
from audit.pretrained.suite import Job, local_dir, repo_id

# model_type -> (the class transformers must build, the final norm's attribute on base_model);
# both end in a LayerNorm then a linear output layer (GPT-NeoX: embed_out, no bias; GPT-2: lm_head,
# tied to the input embedding)
FAMILIES = {"gpt_neox": ("GPTNeoXForCausalLM", "final_layer_norm"), "gpt2": ("GPT2LMHeadModel", "ln_f")}
_OFF = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Source:
    """Where a checkpoint loads from: a local folder (``revision`` None) or a hub id and revision."""

    where: str
    revision: str | None
    label: str          # "<repo id> revision <rev>", for every message


def hub_off() -> bool:
    """Whether the hub is switched off for this process (``HF_HUB_OFFLINE``, as huggingface_hub reads it)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _OFF


def locate(section: dict, job: Job, base: str | Path = ".") -> Source:
    """The checkpoint's source, decided before any work.

    Raises:
        AuditError: neither on disk nor allowed from the hub: one line with the model, the
            revision, the folder looked in and the command that fetches it.
    """
    repo = repo_id(section, job.model, job.seed)
    label = f"{repo} revision {job.revision}"
    folder = local_dir(section, job, base)
    if (folder / "config.json").is_file():
        return Source(str(folder), None, label)
    if section["hub"] and not hub_off():
        return Source(repo, job.revision, label)
    why = "HF_HUB_OFFLINE is set" if section["hub"] else "pretrained.hub is false"
    raise AuditError(f"pretrained {label}: not on disk at {folder}/ and {why}; fetch it where the hub is reachable "
                     f"(hf download {repo} --revision {job.revision} --local-dir {folder}) and carry "
                     f"the folder here (docs/pretrained.md), or set pretrained.hub: true on a machine with internet")


def _weights_kind(folder: Path, label: str) -> bool:
    """True when the folder holds safetensors weights, False for ``pytorch_model*.bin`` only."""
    if any(folder.glob("*.safetensors")):
        return True
    if any(folder.glob("pytorch_model*.bin")):
        return False
    raise AuditError(f"pretrained {label}: {folder}/ has a config.json but no weights (*.safetensors or "
                     "pytorch_model.bin); fetch the revision again")


def _quiet() -> None:
    """transformers' progress bars and advice off: one job's log is its own lines."""
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def load(source: Source, device: torch.device):
    """(model, tokenizer) of one checkpoint, the model in eval mode and float32 on ``device``.

    Raises:
        AuditError: one line naming the checkpoint: a config transformers cannot read, a model
            type outside ``FAMILIES``, no weights, or a load that failed (the hub unreachable).
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    _quiet()
    kwargs = {"revision": source.revision, "trust_remote_code": False}
    try:
        config = AutoConfig.from_pretrained(source.where, **kwargs)
    except (OSError, ValueError, KeyError) as err:
        raise AuditError(f"pretrained {source.label}: config.json unreadable or of an unknown model type "
                         f"({' '.join(str(err).split())[:200]})") from None
    family = FAMILIES.get(config.model_type)
    if family is None:
        raise AuditError(f"pretrained {source.label}: model type {config.model_type!r} is outside the supported "
                         f"causal-LM families ({', '.join(FAMILIES)}); a checkpoint is data, no other class is built")
    safetensors = _weights_kind(Path(source.where), source.label) if source.revision is None else None
    try:
        model = AutoModelForCausalLM.from_pretrained(source.where, config=config, use_safetensors=safetensors,
                                                     weights_only=True, dtype=torch.float32, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(source.where, **kwargs)
    except (OSError, ValueError, RuntimeError, pickle.UnpicklingError) as err:   # weights_only refuses objects
        raise AuditError(f"pretrained {source.label}: could not load ({' '.join(str(err).split())[:200]})") from None
    if type(model).__name__ != family[0]:
        raise AuditError(f"pretrained {source.label}: transformers built {type(model).__name__}, "
                         f"expected {family[0]} for model type {config.model_type!r}")
    return model.to(device).eval(), tokenizer


def final_norm(model) -> torch.nn.LayerNorm:
    """The LayerNorm right before the output layer (``FAMILIES``)."""
    return getattr(model.base_model, FAMILIES[model.config.model_type][1])


def norm_box(norm: torch.nn.LayerNorm) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi), each (d,): every output of the final LayerNorm lies in beta_i -/+ |gamma_i|
    sqrt(d - 1): the body's box of the argmax test, derived as the project's Transformer body
    derives its own (``audit.model.bodies.transformer`` ``output_box``: z sums to zero with
    ||z||^2 <= d, so |z_i| <= sqrt(d - 1))."""
    gamma = norm.weight.detach().double().cpu().numpy()
    d = gamma.size
    beta = (norm.bias.detach().double().cpu().numpy() if norm.bias is not None else np.zeros(d))
    reach = np.abs(gamma) * math.sqrt(d - 1)
    return beta - reach, beta + reach


class OutputHead(torch.nn.Module):
    """The checkpoint's output layer seen through the project's head protocol (``HeadProtocol``),
    so the gradient share and the argmax test run the trained runs' own code on it: a plain
    softmax of ``W h + b`` (``plain_softmax``, ``order_preserving``), ``layer_logits`` giving the
    (n, 1, V) logits and the softmax of them."""

    order_preserving = True
    plain_softmax = True

    def __init__(self, layer: torch.nn.Linear, name: str):
        super().__init__()
        self.layer, self.name, self.d_in = layer, name, layer.in_features

    def output_layer(self):
        return self.layer.weight, self.layer.bias

    def layer_logits(self, h: torch.Tensor):
        return self.layer(h).unsqueeze(-2), lambda logits: torch.log_softmax(logits[..., 0, :], dim=-1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.layer(h), dim=-1)
