"""The issue's acceptance command on the simulated device: ``python -m audit gpu-check --out DIR --minutes 8``.

Every ``python -m audit`` process (the planner and each step's child) starts on the simulated
CUDA device (tests/support/simulated_python.py). About 8 minutes: marked slow.
"""

import json

import pytest

from audit.gpucheck import cli
from audit.gpucheck.common import BODIES, HEADS
from support import simulated_python

MINUTES = 8
RAN = {"pass", "off-target"}


@pytest.mark.slow
def test_gpu_check_plans_into_8_minutes_and_passes_on_the_simulated_device(gpu_check, tmp_path):
    site = simulated_python.install(tmp_path / "site")
    out = tmp_path / "gc"
    proc, seconds = gpu_check(["--out", str(out), "--minutes", str(MINUTES)], site)
    print(f"gpu-check --minutes {MINUTES} on the simulated device: {seconds:.0f} s wall\n{proc.stdout}")
    report = (out / "gpu-check.md").read_text() if (out / "gpu-check.md").is_file() else "(no report)"
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:] + report[report.find("## Errors"):]
    # the plan keeps to the time: a step is killed GRACE seconds past a budget that ends by the deadline
    assert seconds < 60 * MINUTES + cli.GRACE + 30
    blob = json.loads((out / "gpu-check.json").read_text())
    md = (out / "gpu-check.md").read_text()
    assert blob["exit"] == 0 and blob["simulated"] is True and blob["minutes"] == MINUTES

    # simulated, and said so; no timing judged against the GPU targets of docs/gpus.md
    assert md.startswith("# gpu-check: Simulated CUDA device (CPU) (")
    assert "**Simulated device (CPU tensors that report cuda:0" in md
    assert "no timing or memory figure below is a GPU figure" in md
    assert "target, docs/gpus.md" not in md
    by = {r["step"]: r for r in blob["steps"]}
    assert all(r["simulated"] for r in by.values() if r["status"] != "skipped")
    if by["speed"]["status"] in RAN | {"incomplete"}:
        assert by["speed"]["checks"] == []   # the targets are figures here, never pass/fail
        if by["speed"]["figures"].get("one_run"):
            assert "## Speed (paper-ptb arms, tiny model: not GPU figures)" in md

    # the gates passed; every step ran or says why not
    assert [r["step"] for r in blob["steps"]] == list(cli.STEPS)
    assert by["environment"]["status"] == "pass" and by["correctness"]["status"] == "pass"
    # every head on both bodies was checked
    assert {c["name"] for c in by["correctness"]["checks"] if c["name"].startswith("log-probs ")} == \
        {f"log-probs {body}/{head}" for body in BODIES for head in HEADS}
    for name, r in by.items():
        assert f"gpu-check: {name:12s} " in proc.stdout
        row = next(line for line in md.splitlines() if line.startswith(f"| {name} | {r['status']} |"))
        if r["status"] in RAN:
            assert r["checks"] or r["figures"], name
        elif r["status"] == "skipped":
            assert r["skipped"] and r["skipped"] in row
        elif r["status"] == "incomplete":
            assert any("out of time" in note for note in r["notes"]), name
            assert "out of time" in row
        else:
            pytest.fail(f"{name}: {r['status']}: {r.get('error') or r.get('errors')}")
