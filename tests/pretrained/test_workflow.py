"""The pretrained source through Snakemake, as every study runs: `snakemake -n` plans every
PolyPythias job with its cost and no checkpoint on disk; on the constructed suite one job per
(model, seed, checkpoint), a checkpoint that is missing stops its own job in one line while the
others finish, and a rerun reuses the finished jobs; a study with no runs of its own gets its
claims judged on the suite's runs table and its page rendered."""

import os
import re
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from helpers import copy_workflow
from tests.test_pipeline import job_counts


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, mirror):
    root = copy_workflow(tmp_path_factory.mktemp("pretrained-workflow"))
    return root, {**os.environ, "AUDIT_DATA_MIRROR": str(mirror), "HF_HUB_OFFLINE": "1"}


def snakemake(workdir, *args) -> subprocess.CompletedProcess:
    root, env = workdir
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)


def test_dry_run_plans_every_polypythias_job_with_its_cost(workdir):
    assert not (workdir[0] / "models").exists()           # no checkpoint on disk
    proc = snakemake(workdir, "-n", "--configfile", "configs/pythia.yaml")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert job_counts(out)["pretrained_evaluate"] == 5 * 10 * 7 and job_counts(out)["pretrained_collect"] == 1
    assert "suite polypythias: 350 jobs" in out and "pythia-410m" in out and "GPU-hours" in out
    job = out.split("rule pretrained_evaluate:")[1].split("rule ")[0]
    assert "runtime=" in job and "mem_mb=" in job


def small_study(workdir, example_root, seeds, **top) -> dict:
    """configs/pre-wf.yaml: the example study on tiny-16 alone, ``seeds``, two checkpoints and a
    small window (one job is seconds); ``top``: its top-level keys replaced."""
    root, _ = workdir
    config = yaml.safe_load((root / "configs" / "pretrained-example.yaml").read_text())
    config["pretrained"].update(root=str(example_root), models=config["pretrained"]["models"][:1], seeds=seeds,
                                checkpoints=["step60", "step80"], late=2, window=64, stride=32, contexts=60,
                                text={"corpus": "ptb", "max_lines": 20}, wordsim=False)
    config.update(study="pre-wf", **top)
    (root / "configs" / "pre-wf.yaml").write_text(yaml.safe_dump(config))
    return config


def test_one_job_per_checkpoint_a_missing_one_stops_alone(workdir, example_root):
    root, _ = workdir
    config = small_study(workdir, example_root, [0, 9], claims_file=None, correlations=[], evidence=[])
    target = "reports/pre-wf/pretrained/runs.csv"
    proc = snakemake(workdir, target, "-k", "--configfile", "configs/pre-wf.yaml")   # the target first: --configfile takes several
    assert proc.returncode != 0 and not (root / target).exists()
    done = root / "results" / "pre-wf" / "pretrained" / "tiny-16"
    assert all((done / "0" / rev / "eval.json").is_file() for rev in ("step60", "step80"))
    log = (root / "logs" / "pre-wf" / "pretrained" / "tiny-16" / "9" / "step60.log").read_text()
    errors = [line for line in log.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "example/tiny-16-seed9 revision step60: not on disk" in errors[0], log[-2000:]
    config["pretrained"]["seeds"] = [0]                   # the suite without the missing seed: finished jobs reused
    (root / "configs" / "pre-wf.yaml").write_text(yaml.safe_dump(config))
    proc = snakemake(workdir, target, "--configfile", "configs/pre-wf.yaml")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pretrained_evaluate" not in job_counts(proc.stdout + proc.stderr)
    assert len((root / target).read_text().splitlines()) == 2


def test_a_study_with_no_runs_of_its_own_is_judged_and_rendered(workdir, example_root):
    """configs/pythia.yaml trains nothing: its claims are judged on the suite's runs table named
    under evidence:, and its page is the verdict matrix with the suite's column, each per-size
    claim inside its claim's row. Seed 0's jobs are the test above's when it ran first."""
    root, _ = workdir
    small_study(workdir, example_root, [0, 1], evidence=[{"name": "example", "runs": "reports/pre-wf/pretrained/runs.csv"}])
    proc = snakemake(workdir, "--configfile", "configs/pre-wf.yaml")    # `all`: the page
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = job_counts(proc.stdout + proc.stderr)
    assert jobs["stats_evidence_claims"] == 1 and jobs["report_table_cross_scale"] == 1 and jobs["report"] == 1
    judged = pd.read_csv(root / "reports/pre-wf/tables/evidence_claims.csv").set_index("claim_id")
    html = (root / "reports/pre-wf/audit.html").read_text()
    matrix = html.split('id="verdict-matrix"')[1].split("</table>")[0]
    assert "<th class=\"l\">example" in matrix and "pretrained suite example: tiny-16 (d = 16); seeds 0-1 (2)" in matrix
    row = next(r for r in matrix.split("<tr>") if "softmax-rarely-unargmaxable · ptb" in r)
    sizes = re.findall(r'<li class="size"[^>]*><strong>([^<]+)</strong> <span class="badge v-(\w+)">', row)
    verdict = judged.loc["softmax-rarely-unargmaxable.tiny-16", "verdict"]
    assert sizes == [("tiny-16", verdict), ("tiny-sat", "not_run")], row   # tiny-sat: claimed, not in the suite
    assert "softmax-rarely-unargmaxable.tiny-16 · ptb" not in matrix     # inside its claim's row, not a row of its own
    assert "study&#39;s claims judged on the runs tables it names" in html.split("<nav")[0]   # its opening line
