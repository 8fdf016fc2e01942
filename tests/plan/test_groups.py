"""audit/plan/groups.py and rule train_group (issue 57): an arm's seeds cut into groups that train
in one process each, every run still its own train job, folder and numbers."""

import json

import pytest
import yaml

from audit.config import load_study, run_settings, train_settings
from audit.errors import AuditError
from audit.plan import groups
from audit.train.run import train
from helpers import comparable, copy_workflow
from tests.test_pipeline import job_counts, snakemake

STUDY = {"study": "grp", "data": {"corpora": ["ptb"], "vocab_size": 500,
                                  "max_tokens": {"train": 3000, "valid": 1000, "test": 1000}},
         "seeds": [1, 2, 3], "heads": [{"name": "softmax"}],
         "model": {"emb_size": 8, "hidden_size": 16, "n_layers": 2},
         "train": {"epochs": 2, "batch_size": 10, "bptt": 20, "threads": 1, "device": "cpu",
                   "seeds_per_process": 2, "runs_per_gpu": 2}}


def test_groups_cut_the_seeds_in_their_order():
    assert groups.groups([3, 1, 2, 7, 5], 2) == [[3, 1], [2, 7], [5]]
    assert groups.label([2, 7]) == "2-7" and groups.seeds_of("2-7") == [2, 7]
    assert groups.group_of(7, [3, 1, 2, 7, 5], 2) == [2, 7]
    with pytest.raises(AuditError, match=r"seed 9 is not one of the study's seeds"):
        groups.group_of(9, [1, 2], 2)


def test_a_design_that_cannot_group_is_one_line():
    with pytest.raises(AuditError, match=r"seeds on demand .* grouping needs a fixed seed list"):
        groups.check({"seeds": {"initial": 4, "step": 3, "max": 10}, "heads": [], "train": {"seeds_per_process": 2}})
    with pytest.raises(AuditError, match=r"train.cuda_graphs is not supported in a group yet"):
        groups.check({"seeds": [1, 2], "heads": [{"name": "s", "train": {"cuda_graphs": True}}],
                      "train": {"seeds_per_process": 2, "runs_per_gpu": 2}})
    with pytest.raises(AuditError, match=r"seeds_per_process \(4\) exceeds train.runs_per_gpu \(1\)"):
        groups.check({"seeds": [1, 2], "heads": [], "train": {"seeds_per_process": 4, "runs_per_gpu": 1}})
    assert groups.check({"seeds": [1, 2], "heads": [], "train": {}}) == 1


@pytest.mark.slow
def test_a_grouped_study_trains_each_run_to_its_own_numbers(tmp_path, mirror, ptb_corpus):
    workdir = copy_workflow(tmp_path / "wf")
    (workdir / "configs" / "grp.yaml").write_text(yaml.safe_dump(STUDY, sort_keys=False))
    plan = snakemake(workdir, "--configfile", "configs/grp.yaml", "--until", "train", "-n", mirror=mirror)
    assert plan.returncode == 0, plan.stderr[-2000:]
    # seeds 1 and 2 in one group job; seed 3, alone, trains in its own job as without groups
    assert job_counts(plan.stdout + plan.stderr)["train_group"] == 1
    assert job_counts(plan.stdout + plan.stderr)["train"] == 3
    done = snakemake(workdir, "--configfile", "configs/grp.yaml", "--until", "train", mirror=mirror)
    assert done.returncode == 0, done.stderr[-3000:]
    group_log = (workdir / "logs" / "grp" / "train" / "ptb" / "softmax" / "group-1-2.log").read_text()
    assert "[seed 1] epoch    2" in group_log and "[seed 2] epoch    2" in group_log
    for seed in (1, 2):   # each run's own job resumed the group's finished checkpoint
        log = (workdir / "logs" / "grp" / "train" / "ptb" / "softmax" / f"{seed}.log").read_text()
        assert "nothing left to train" in log
    # the numbers of each run are those of the same run trained alone in this process
    config = load_study(workdir / "configs" / "grp.yaml")
    corpus = workdir / "results" / "data" / "ptb" / "corpus_v500.pt"
    for seed in (1, 2, 3):
        settings = train_settings(run_settings(config, "ptb", "softmax", seed))
        alone = train(settings, str(corpus), tmp_path / "alone" / str(seed), log=lambda m: None)
        grouped = json.loads((workdir / "results" / "grp" / "runs" / "ptb" / "softmax" / str(seed) /
                              "metrics.json").read_text())
        assert comparable(grouped) == comparable(json.loads(json.dumps(alone)))
