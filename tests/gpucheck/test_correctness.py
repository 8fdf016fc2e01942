"""gpu-check's correctness step catches a CUDA path that is wrong (broken on purpose).

A ``sitecustomize`` written here starts the simulated device (tests/support/simulated_python.py)
and then corrupts ``Tensor.log_softmax`` and ``torch.log_softmax`` on the device only: 1e-3 added
to every log-prob of a simulated CUDA tensor, twenty times the check's tolerance. The CPU is left
right, so CUDA and the CPU disagree exactly as a broken kernel would make them. Heads whose
log-softmax is their own kernel (SigSoftmax, PLIF: ``torch._log_softmax`` with ``out=``) are not
touched, and must still pass.
"""

import json

import pytest

from support import simulated_python

BROKEN = """\
import runpy
import sys

runpy.run_path({simulated!r})   # the simulated device first
if sys.orig_argv[1:3] == ["-m", "audit"]:
    import torch

    from support.fake_cuda import on_device

    def corrupt(original):
        def log_softmax(input, *args, **kwargs):
            out = original(input, *args, **kwargs)
            return out + 1e-3 if on_device(input) else out
        return log_softmax

    torch.Tensor.log_softmax = corrupt(torch.Tensor.log_softmax)
    torch.log_softmax = corrupt(torch.log_softmax)
"""


def run(gpu_check, site, out):
    proc, seconds = gpu_check(["--out", str(out), "--steps", "environment,correctness", "--minutes", "3"], site)
    print(f"gpu-check --steps environment,correctness --minutes 3: {seconds:.0f} s wall")
    blob = json.loads((out / "gpu-check.json").read_text())
    return proc, {r["step"]: r for r in blob["steps"]}, (out / "gpu-check.md").read_text()


@pytest.mark.slow
def test_a_log_softmax_wrong_on_the_device_fails_correctness_and_the_run(gpu_check, tmp_path):
    simulated = simulated_python.install(tmp_path / "sim")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "sitecustomize.py").write_text(BROKEN.format(simulated=str(simulated / "sitecustomize.py")))

    proc, by, md = run(gpu_check, broken, tmp_path / "broken-out")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert by["environment"]["status"] == "pass" and by["environment"]["figures"]["simulated"] is True
    assert by["correctness"]["status"] == "fail"
    checks = {c["name"]: c for c in by["correctness"]["checks"]}
    failed = [name for name, c in checks.items() if not c["ok"]]
    assert "log-probs awd_lstm/softmax" in failed and "log-probs transformer/softmax" in failed
    assert float(checks["log-probs awd_lstm/softmax"]["value"].split()[-1]) == pytest.approx(1e-3, rel=0.05)
    # the heads with their own log-softmax kernel are untouched, and pass
    assert checks["log-probs awd_lstm/sigsoftmax"]["ok"] and checks["log-probs awd_lstm/plif"]["ok"]
    assert "| correctness | fail |" in md and "| correctness | log-probs awd_lstm/softmax |" in md
    assert "Result: **FAIL** (exit 1)" in md

    # the same run on the simulated device left as it is passes
    proc, by, md = run(gpu_check, simulated, tmp_path / "right-out")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert by["correctness"]["status"] == "pass"
    assert all(c["ok"] for c in by["correctness"]["checks"])
    assert "log-probs awd_lstm/softmax" in {c["name"] for c in by["correctness"]["checks"]}


def weight_drop_checks(monkeypatch=None, cuda_mask=True):
    """The weight-drop check's outcome on the simulated device; ``cuda_mask=False`` gives the
    CUDA layer no mask of ours (a fresh random one), as a device path that drops other weights."""
    from audit.gpucheck import correctness
    from audit.gpucheck.common import Result
    from support.fake_cuda import simulated_cuda

    if not cuda_mask:
        layer = correctness._weight_drop_layer
        monkeypatch.setattr(correctness, "_weight_drop_layer",
                            lambda n_in, n_out, device, mask: layer(n_in, n_out, device, None if device == "cuda" else mask))
    result = Result("correctness", True)
    with simulated_cuda():
        correctness.weight_drop(result, simulated=True)
    return result.data


def test_weight_drop_matches_the_cpu_with_one_mask_and_fails_with_another(monkeypatch):
    data = weight_drop_checks()
    [check] = data["checks"]
    assert check["ok"] and check["value"] == "max relative 0"   # the simulated device computes on the CPU
    # the mask moves the output: the dropped path ran (half of weight_hh's entries zeroed, the rest doubled)
    assert float(check["limit"].split("(")[1].rstrip(")")) > 1e-2
    assert data["notes"] == ["weight drop: not timed on the simulated device"]

    data = weight_drop_checks(monkeypatch, cuda_mask=False)
    [check] = data["checks"]
    assert not check["ok"] and float(check["value"].split()[-1]) > 1e-2
