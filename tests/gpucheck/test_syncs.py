"""Host syncs counted through ``torch.cuda.set_sync_debug_mode("warn")`` (audit.gpucheck.syncs).

On the simulated device (tests/support/fake_cuda.py) every sync the simulation records is also a
"synchronizing CUDA operation" warning in "warn" mode, so ``SyncCounter`` must count exactly what
the simulation records: compared here call by call, and over the phases of ``measure``.
"""

import warnings

import pytest
import torch

from audit.gpucheck import cli, common, syncs
from audit.gpucheck.common import Result
from support.fake_cuda import simulated_cuda


@pytest.fixture
def sim():
    with simulated_cuda() as simulation:
        yield simulation


def test_three_item_calls_on_a_device_tensor_are_three_syncs(sim):
    x = torch.arange(6.0).cuda()
    sim.take()
    with syncs.SyncCounter() as counter:
        values = [x[i].item() for i in range(3)]
    assert values == [0.0, 1.0, 2.0]
    record = sim.take()
    assert counter.count == 3 == record.n_syncs
    assert record.syncs == {"item/bool/int/float": 3}


def test_pure_device_ops_are_no_sync(sim):
    x = torch.randn(8, 5, device="cuda")
    sim.take()
    with syncs.SyncCounter() as counter:
        y = torch.log_softmax(x @ x.T + 1.0, dim=-1).sum(0)
        y = torch.where(y > 0, y, -y).cumsum(0)
    record = sim.take()
    assert record.ops > 0 and record.n_syncs == 0
    assert counter.count == 0
    assert y.is_cuda


def test_every_kind_of_sync_is_counted_once_and_other_warnings_not(sim):
    x = torch.randn(10, device="cuda")
    host = torch.ones(10)
    sim.take()
    with syncs.SyncCounter() as counter:
        x.cpu()                          # device-to-host copy
        torch.cuda.synchronize()
        bool(x.sum() > 0)                # a host read of a device scalar
        x.nonzero()                      # a size the host must read back
        x.copy_(host)                    # a blocking host-to-device copy
        host.sum().item()                # a CPU tensor: no sync
        warnings.warn("not a sync", UserWarning)
    record = sim.take()
    assert record.n_syncs == 5
    assert counter.count == 5


def test_the_mode_is_put_back_and_nothing_is_counted_outside(sim):
    x = torch.randn(4, device="cuda")
    before = torch.cuda.get_sync_debug_mode()
    with syncs.SyncCounter() as counter:
        x[0].item()
    assert torch.cuda.get_sync_debug_mode() == before
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x[1].item()
    assert counter.count == 1
    assert not [w for w in caught if "synchronizing CUDA operation" in str(w.message)]


@pytest.fixture
def corpus(tmp_path):
    # the corpus syncs.run counts on: 12,000 training ids, 10 streams, bptt 10, ~120 steps
    return common.random_corpus(tmp_path / "corpus.pt", 500, 12000, 2000, 1000)


def counted_phases(monkeypatch, sim) -> list[tuple[int, int]]:
    """Make every SyncCounter also take the simulation's own record: (counted, recorded) pairs."""
    pairs = []

    class Checked(syncs.SyncCounter):
        def __enter__(self):
            sim.take()
            return super().__enter__()

        def __exit__(self, *exc):
            super().__exit__(*exc)
            pairs.append((self.count, sim.take().n_syncs))
            return False

    monkeypatch.setattr(syncs, "SyncCounter", Checked)
    return pairs


def test_softmax_on_awd_lstm_is_within_one_sync_per_50_steps(sim, corpus, monkeypatch):
    pairs = counted_phases(monkeypatch, sim)
    rows = syncs.measure("softmax", "awd_lstm", corpus)
    assert [r["phase"] for r in rows] == ["sgd", "averaging"]
    for row in rows:
        # enough steps that one read per step (>= 1 per step) could not pass for 1 per 50
        assert row["steps"] >= 100
        assert row["syncs"] / row["steps"] <= 1 / 50
        assert row["valid_chunks"] == 20   # 2,000 validation ids: 10 streams of 200, 199 targets, bptt 10
        assert row["valid_syncs"] / row["valid_chunks"] <= 1
    # what measure counted is exactly what the simulation recorded, phase by phase
    assert len(pairs) == 4
    assert sum(p[1] for p in pairs) > 0   # the end-of-epoch read at least: not 0 == 0 throughout
    assert all(counted == recorded for counted, recorded in pairs)
    assert [p[0] for p in pairs] == [r[k] for r in rows for k in ("syncs", "valid_syncs")]


def test_a_read_every_step_is_caught(sim, corpus, monkeypatch):
    # the CPU's check of the loss every step (the trainer's SYNC_EVERY = 1) on the device: one
    # host read per step, which the budget of 1 per 50 must refuse
    import audit.train.trainer as trainer

    monkeypatch.setattr(trainer, "SYNC_EVERY", 1)
    rows = syncs.measure("softmax", "awd_lstm", corpus)
    assert all(r["syncs"] >= r["steps"] for r in rows)
    assert all(r["syncs"] / r["steps"] > syncs.STEP_BUDGET for r in rows)


def test_run_fails_a_phase_over_budget_and_passes_one_at_it(monkeypatch):
    def fake_measure(head, body, corpus):
        over = head == "plif" and body == "awd_lstm"
        return [{"head": head, "body": body, "phase": "sgd", "steps": 100, "syncs": 3 if over else 2,
                 "valid_chunks": 20, "valid_syncs": 20}]

    monkeypatch.setattr(syncs, "measure", fake_measure)
    monkeypatch.setattr(common, "random_corpus", lambda *a, **k: "unused")
    result = Result("syncs", True)
    syncs.run(result, 600, True)
    data = result.data
    failed = [c for c in data["checks"] if not c["ok"]]
    assert [(c["name"], c["value"]) for c in failed] == [("syncs per step, awd_lstm/plif sgd", "0.030 (3 in 100)")]
    # 2 in 100 is exactly 1 per 50, and 20 in 20 exactly 1 per chunk: within the budget
    assert len(data["checks"]) == 2 * len(common.BODIES) * len(common.HEADS)
    assert len(data["figures"]["syncs"]) == len(common.BODIES) * len(common.HEADS)
    data["seconds"] = 1
    assert cli.status(data) == "fail"
