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
