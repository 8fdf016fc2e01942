"""One run's settings: overrides merged, canonical, and only this run's settings in them."""

import json

from audit.config import check_study, run_settings, settings_json
from helpers import minimal_study


def test_run_settings_merge_head_overrides_and_are_canonical():
    config = check_study(minimal_study(heads=[{"name": "softmax"},
                                        {"name": "big", "head": "softmax", "model": {"emb_size": 8},
                                         "train": {"lr": 1.0}}]))
    settings = run_settings(config, "ptb", "big", 2)
    assert settings["model"]["emb_size"] == 8 and settings["train"]["lr"] == 1.0
    assert settings["model"]["hidden_size"] == 1150 and settings["seed"] == 2
    text = settings_json(config, "ptb", "big", 2)
    # the train rule's settings: the run's less its evaluate options (they rerun evaluate jobs only)
    assert json.loads(text) == {k: v for k, v in settings.items() if k != "evaluate"}
    assert settings["evaluate"] == config["evaluate"]
    other_evaluate = check_study(minimal_study(heads=[{"name": "softmax"}, {"name": "big", "head": "softmax",
                                        "model": {"emb_size": 8}, "train": {"lr": 1.0}}], evaluate={"contexts": 50}))
    assert settings_json(other_evaluate, "ptb", "big", 2) == text
    # canonical: the same settings written in another key order give the same string ...
    reordered = check_study({"heads": [{"train": {"lr": 1.0}, "model": {"emb_size": 8}, "head": "softmax", "name": "big"},
                                       {"name": "softmax"}],
                             "seeds": [2, 1], "study": "t"})
    assert list(reordered["heads"][0]) != list(config["heads"][1]) and settings_json(reordered, "ptb", "big", 2) == text
    assert text == json.dumps(json.loads(text), sort_keys=True)
    # ... a setting of this run changes it, a setting of another arm does not
    other = check_study(minimal_study(heads=[{"name": "softmax", "train": {"lr": 5.0}},
                                       {"name": "big", "head": "softmax", "model": {"emb_size": 8}, "train": {"lr": 1.0}}]))
    assert settings_json(other, "ptb", "big", 2) == text and settings_json(other, "ptb", "softmax", 2) != \
        settings_json(config, "ptb", "softmax", 2)
    assert settings_json(config, "ptb", "big", 1) != text and settings_json(config, "wikitext-2", "big", 2) != text
