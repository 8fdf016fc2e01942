"""The typed training settings (audit.config.training.TrainSettings): one field per key of the
schema's ``train`` section with the schema's default, built without touching the settings that
are hashed into a run's identity, and the one home of "CUDA graphs need SGD"."""

from __future__ import annotations

import dataclasses
import json

import pytest

from audit.config import load_study, settings_json
from audit.config.training import STUDY_WIDE, TrainSettings
from audit.errors import AuditError
from audit.schema import read_schema, schema_defaults
from helpers import REPO, tiny_settings


def test_one_field_per_run_key_of_the_schema_with_its_default():
    keys = set(read_schema()["properties"]["train"]["properties"]) - set(STUDY_WIDE)
    fields = {f.name: f.default for f in dataclasses.fields(TrainSettings)}
    assert set(fields) == keys
    assert fields == {k: v for k, v in schema_defaults("train", unfilled=True).items() if k in keys}
    # the x-default keys, never written into a config, read with the defaults the code always had
    assert (fields["optimizer"], fields["warmup_steps"], fields["cuda_graphs"]) == ("sgd", 0, False)


def test_a_runs_settings_give_their_values_and_stay_as_they_were():
    settings = tiny_settings(device="cuda", cuda_graphs=True, bptt=12, variable_bptt=False)
    before = json.dumps(settings, sort_keys=True)
    train = TrainSettings.of(settings["train"])
    assert (train.cuda_graphs, train.bptt, train.batch_size, train.optimizer, train.longest_chunk) == \
        (True, 12, 10, "sgd", 12)
    assert json.dumps(settings, sort_keys=True) == before
    assert TrainSettings.of({**settings["train"], "runs_per_gpu": 8}) == train   # study-wide: not a run's
    with pytest.raises(AuditError, match=r"^train\.cuda_graph: unknown train setting$"):
        TrainSettings.of({"cuda_graph": True})


@pytest.mark.parametrize("study", ["default", "paper-ptb", "transformer"])
def test_run_settings_of_the_studies_hold_no_x_default_key_they_do_not_write(study):
    """Run identities are unchanged: a study that does not set cuda_graphs, optimizer or
    warmup_steps has none of them in its runs' settings (the train rule's params)."""
    config = load_study(REPO / "configs" / f"{study}.yaml")
    written = set(read_schema()["properties"]["train"]["properties"]) & {"cuda_graphs", "optimizer", "warmup_steps"}
    arm = config["heads"][0]["name"]
    corpus = config["data"]["corpora"][0]
    train = json.loads(settings_json(config, corpus, arm, config["seeds"][0] if isinstance(config["seeds"], list)
                                     else 1))["train"]
    source = (REPO / "configs" / f"{study}.yaml").read_text()
    for key in written:
        assert (key in train) == (f"{key}:" in source), key
    assert not TrainSettings.of(train).cuda_graphs
