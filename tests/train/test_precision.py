"""train.precision and train.deterministic as torch settings, read back from torch."""

import os

import pytest
import torch

from audit.errors import AuditError
from audit.train import precision


@pytest.fixture
def torch_flags():
    """Put back every flag these tests touch, whatever they set."""
    saved = (torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.rnn.fp32_precision,
             torch.backends.cudnn.conv.fp32_precision, torch.are_deterministic_algorithms_enabled(),
             torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    yield
    (torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.rnn.fp32_precision,
     torch.backends.cudnn.conv.fp32_precision) = saved[:3]
    torch.use_deterministic_algorithms(saved[3])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved[4:]


def _fp32_flags():
    return (torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.rnn.fp32_precision,
            torch.backends.cudnn.conv.fp32_precision)


@pytest.mark.parametrize("setting, mode", [("tf32", "tf32"), ("fp32", "ieee"), ("bf16", "ieee")])
def test_each_precision_sets_all_three_float32_flags(torch_flags, setting, mode):
    other = "ieee" if mode == "tf32" else "tf32"
    torch.backends.cuda.matmul.fp32_precision = torch.backends.cudnn.rnn.fp32_precision = \
        torch.backends.cudnn.conv.fp32_precision = other  # start from the opposite of the target
    precision.apply_precision(setting)
    assert _fp32_flags() == (mode, mode, mode)


def test_an_unknown_precision_is_one_line_naming_it(torch_flags):
    before = _fp32_flags()
    with pytest.raises(AuditError, match=r"train.precision must be one of .*got 'fp16'"):
        precision.apply_precision("fp16")
    assert _fp32_flags() == before  # nothing half-set


def test_determinism_on_and_off(torch_flags, monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    torch.backends.cudnn.benchmark = True
    precision.apply_determinism(True)
    assert torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic
    assert not torch.backends.cudnn.benchmark  # autotuning could pick another algorithm
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    precision.apply_determinism(False)
    assert not torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.deterministic


def test_a_deterministic_cublas_setting_of_the_users_is_kept(torch_flags, monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    precision.apply_determinism(True)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0")  # not a deterministic one: replaced
    precision.apply_determinism(True)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_autocast_only_for_bf16_on_cuda():
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert precision.autocast_dtype("bf16", cuda) is torch.bfloat16
    assert precision.autocast_dtype("bf16", cpu) is None
    assert precision.autocast_dtype("tf32", cuda) is None
    assert precision.autocast_dtype("fp32", cuda) is None
