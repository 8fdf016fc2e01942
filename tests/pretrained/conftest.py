"""The constructed suite every pretrained test reads: built once, in the Hugging Face layout, with
the hub switched off (CI cannot reach it; nothing here may try)."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"   # before transformers is imported anywhere in the session

import pytest  # noqa: E402

from audit.config import check_study  # noqa: E402
from audit import yamlfile  # noqa: E402
from tests.helpers import REPO  # noqa: E402

SEEDS = range(5)


@pytest.fixture(scope="session")
def example_root(mirror, tmp_path_factory):
    """The example suite (audit/pretrained/example.py) under <tmp>/example: tiny-16 with a planted
    unargmaxable token at step40, tiny-sat with a late spectral cut, five seeds each."""
    from audit.pretrained import example

    root = tmp_path_factory.mktemp("suite")
    example.build(mirror / "ptb" / "train.txt", root, SEEDS)
    return root


def example_config(root, **section) -> dict:
    """configs/pretrained-example.yaml, validated, its suite read from ``root`` (keys of the
    pretrained: section replaced by ``section``)."""
    config = yamlfile.load(REPO / "configs" / "pretrained-example.yaml")
    config["pretrained"].update(root=str(root), **section)
    return check_study(config, "pretrained-example")
