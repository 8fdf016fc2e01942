"""One Snakemake study of outside heads and bodies for the session (issue 48).

tests/test_outside_head.py (docs/heads.md's temperature head, matched by softmax_matched) and
tests/test_outside_measurements.py (a forward-only head, docs/bodies.md's GRU under a softmax)
each ran their own study through the whole DAG: the same smoke.yaml shape at the same size (two
seeds, 20,000 training tokens, one epoch, 200 contexts), the same softmax arm, the same data, the
same statistics and report jobs. ``finish`` runs one study with all five arms (tests/conftest.py's
session fixture ``outside_study``); each test asserts on its own arms, and the whole study fails
or passes as each of them did: one arm's failed job fails the Snakemake run both tests check.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from audit.gpucheck.common import copy_workflow
from helpers import doc_example, write_package

STUDY = "outside"
TEMPERATURE = "outside_heads.temperature:TemperatureSoftmax"   # docs/heads.md's example
GATED = "outside37.gated:GatedPair"
GRU = "outside37.gru:GRUBody"                                  # docs/bodies.md's example

# the second head: two softmaxes mixed by a sigmoid gate, nothing but forward()
GATED_PAIR = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class GatedPair(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.a = nn.Linear(spec.d_in, spec.vocab_size)
        self.b = nn.Linear(spec.d_in, spec.vocab_size)
        self.gate = nn.Linear(spec.d_in, 1)

    def forward(self, h):
        z = self.gate(h)
        return torch.logaddexp(F.logsigmoid(z) + F.log_softmax(self.a(h), -1),
                               F.logsigmoid(-z) + F.log_softmax(self.b(h), -1))
'''


def config(workdir: Path) -> dict:
    """smoke.yaml at the tests' size, with the arms of both tests and softmax once."""
    config = yaml.safe_load((workdir / "configs" / "smoke.yaml").read_text())
    config.update(study=STUDY, seeds=[1, 2])
    config["heads"] = [{"name": "softmax"},
                       # tests/test_outside_head.py
                       {"name": "tempered", "import": TEMPERATURE, "options": {"init_temperature": 2.0}},
                       {"name": "softmax_matched", "options": {"match": "tempered"}},
                       # tests/test_outside_measurements.py
                       {"name": "gated", "import": GATED},
                       {"name": "gru", "head": "softmax", "model": {"body": GRU}}]
    config["data"]["max_tokens"] = {"train": 20000, "valid": 2000, "test": 2000}
    config["train"]["epochs"] = 1
    config["evaluate"]["contexts"] = 200
    # the first family only (smoke.yaml's gradient-share family names sigsoftmax, absent here)
    config["comparisons"] = [{**config["comparisons"][0], "against": ["tempered", "gated", "gru"]}]
    config["stats"].update(min_seeds=2, bootstrap_resamples=200)
    return config


def finish(root: Path, mirror: Path) -> tuple[Path, subprocess.CompletedProcess]:
    """The study run to its audit in ``root``/work (the packages in ``root``/site): (the work
    folder, the Snakemake run, whose exit status each test checks)."""
    (root / "work").mkdir(parents=True)
    workdir = copy_workflow(root / "work")
    (workdir / "configs" / f"{STUDY}.yaml").write_text(yaml.safe_dump(config(workdir)))
    site = root / "site"
    write_package(site, "outside_heads", {"temperature": doc_example("heads.md")})
    write_package(site, "outside37", {"gated": GATED_PAIR, "gru": doc_example("bodies.md")})
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "AUDIT_DATA_MIRROR": str(mirror), "PYTHONPATH": path}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", f"configs/{STUDY}.yaml"],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=1800)
    return workdir, proc
