"""The four LLM-era claims, one per size of a suite: a claims file for the study's ``claims_file``.

configs/claims.yaml judges the claims on an arm named ``softmax``; a suite's runs table names
each size instead (``head`` = the model), and a claim about trained models of one size is a
claim per size: 14M and 410M are different models, never pooled. So each claim of
configs/claims.yaml that a suite can test is written once per model, with the id
``<claim id>.<model>``, the same source, bound, test and "ours" reading, and the size in its
statement. The saturation claim (Godey, de la Clergerie & Sagot 2024), untestable on the
project's own runs, becomes testable here: per size, the least-squares slope of the test loss
over the suite's last checkpoints (``audit.pretrained.table.saturation``), expected above 0
below d = ``THRESHOLD`` and below 0 at or above it; across sizes, two correlations the study
declares (``CORRELATIONS``): the slope against d, and against the change of the head's spectrum.

``python -m audit pretrained claims CONFIG --out FILE`` writes the file (configs/claims-pythia.yaml
is its output for PolyPythias), checked against the schema's claims document when read.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from audit.config.study import read_claims_file
from audit.files import atomic_write_text
from audit.pretrained import suite

THRESHOLD = 1000   # Godey et al. 2024: heads with d below about 1000 saturate
GRIVAS = ("Grivas, Bogoychev & Lopez, ACL 2022: unargmaxable tokens in 13 of 150 public models (abstract), "
          "counted with inputs in [-100, 100]^d")
GODEY_ARTZI = "Godey & Artzi 2026 (arXiv 2603.10145): 95-99% of the logit-gradient norm is lost through a rank-d output layer"
GODEY = ("Godey, de la Clergerie & Sagot 2024 (arXiv 2404.07647): small language models saturate late in training "
         "(their loss rises) because a head with d below about 1000 adopts degenerate representations")
HIDDEN = ("Finlayson, Ren & Swayamdipta 2024 (arXiv 2403.09539); Carlini et al. 2024 (arXiv 2403.06634): softmax "
          "outputs lie in a d-dimensional image, so the largest gap of the stacked outputs' spectrum reveals the hidden size")
# the correlations the claims name: the study config declares them under correlations:
CORRELATIONS = [
    {"name": "late-loss-slope-vs-d", "x": "emb_size", "y": "late_loss_slope"},
    {"name": "late-loss-slope-vs-head-spectrum", "x": "late_head_entropy_change", "y": "late_loss_slope"},
]


def _size_claims(m: dict, window: str) -> list[dict]:
    """The claims of one model ``m`` (a ``pretrained.models`` entry)."""
    name, d, V = m["name"], m["d"], m["vocab"]
    at = f" ({name}: d = {d}, V = {V:,})"
    rare = "'rarely' as a number, ours: fewer than half of the suite's seeds"
    return [
        {"id": f"softmax-rarely-unargmaxable.{name}", "source": GRIVAS, "expect": "below",
         "statement": f"Pretrained softmax language models rarely have unargmaxable tokens (inputs in [-100, 100]^d){at}",
         "one_sample": {"head": name, "metric": "unargmaxable_box100", "bound": 0.5, "test": "binomial", "threshold": 0,
                        "unresolved": "argmax_unresolved_box100"}, "ours": f"the bound 0.5 is ours: {rare}"},
        {"id": f"softmax-unargmaxable-in-the-bodys-box.{name}", "expect": "below",
         "source": "this audit: our own measurement beside Grivas et al. 2022's, over the final LayerNorm's box",
         "statement": f"Over the final LayerNorm's box, pretrained softmax models rarely have unargmaxable tokens{at}",
         "one_sample": {"head": name, "metric": "unargmaxable", "bound": 0.5, "test": "binomial", "threshold": 0,
                        "unresolved": "argmax_unresolved"},
         "ours": f"the box (beta -/+ |gamma| sqrt(d - 1), every output of the final LayerNorm) and the bound are ours: {rare}"},
        {"id": f"softmax-passes-small-gradient-share.{name}", "source": GODEY_ARTZI, "expect": "below",
         "statement": f"A rank-d softmax head passes back at most 5% of the norm of the logit gradient p - e_y{at}",
         "one_sample": {"head": name, "metric": "gradient_norm_share", "bound": 0.05, "test": "t",
                        "scale_floor": "random_direction"},
         "ours": "the bound 0.05 is one reading of '95-99% of the gradient norm is lost', ours; the random-direction "
                 f"floor sqrt((d+1)/V) is {((d + 1) / V) ** 0.5:.3g} here"},
        {"id": f"softmax-rejects-most-gradient-norm.{name}", "source": GODEY_ARTZI, "expect": "below",
         "statement": f"The part of p - e_y that a rank-d softmax head rejects has at least 95% of its norm{at}",
         "one_sample": {"head": name, "metric": "gradient_norm_share", "bound": 0.312, "test": "t",
                        "scale_floor": "random_direction"},
         "ours": "the reading is ours: ||(I - P) g|| >= 0.95 ||g||, so the kept share is at most sqrt(1 - 0.95^2) = 0.312"},
        {"id": f"softmax-outputs-reveal-hidden-size.{name}", "source": HIDDEN, "expect": "below",
         "statement": f"The largest singular-value gap of the double-centred log-probabilities reads d - 1{at}",
         "one_sample": {"head": name, "metric": "hidden_gap_miss", "bound": 0.5, "test": "binomial", "threshold": 0},
         "by_construction": "under a final LayerNorm and a linear head the double-centred log-P spans at most d - 1 "
                            "directions: a control of the rank tolerances at V = 50,304, not evidence about the models",
         "ours": "the bound 0.5 and the double-centring are ours"},
        {"id": f"small-heads-saturate.{name}", "source": GODEY, "expect": "above" if d < THRESHOLD else "below",
         "statement": (f"The test loss rises over the last checkpoints (d below about 1000){at}" if d < THRESHOLD else
                       f"The test loss keeps falling over the last checkpoints (d at or above about 1000){at}"),
         "one_sample": {"head": name, "metric": "late_loss_slope", "bound": 0.0, "test": "t"},
         "ours": (f"the reading is ours: saturation as a least-squares slope of the test loss above 0 over the "
                  f"checkpoints {window}, on the study's text, not the authors' Pile validation data; the threshold "
                  f"d = {THRESHOLD} is theirs")},
    ]


def suite_claims(config: dict) -> list[dict]:
    """Every claim of the study's suite: per model (``_size_claims``), then the two across sizes."""
    section = suite.section_of(config)
    late = suite.ordered(section)[-section["late"]:]
    window = f"{late[0]} to {late[-1]}"
    claims = [c for m in section["models"] for c in _size_claims(m, window)]
    claims += [
        {"id": "small-heads-saturate.by-size", "source": GODEY, "expect": "negative",
         "statement": "The smaller the head's d, the steeper the late rise of the test loss",
         "correlation": {"name": "late-loss-slope-vs-d", "level": "runs", "method": "spearman"},
         "ours": f"the slope over {window} against d, over every seed of every size, is our reading"},
        {"id": "small-heads-saturate.with-spectral-saturation", "source": GODEY, "expect": "negative",
         "statement": "The late rise of the loss comes with a narrowing of the head's singular-value spectrum",
         "correlation": {"name": "late-loss-slope-vs-head-spectrum", "level": "runs", "method": "spearman"},
         "ours": f"'spectral saturation' as the change of the head's entropy rank over d across {window} is ours"},
    ]
    return claims


def write(config: dict, out: str | Path) -> None:
    """Write the claims file and read it back through the schema (a file that would not load
    is never left behind as good)."""
    text = ("# Written by `python -m audit pretrained claims` (audit/pretrained/claims.py) from the study's\n"
            "# pretrained: section; edit that module, not this file.\n")
    atomic_write_text(text + yaml.safe_dump({"claims": suite_claims(config)}, sort_keys=False, width=110), Path(out))
    read_claims_file(out)
