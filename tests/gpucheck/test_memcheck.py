"""The memory step's jobs (audit.gpucheck.memcheck) on the simulated device: a named arm is the
arm measured, a train override is applied to what is planned and run, and each row's ratio is
its measured peak over the plan's tensor bytes."""

import pytest

from audit.config import load_study, run_settings
from audit.gpucheck import memcheck
from audit.gpucheck.common import REPO, Result
from audit.plan import memory
from support.fake_cuda import simulated_cuda


def planned_gb(name: str, arm: str, job: str, **train) -> float:
    settings = run_settings(load_study(REPO / "configs" / f"{name}.yaml"), "ptb" if name != "paper-wt2" else "wt2", arm, 1)
    settings["train"].update(train)
    return (memory.job_bytes(memcheck.shrink(settings))[job] - memory.CONTEXT_BYTES) / 1e9


@pytest.mark.usefixtures("mirror")
def test_named_arms_and_overrides_are_what_is_planned_and_measured():
    jobs = [("paper-ptb", "gss", ("train",), {}),
            ("transformer-paper", "mos", ("train",), {"precision": "fp32"}),
            ("transformer-paper", "mos", ("train",), {})]
    result = Result("memory", True)
    with simulated_cuda():
        memcheck.run(result, 600, True, jobs)
    rows = result.data["figures"]["memory"]
    assert [(r["config"], r["arm"], r["job"], r["precision"]) for r in rows] == \
        [("paper-ptb", "gss", "train", "fp32"), ("transformer-paper", "mos", "train", "fp32"),
         ("transformer-paper", "mos", "train", "fp32")]
    assert [c["name"] for c in result.data["checks"]][:2] == \
        ["memory plan, paper-ptb train (gss, fp32)", "memory plan, transformer-paper train (mos, fp32)"]
    # the override reaches the run: only the config's own bf16 is downgraded on the simulated device
    assert result.data["notes"] == ["transformer-paper: bf16 measured as fp32 on the simulated device"]
    assert rows[0]["planned_gb"] == pytest.approx(planned_gb("paper-ptb", "gss", "train"))
    assert rows[1]["planned_gb"] == pytest.approx(planned_gb("transformer-paper", "mos", "train", precision="fp32"))
    for r in rows:
        assert r["allocated_gb"] > 0 and r["ratio"] == pytest.approx(r["allocated_gb"] / r["planned_gb"])


def test_each_head_is_one_arm_per_other_head_in_config_order():
    config = load_study(REPO / "configs" / "paper-ptb.yaml")
    largest = memcheck.largest_arm(config, "train")["arm"]
    jobs = memcheck.expand([("paper-ptb", None, ("train", "evaluate"), {}),
                            ("paper-ptb", memcheck.EACH_HEAD, ("train",), {})])
    assert jobs[0] == ("paper-ptb", None, ("train", "evaluate"), {})
    arms = [arm for _, arm, kinds, _ in jobs[1:]]
    assert all(kinds == ("train",) for _, _, kinds, _ in jobs[1:])
    # paper-ptb's heads in config order, each once (mos_fair is a second arm of head mos), less
    # the largest arm's head
    assert largest == "mos"
    assert arms == ["softmax", "sigsoftmax", "gss", "plif", "plif_frozen", "moc", "mos_uniform", "mixtape",
                    "softmax_matched"]
