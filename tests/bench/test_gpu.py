"""The GPU benchmark (audit.bench.gpu): runs at a tiny size on the CPU and prints its figures."""

import math

import pytest
import torch

from audit.bench import gpu
from audit.config import check_study


def test_projected_hours_sum_epochs_times_tokens_over_family_throughput():
    study = check_study({"study": "p", "seeds": [1, 2, 3], "data": {"corpora": ["ptb"]},
                         "heads": [{"name": "softmax"}, {"name": "mos", "options": {"experts": 2},
                                                         "train": {"epochs": 5}}],
                         "train": {"epochs": 10}})
    hours = gpu.projected_hours(study, {"softmax": 1000.0, "plif": 1.0, "mos": 500.0})
    expected = (3 * 10 * 929_589 / 1000.0 + 3 * 5 * 929_589 / 500.0) / 3600
    assert math.isclose(hours, expected, rel_tol=1e-12)
    assert gpu.family_of("moc") == "mos" and gpu.family_of("plif_frozen") == "plif"
    assert gpu.family_of("sigsoftmax") == "softmax"


def test_cpu_run_prints_every_figure_and_exits_0(capsys):
    if torch.cuda.is_available():
        import pytest

        pytest.skip("CUDA is present: on a GPU this would run the full-size benchmark")
    assert gpu.main(["--families", "softmax,mos", "--concurrency", "1,2", "--steps", "2", "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    assert "cpu, tiny model (CI check: no GPU figure)" in out
    for family in ("softmax", "mos"):
        assert f"\n{family}: one run " in out and "s per ptb epoch" in out
    assert out.count("plain N= 2:") == 2 and out.count("best N = ") == 2
    for name in ("paper-ptb", "paper-wt2"):
        line = next(ln for ln in out.splitlines() if ln.strip().startswith(name))
        assert line.split()[1] == "before" and float(line.split()[2].replace(",", "")) > 0
        assert "after" not in line   # no graphs on a CPU: no "after"
    assert "fp32 matmul rate (TF32 off, measured): " in out
    assert out.count("CUDA graphs: need a CUDA device (train.cuda_graphs)") == 2
    shares = [float(ln.split("GB, ")[1].split("%")[0]) for ln in out.splitlines() if "of the fp32 peak" in ln]
    assert len(shares) == 2 and all(0 < x < 100 for x in shares)


def test_the_parent_never_touches_cuda_nor_measures_itself(capsys, monkeypatch):
    # issue 22, fix 7: a parent holding a CUDA context, cached memory and a slot through the
    # sweep skews its own figures; children ask for the device and do every measurement
    import pytest

    def touched(*args, **kwargs):
        raise AssertionError("the bench gpu parent touched CUDA or measured in-process")

    for name in ("is_available", "init", "_lazy_init", "get_device_name", "get_device_properties",
                 "max_memory_reserved", "synchronize", "device_count"):
        monkeypatch.setattr(torch.cuda, name, touched)
    monkeypatch.setattr(gpu, "worker", touched)
    assert gpu.main(["--device", "auto", "--families", "softmax", "--concurrency", "1", "--steps", "2",
                     "--warmup", "1", "--no-mps"]) == 0
    out = capsys.readouterr().out
    if "cpu, tiny model" not in out:
        pytest.skip("CUDA is present: a full-size benchmark ran")
    assert "\nsoftmax: one run " in out and out.count("plain N= 1:") == 1


def test_one_run_serves_both_sweeps_and_mps_never_reruns_it(capsys, monkeypatch, tmp_path):
    """On a GPU (faked: the probe, the MPS daemon and the workers are stand-ins) the plain and the
    MPS sweep share the single run of step 1: N = 1 runs once per family, never under MPS, and
    each ratio is to that run."""
    calls = []

    def fake_concurrent(settings, corpus, n, steps, warmup, env=None, timeout=1800):
        graphs = settings["train"].get("cuda_graphs", False)
        calls.append((n, env is not None) + (("graphs",) if graphs else ()))
        rate = 4000.0 if graphs else 1000.0 * n ** 0.5 * (1.5 if env else 1.0)
        return {"n": n, "tokens_per_second": rate, "peak_gb": 1.0, "graph_steps": 7 if graphs else 0}

    monkeypatch.setattr(gpu, "probe_device", lambda: {"cuda": True, "name": "Fake GPU", "gib": 80.0, "torch": "x"})
    monkeypatch.setattr(gpu, "start_mps", lambda tmp: {"CUDA_MPS_PIPE_DIRECTORY": str(tmp_path)})
    monkeypatch.setattr(gpu, "stop_mps", lambda env: None)
    monkeypatch.setattr(gpu, "concurrent", fake_concurrent)
    monkeypatch.setattr(gpu, "measure_fp32_rate", lambda device: 50e12)
    assert gpu.main(["--families", "softmax", "--concurrency", "1,4", "--steps", "2", "--warmup", "1"]) == 0
    assert calls == [(1, False), (1, False, "graphs"), (4, False), (4, True)]
    out = capsys.readouterr().out
    assert "plain N= 4:        2,000 tokens/s aggregate ( 2.00 x one run)" in out
    assert "MPS   N= 1:        1,000 tokens/s aggregate ( 1.00 x one run)" in out
    assert "MPS   N= 4:        3,000 tokens/s aggregate ( 3.00 x one run)" in out
    assert "best: softmax MPS N=4" in out
    assert "CUDA graphs: 4,000 tokens/s (4.00 x eager)" in out and "7 timed steps replayed" in out
    # before: the best N (MPS N=4, 3,000 tokens/s); after: graphs at one run per GPU (4,000)
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("paper-ptb"))
    before, after = float(line.split()[2].replace(",", "")), float(line.split()[4].replace(",", ""))
    assert after == pytest.approx(before * 3000 / 4000, rel=1e-3)


def test_a_group_worker_times_k_seeds_in_one_process(tmp_path):
    """``concurrent(..., group=k)``: one process trains k seeds in turn (audit.train.group), and its
    tokens are all k runs' (k times one run's steps)."""
    from audit.config import load_study
    from audit.gpucheck.common import REPO

    settings = gpu.arm_settings(load_study(REPO / "configs" / "paper-ptb.yaml"), "softmax", True, "cpu")
    corpus = str(gpu.fake_corpus(10000, 50_000, tmp_path / "c.pt"))
    one = gpu.concurrent(settings, corpus, 1, steps=3, warmup=1)
    grouped = gpu.concurrent(settings, corpus, 1, steps=3, warmup=1, group=2)
    assert grouped["n"] == 1 and grouped["tokens_per_second"] > 0
    assert one["weights_sha256"] and grouped["weights_sha256"] == [""]   # no digest of a group
    # the group's window holds twice the tokens: its rate is at least what one run's is, not k times
    assert 0.5 * one["tokens_per_second"] < grouped["tokens_per_second"] < 4 * one["tokens_per_second"]
