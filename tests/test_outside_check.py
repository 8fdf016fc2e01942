"""`snakemake -n` refuses what would crash every train job of an outside part (issue 37): a body
whose features are wider than its d_out, a head that reads values on the meta device, and a
softmax_matched size no d reaches; each as one line naming the config key, before any job runs.
Control: the same study with the docs' GRU body plans its jobs."""

import os
import subprocess
import sys

import pytest
import yaml

from tests.helpers import doc_example, write_package
from tests.model.test_check import PARTS
from helpers import copy_workflow
from tests.test_pipeline import job_counts


@pytest.fixture(scope="module")
def workflow(tmp_path_factory, mirror):
    root = tmp_path_factory.mktemp("outside-check")
    workdir = copy_workflow(root)
    packages = write_package(root / "site", "i37smk", {"parts": PARTS, "gru": doc_example("bodies.md")})
    path = os.pathsep.join(p for p in (str(packages), os.environ.get("PYTHONPATH")) if p)
    return workdir, {**os.environ, "AUDIT_DATA_MIRROR": str(mirror), "PYTHONPATH": path}


def dry_run(workflow, name: str, heads: list[dict]) -> subprocess.CompletedProcess:
    workdir, env = workflow
    config = yaml.safe_load((workdir / "configs" / "smoke.yaml").read_text())
    config.update(study=name, heads=[{"name": "softmax"}, *heads])
    config["comparisons"], config["claims"], config["correlations"] = [], [], []
    (workdir / "configs" / f"{name}.yaml").write_text(yaml.safe_dump(config))
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile",
                           f"configs/{name}.yaml"], cwd=workdir, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("heads, line", [
    ([{"name": "wide", "head": "softmax", "model": {"body": "i37smk.parts:WideBody"}}],
     "error: {config}: config key heads[1].model.body: body 'i37smk.parts:WideBody' returned dropped "
     "features of shape (3, 2, 17) in training, not (T, B, d_out) = (3, 2, 16)"),
    ([{"name": "valued", "import": "i37smk.parts:ValueReadingHead"}],
     "error: {config}: config key heads[1].import: building head 'i37smk.parts:ValueReadingHead' on "
     "torch's meta device failed"),
    ([{"name": "mix", "import": "i37smk.parts:ExtraHead", "model": {"body": "i37smk.gru:GRUBody"},
       "options": {"extra": 5000}},
      {"name": "softmax_matched", "options": {"match": "mix"}, "model": {"body": "i37smk.gru:GRUBody"}}],
     "error: {config}: config key heads[2].options.tolerance: matching arm 'mix' on ptb (V=10000): "
     "softmax_matched: closest size d=16 is 2.83% away from 176632 parameters (tolerance 0.5%)"),
])
def test_dry_run_stops_with_one_line_naming_the_key(workflow, heads, line):
    proc = dry_run(workflow, "bad", heads)
    assert proc.returncode != 0
    lines = [text for text in proc.stderr.splitlines() if text.startswith("error: ")]
    config = workflow[0] / "configs" / "bad.yaml"   # Snakemake names the config file by its full path
    assert len(lines) == 1 and lines[0].startswith(line.format(config=config)), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "Job stats:" not in proc.stdout + proc.stderr   # no job planned


def test_dry_run_plans_the_docs_body(workflow):
    proc = dry_run(workflow, "good", [{"name": "gru", "head": "softmax", "model": {"body": "i37smk.gru:GRUBody"}}])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert job_counts(proc.stdout + proc.stderr)["train"] == 2 * 3   # two arms x smoke.yaml's three seeds
