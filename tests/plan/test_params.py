"""``python -m audit params`` (audit.plan.params): the counts a study's heads print, on the paper
configs (the published counts, protocol.md 1.1, 1.5, 2.4) and at a restricted vocabulary."""

import re
from pathlib import Path

import pytest

from audit.errors import AuditError
from audit.plan.params import main
from helpers import lstm_softmax_formula

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("config,expected", [
    ("paper-ptb.yaml", {"softmax": 24_221_600, "sigsoftmax": 24_221_600, "gss": 24_221_600,
                        "plif": 24_321_600, "plif_frozen": 24_221_600, "mos": 21_500_620,
                        "moc": 21_500_620, "mos_uniform": 21_491_320, "mos_fair": 17_535_200,
                        "softmax_matched": 17_540_476}),
    ("paper-wt2.yaml", {"softmax": 33_556_078, "gss": 33_556_078, "plif": 33_656_078,
                        "mos": 34_909_528, "moc": 34_909_528, "mos_uniform": 34_899_778}),
    # LK-paper Table 5: MoS-dagger 17.53M, Softmax-dagger 16.35M, Softmax-double-dagger solved (339)
    ("fair-comparison-paper.yaml", {"mos_fair": 17_535_200, "softmax_fair": 16_350_800,
                                    "softmax_matched": 17_540_476}),
    # LK-SM Table 4's MoS K sweep at d' = 620 (K = 15: the PTB MoS count)
    ("mos-sweep-paper-ptb.yaml", {"mos_experts15_dropoutl0.29": 21_500_620, "mos_experts15_dropoutl0": 21_500_620}),
])
def test_params_cli_on_paper_configs(config, expected, capsys):
    assert main([str(ROOT / "configs" / config), "--vocab-size",
                 str(33278 if "wt2" in config else 10000)]) == 0
    counts = dict(line.split()[:2] for line in capsys.readouterr().out.splitlines())
    for name, count in expected.items():
        assert int(counts[name]) == count, name
    assert "mixtape" in counts or not config.startswith("paper-")


def test_params_cli_counts_at_the_studys_restricted_vocabulary(tmp_path, capsys, ptb_corpus):
    """``data.vocab_size: K``: the runs train on the restricted corpus, whose vocabulary has exactly
    K entries (restrict_vocab: the K most frequent words, <unk> among them, no special added), so
    the printed counts are the closed form at V = K and softmax_matched is solved at that V."""
    import yaml

    from audit.data.corpus import load, restrict_vocab

    K, d, H, experts = 300, 32, 64, 2
    assert len(restrict_vocab(load(ptb_corpus), K).vocab) == K
    config = {"study": "restricted", "seeds": [1], "data": {"corpora": ["ptb"], "vocab_size": K},
              "model": {"emb_size": d, "hidden_size": H, "n_layers": 2},
              "heads": [{"name": "softmax"}, {"name": "mos", "options": {"experts": experts}},
                        {"name": "softmax_matched", "options": {"match": "mos"}}]}
    path = tmp_path / "restricted.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main([str(path), "--sizes"]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()}
    softmax = lambda e: lstm_softmax_formula(K, e, H, layers=2)  # noqa: E731
    mos = softmax(d) + d * experts * d + experts * d + d * experts   # latent d -> K d (bias), prior d -> K
    assert int(rows["softmax"][0]) == softmax(d) == 47_532
    assert int(rows["mos"][0]) == mos
    # the matched softmax: the d whose closed-form count is nearest the MoS's (ties: the smaller)
    solved = min(range(1, 4 * d), key=lambda e: (abs(softmax(e) - mos), e))
    assert rows["softmax_matched"][:2] == [str(softmax(solved)), f"d={solved}"]
    config["data"]["vocab_size"] = 20000
    path.write_text(yaml.safe_dump(config))
    # found when the config is read (the softmax_matched arm is solved there), naming the file
    message = (rf"^{re.escape(str(path))}: config key data.vocab_size: 20000 must be between 2 and the "
               r"corpus's 10,000 words$")
    with pytest.raises(AuditError, match=message):
        main([str(path)])
