"""PLIF (audit.model.kernels.plif) on the simulated CUDA device: no host sync, the CPU's gradients."""

import torch
import torch.nn.functional as F

from audit.model.kernels.plif import plif_log_softmax
from support.fake_cuda import simulated_cuda


def _loss_and_grads(x, w, targets):
    x = x.detach().requires_grad_(True)
    w = w.detach().requires_grad_(True)
    loss = F.nll_loss(plif_log_softmax(x, w, 3.0).reshape(-1, x.shape[-1]), targets)
    loss.backward()
    return loss.detach(), x.grad, w.grad


def test_plif_forward_and_backward_on_cuda_read_nothing_back_and_match_the_cpu():
    """Issue 22 defect 2: new_tensor in _bucket (a blocking copy per block, forward and backward)
    and CUDA bincount (a read of the index's min and max) synced about 6 times per step."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 4, 300, generator=gen) * 2
    w = torch.randn(50, generator=gen) * 0.3
    targets = torch.randint(0, 300, (24,), generator=gen)
    cpu = _loss_and_grads(x, w, targets)
    with simulated_cuda() as sim:
        xd, wd, td = x.to("cuda"), w.to("cuda"), targets.to("cuda")
        sim.take()
        loss, gx, gw = _loss_and_grads(xd, wd, td)
        record = sim.take()
        assert record.n_syncs == 0, dict(record.syncs)
        assert not record.mixed
        got = [t.cpu() for t in (loss, gx, gw)]
    torch.testing.assert_close(got[0], cpu[0], rtol=0, atol=0)   # the forward is the same code
    torch.testing.assert_close(got[1], cpu[1], rtol=0, atol=0)
    # slope gradient: index_add_ sums in another order than bincount (float32 rounding only)
    torch.testing.assert_close(got[2], cpu[2], rtol=1e-5, atol=1e-7)
    assert got[2].abs().max() > 0
