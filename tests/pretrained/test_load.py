"""Loading a checkpoint: data, never code. A missing checkpoint stops the job before any work, a
model type outside the families, a folder that asks for remote code and a pickle that carries an
object are refused in one line, and a checkpoint whose d differs from the config's too."""

import json
import pickle
import shutil

import pytest
import torch

from audit.errors import AuditError
from audit.pretrained import job, load, suite
from tests.pretrained.conftest import example_config


def _job(model="tiny-16", seed=0, revision="step40"):
    return suite.Job(model, seed, revision)


def test_a_missing_checkpoint_stops_before_any_work(example_root, tmp_path):
    config = example_config(example_root)
    # the text does not exist either: the checkpoint's line must come first, before it is read
    with pytest.raises(AuditError) as err:
        job.run_job(config["pretrained"], config["evaluate"], _job(seed=7), str(tmp_path / "no-text.txt"), tmp_path / "out")
    message = str(err.value)
    assert "\n" not in message and "example/tiny-16-seed7 revision step40" in message
    assert "hf download example/tiny-16-seed7 --revision step40" in message
    assert "pretrained.hub is false" in message and not (tmp_path / "out").exists()
    section = {**config["pretrained"], "hub": True}      # the hub allowed, but switched off (HF_HUB_OFFLINE)
    with pytest.raises(AuditError, match="HF_HUB_OFFLINE is set"):
        load.locate(section, _job(seed=7))


def test_the_example_loads_as_the_config_says(example_root):
    config = example_config(example_root)
    source = load.locate(config["pretrained"], _job())
    model, tokenizer = load.load(source, torch.device("cpu"))
    assert type(model).__name__ == "GPTNeoXForCausalLM" and not model.training
    job.check_shape(model, suite.model_entry(config["pretrained"], "tiny-16"), source.label)
    lo, hi = load.norm_box(load.final_norm(model))
    assert lo.shape == (16,) and (hi - lo > 0).all()
    with pytest.raises(AuditError, match="says d = 32, V = 512"):
        job.check_shape(model, {"name": "tiny-16", "d": 32, "vocab": 512}, source.label)


def _folder(tmp_path, example_root, config: dict | None = None) -> load.Source:
    folder = tmp_path / "ckpt"
    shutil.copytree(example_root / "example" / "tiny-16-seed0" / "step40", folder)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return load.Source(str(folder), None, "test/ckpt revision step1")


def test_a_model_type_outside_the_families_is_refused(tmp_path, example_root):
    source = _folder(tmp_path, example_root, {"model_type": "bert", "hidden_size": 16, "num_attention_heads": 2})
    with pytest.raises(AuditError, match=r"model type 'bert' is outside the supported causal-LM families \(gpt_neox, gpt2\)"):
        load.load(source, torch.device("cpu"))


def test_remote_code_is_never_run(tmp_path, example_root):
    marker = tmp_path / "ran"
    source = _folder(tmp_path, example_root, {"model_type": "evil", "auto_map": {"AutoConfig": "evil.EvilConfig",
                                                                                 "AutoModelForCausalLM": "evil.Evil"}})
    (tmp_path / "ckpt" / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nclass EvilConfig: pass\n")
    with pytest.raises(AuditError) as err:
        load.load(source, torch.device("cpu"))
    assert "\n" not in str(err.value) and not marker.exists()


class _Bomb:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickled_weights_load_tensors_only(tmp_path, example_root):
    source = _folder(tmp_path, example_root)
    folder = tmp_path / "ckpt"
    model, _ = load.load(source, torch.device("cpu"))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")       # an older revision: a pickle of tensors
    again, _ = load.load(source, torch.device("cpu"))
    assert all(torch.equal(again.state_dict()[k], v) for k, v in state.items())
    marker = tmp_path / "opened"
    with open(folder / "pytorch_model.bin", "wb") as handle:
        pickle.dump({"x": _Bomb(str(marker))}, handle)     # a pickle that would run code
    with pytest.raises(AuditError, match="test/ckpt revision step1: could not load"):
        load.load(source, torch.device("cpu"))
    assert not marker.exists()
