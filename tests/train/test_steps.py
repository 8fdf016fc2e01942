"""Per-step helpers (audit.train.steps): same numbers as torch, fewer host reads."""

import torch
import torch.nn as nn
from torch.optim.swa_utils import AveragedModel, get_swa_multi_avg_fn

from audit.train.steps import FastAverage, keep_freed_memory


def _models():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(50, 8), nn.Linear(8, 50))
    model[1].weight = model[0].weight  # tied, as in the language model
    return model


def _perturb(model, step):
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(step)) * 0.1)


def test_device_path_equals_torch_foreach_update_bitwise():
    """The GPU path (run here on the CPU) against torch's own foreach update with a tensor
    counter, which is what AveragedModel runs on CUDA: the same bits after every update."""
    model = _models()
    ours, reference = FastAverage(model), AveragedModel(model, multi_avg_fn=get_swa_multi_avg_fn())
    for step in range(7):
        _perturb(model, step)
        ours.update_without_reads(model)
        reference.update_parameters(model)
        assert all(torch.equal(a, b) for a, b in zip(ours.parameters(), reference.parameters()))
    assert int(ours.n_averaged) == int(reference.n_averaged) == 7
    assert ours.state_dict().keys() == reference.state_dict().keys()


def test_cpu_path_is_torchs_and_a_loaded_counter_is_reread():
    model = _models()
    ours, reference = FastAverage(model), AveragedModel(model)
    for step in range(3):
        _perturb(model, step)
        ours.update_parameters(model)
        reference.update_parameters(model)
    assert all(torch.equal(a, b) for a, b in zip(ours.parameters(), reference.parameters()))
    resumed = FastAverage(model)
    resumed.load_state_dict(ours.state_dict())
    _perturb(model, 9)
    resumed.update_without_reads(model)   # counter 3 read back once: weight 1/4, not a copy
    expected = AveragedModel(model, multi_avg_fn=get_swa_multi_avg_fn())
    expected.load_state_dict(ours.state_dict())
    expected.update_parameters(model)
    assert all(torch.equal(a, b) for a, b in zip(resumed.parameters(), expected.parameters()))
    assert not torch.equal(next(resumed.parameters()), next(model.parameters()))


def test_keep_freed_memory_is_accepted_on_glibc():
    import platform

    if platform.libc_ver()[0] != "glibc":
        import pytest

        pytest.skip("mallopt tuning is glibc-only")
    assert keep_freed_memory() is True
    assert float(torch.ones(50_000_000).sum()) == 5e7  # a 200 MB block still allocates and frees


def test_averaging_on_the_simulated_gpu_takes_the_sync_free_path(monkeypatch):
    """On CUDA the counter must live beside the weights, or AveragedModel's own update runs:
    a blocking host-to-device copy and an .item() per step (issue 22, defect 1)."""
    from support.fake_cuda import simulated_cuda

    ran = []
    monkeypatch.setattr(FastAverage, "update_without_reads",
                        lambda self, model, _f=FastAverage.update_without_reads: ran.append(1) or _f(self, model))
    cpu_model = _models()
    reference = AveragedModel(cpu_model, multi_avg_fn=get_swa_multi_avg_fn())
    with simulated_cuda() as sim:
        model = _models().to("cuda")
        average = FastAverage(model)
        assert average.n_averaged.device.type == "cuda"
        moves = [torch.randn(p.shape, generator=torch.Generator().manual_seed(i)) for i, p in enumerate(model.parameters())]
        moves_cuda = [m.to("cuda") for m in moves]
        sim.take()
        for _ in range(5):
            with torch.no_grad():
                torch._foreach_add_(list(model.parameters()), moves_cuda, alpha=0.1)
            average.update_parameters(model)
        record = sim.take()
        assert len(ran) == 5 and record.n_syncs == 0 and not record.mixed
        averaged = [p.cpu() for p in average.parameters()]
    for _ in range(5):
        with torch.no_grad():
            torch._foreach_add_(list(cpu_model.parameters()), moves, alpha=0.1)
        reference.update_parameters(cpu_model)
    assert all(torch.equal(a, b) for a, b in zip(averaged, reference.parameters()))
