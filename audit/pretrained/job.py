"""One Snakemake job: measure one (model, seed, checkpoint) and write its folder.

``python -m audit pretrained evaluate --section JSON --options JSON --model M --seed S
--revision R --text FILE [--wordsim-dir DIR] --out DIR`` (rules/pretrained.smk passes the study's
``pretrained:`` and ``evaluate:`` sections as JSON, so a change of either reruns the jobs). The
checkpoint is located before anything else (``load.locate``): one that is neither on disk nor
reachable stops the job in one line, before the text is read or a model built. The folder gets
eval.json (the measurements, with the job's model, seed, revision, step, suite and source),
spectrum.npz, sentences.npz, argmax_tokens.csv and wordsim_pairs.csv, each written atomically.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from audit.config import check_section
from audit.device import resolve_device
from audit.errors import AuditError
from audit.evaluate.run import save_npz
from audit.files import atomic_write_text
from audit.pretrained import load, suite
from audit.pretrained.measure import measure
from audit.pretrained.stream import read_lines, tokenise


class Progress:
    """A progress line on stderr about every tenth of the windows, with the elapsed seconds and
    the time left at this pace (a job's log shows how far it is)."""

    def __init__(self, label: str):
        self.label, self.start, self.shown = label, time.monotonic(), -1

    def __call__(self, done: int, total: int) -> None:
        tenth = done * 10 // total
        if tenth > self.shown:
            self.shown = tenth
            spent = time.monotonic() - self.start
            left = spent / done * (total - done)
            print(f"{self.label}: windows {done}/{total} ({100 * done // total}%), {spent:.0f} s, "
                  f"~{left:.0f} s left", file=sys.stderr, flush=True)


def check_shape(model, entry: dict, label: str) -> None:
    """The checkpoint has the d and V the suite's config states (the planner's and the claims'
    figures came from there): a mismatch is one line naming both."""
    layer = model.get_output_embeddings()
    got = (layer.in_features, layer.out_features)
    if got != (entry["d"], entry["vocab"]):
        raise AuditError(f"pretrained {label}: the checkpoint has d = {got[0]}, V = {got[1]}; the config's "
                         f"pretrained.models entry {entry['name']!r} says d = {entry['d']}, V = {entry['vocab']}")


def run_job(section: dict, options: dict, job: suite.Job, text_path: str, out: str | Path,
            wordsim_dir: str | None = None, base: str | Path = ".") -> dict:
    """Measure ``job`` and write its folder ``out``; returns eval.json's fields."""
    section = check_section("pretrained", section, "pretrained section")
    suite.check(section, "pretrained section", job_only=True)
    options = check_section("evaluate", options or {}, "evaluate options")
    entry = suite.model_entry(section, job.model)
    source = load.locate(section, job, base)          # before any work: a missing checkpoint stops here
    torch.set_num_threads(section["threads"])
    torch.manual_seed(0)
    model, tokenizer = load.load(source, resolve_device(section["device"]))
    check_shape(model, entry, source.label)
    text = tokenise(tokenizer, read_lines(text_path, section["text"]["max_lines"]))
    argmax = section["argmax"] == "all" or (section["argmax"] == "final" and job.revision == suite.final_revision(section))
    result, arrays, tables = measure(model, tokenizer, text, section, options, name=job.model, argmax=argmax,
                                     wordsim_dir=wordsim_dir, progress=Progress(source.label))
    result.update(model=job.model, seed=job.seed, revision=job.revision, step=suite.step_of(job.revision),
                  suite=section["suite"], source=source.where, text=str(text_path), job_cpu_seconds=time.process_time())
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_npz(out / "spectrum.npz", arrays)
    save_npz(out / "sentences.npz", tables["sentences"])
    atomic_write_text(tables["argmax_tokens"].to_csv(index=False), out / "argmax_tokens.csv")
    atomic_write_text(tables["wordsim_pairs"].to_csv(index=False), out / "wordsim_pairs.csv")
    atomic_write_text(json.dumps(result, indent=1, sort_keys=True), out / "eval.json")
    return result


def add_arguments(parser) -> None:
    parser.add_argument("--section", required=True, help="the study's pretrained: section as JSON")
    parser.add_argument("--options", default="{}", help="the study's evaluate: section as JSON")
    parser.add_argument("--model", required=True)
    parser.add_argument("--seed", required=True, type=int)
    parser.add_argument("--revision", required=True)
    parser.add_argument("--text", required=True, help="the text file to evaluate on")
    parser.add_argument("--wordsim-dir", default=None, help="folder of the word-similarity benchmarks")
    parser.add_argument("--base", default=".", help="the workflow directory (pretrained.root is relative to it)")
    parser.add_argument("--out", required=True, help="the job's folder")


def main(args) -> int:
    try:
        section, options = json.loads(args.section), json.loads(args.options)
    except json.JSONDecodeError as err:
        raise AuditError(f"--section/--options: not valid JSON ({err.msg} at character {err.pos})") from None
    result = run_job(section, options, suite.Job(args.model, args.seed, args.revision), args.text, args.out,
                     args.wordsim_dir, args.base)
    print(f"{args.model} seed {args.seed} {args.revision}: test ppl {result['test_ppl']:.2f} | Press rank "
          f"{result['press_rank']} | gradient norm share {result['gradient_norm_share']:.3f}")
    return 0
