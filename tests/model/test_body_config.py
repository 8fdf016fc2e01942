"""A config dataclass per body (audit.model.bodies ``Config``, ``body_config``) under the model's
``ModelConfig``: each body reads its own settings, the flat ``model`` section and the flat
checkpoint form stay as they were, and an outside body gets settings of its own (``body_options``)."""

import dataclasses
import textwrap

import pytest
import torch

from audit.config import check_study
from audit.errors import AuditError
from audit.model.bodies import AWDLSTMConfig, SectionConfig, TransformerConfig
from audit.model.language_model import MODEL_KEYS, LanguageModel, ModelConfig
from audit.model.params import count_params
from tests.helpers import lstm_softmax_formula, write_package

CONV = textwrap.dedent('''
    from dataclasses import dataclass

    import torch.nn as nn
    import torch.nn.functional as F


    @dataclass(frozen=True)
    class ConvConfig:
        emb_size: int = 8        # read from the model section
        kernel: int = 3          # its own: model.body_options.kernel
        dilation: int = 1        # its own, left at its default


    class CausalConv(nn.Module):
        """A causal convolution over the embedded ids, width ``kernel``."""

        Config = ConvConfig

        def __init__(self, cfg, embedding):
            super().__init__()
            self.cfg, self.embedding = cfg, embedding
            self.conv = nn.Conv1d(cfg.emb_size, cfg.emb_size, cfg.kernel, dilation=cfg.dilation)
            self.d_out = cfg.emb_size

        def init_hidden(self, batch_size):
            return None

        def forward(self, words, hidden):
            x = F.embedding(words, self.embedding.weight).permute(1, 2, 0)       # (B, d, T)
            pad = (self.cfg.kernel - 1) * self.cfg.dilation
            out = self.conv(F.pad(x, (pad, 0))).permute(2, 0, 1)                # (T, B, d)
            return out, out, hidden


    class PlainGRU(nn.Module):
        """No Config: reads the model section's settings as bodies did before configs."""

        def __init__(self, cfg, embedding):
            super().__init__()
            self.embedding, self.gru = embedding, nn.GRU(cfg.emb_size, cfg.hidden_size)
            self.d_out = cfg.hidden_size

        def init_hidden(self, batch_size):
            return self.embedding.weight.new_zeros(1, batch_size, self.d_out)

        def forward(self, words, hidden):
            out, hidden = self.gru(F.embedding(words, self.embedding.weight), hidden)
            return out, out, hidden
''')


@pytest.fixture
def bodies(tmp_path, monkeypatch):
    write_package(tmp_path, "cfgbodies", {"conv": CONV})
    monkeypatch.syspath_prepend(str(tmp_path))
    return "cfgbodies.conv"


def test_each_built_in_body_reads_its_own_config_and_none_of_the_others_keys():
    lstm = ModelConfig.of(vocab_size=40, emb_size=8, hidden_size=12, n_layers=2, wdrop=0.2, n_heads=3)
    assert type(lstm.body_config) is AWDLSTMConfig
    assert (lstm.body_config.hidden_size, lstm.body_config.wdrop, lstm.d_out) == (12, 0.2, 8)
    assert not hasattr(lstm.body_config, "n_heads") and not hasattr(lstm, "hidden_size")
    tf = ModelConfig.of(vocab_size=40, emb_size=8, hidden_size=32, n_layers=1, n_heads=2, body="transformer",
                        wdrop=0.2)
    assert type(tf.body_config) is TransformerConfig
    assert (tf.body_config.n_heads, tf.body_config.hidden_size) == (2, 32)
    assert not {"wdrop", "dropoute", "dropouth", "emb_noise"} & {f.name for f in dataclasses.fields(tf.body_config)}
    for cfg in (lstm, tf):   # the built body holds its config, the model the shared part
        model = LanguageModel(cfg)
        assert model.body.cfg is cfg.body_config and model.encoder.weight.shape == (40, 8)
    # the AWD-LSTM's count is its closed form at these sizes (its config reached the layers)
    assert count_params(lstm) == lstm_softmax_formula(40, 8, 12, layers=2)


def test_the_flat_form_round_trips_and_a_checkpoint_of_before_loads_the_same_model():
    cfg = ModelConfig.of(vocab_size=40, emb_size=8, hidden_size=12, n_layers=2, last_size=6, head="mos",
                         head_options={"experts": 2})
    assert ModelConfig.of(**cfg.to_dict()) == cfg
    # a checkpoint written with the flat ModelConfig held every body's key: the AWD-LSTM reads its own
    before = {**cfg.to_dict(), "n_heads": 4, "positions": "learned", "context_size": 128, "eval_stride": None}
    assert ModelConfig.of(**before) == cfg
    assert {k for k in cfg.to_dict()} <= MODEL_KEYS | {"vocab_size", "head", "head_options"}


def test_sizes_change_through_replace_and_d_stays_one_value():
    cfg = ModelConfig.of(vocab_size=40, emb_size=8, hidden_size=12, n_layers=2)
    wider = cfg.replace(emb_size=10, hidden_size=14)
    assert (wider.emb_size, wider.body_config.emb_size, wider.body_config.hidden_size) == (10, 10, 14)
    with pytest.raises(ValueError, match="ModelConfig.replace"):
        dataclasses.replace(cfg, emb_size=10)   # would give the body another d than the embedding


def test_an_outside_body_gets_its_config_from_the_section_and_body_options(bodies):
    path = f"{bodies}:CausalConv"
    cfg = ModelConfig.of(vocab_size=30, emb_size=6, hidden_size=99, body=path, body_options={"kernel": 2})
    assert (cfg.body_config.emb_size, cfg.body_config.kernel, cfg.body_config.dilation) == (6, 2, 1)
    assert ModelConfig.of(**cfg.to_dict()) == cfg          # its own fields travel in the flat form
    model = LanguageModel(cfg)
    assert model.body.conv.kernel_size == (2,)
    # 30 x 6 tied embedding, the decoder's bias, a width-2 convolution 6 -> 6
    assert count_params(cfg) == 30 * 6 + 30 + 6 * 6 * 2 + 6
    logp, *_ = model(torch.zeros(5, 2, dtype=torch.long), model.init_hidden(2))
    assert logp.shape == (5, 2, 30)


@pytest.mark.parametrize("options, message", [
    ({"kernal": 2}, "model.body_options.kernal: body '{path}' has no such setting (its Config: dilation, "
                    "emb_size, kernel)"),
    ({"emb_size": 4}, "model.body_options.emb_size: set model.emb_size itself"),
])
def test_a_body_option_the_body_does_not_declare_is_refused_by_name(bodies, options, message):
    path = f"{bodies}:CausalConv"
    with pytest.raises(AuditError) as err:
        ModelConfig.of(vocab_size=30, body=path, body_options=options)
    assert str(err.value) == message.format(path=path)


def test_an_outside_body_without_a_config_reads_every_body_setting(bodies):
    cfg = ModelConfig.of(vocab_size=30, emb_size=6, hidden_size=5, body=f"{bodies}:PlainGRU", head="mos",
                         head_options={"experts": 2})
    assert type(cfg.body_config) is SectionConfig
    assert (cfg.body_config.hidden_size, cfg.body_config.n_heads) == (5, 4)
    assert LanguageModel(cfg).body.gru.hidden_size == 5


def test_the_config_check_names_a_bad_body_option_and_refuses_options_on_a_built_in_body(bodies):
    study = {"study": "t", "seeds": [1], "model": {"emb_size": 6, "body": f"{bodies}:CausalConv",
                                                   "body_options": {"stride": 2}},
             "heads": [{"name": "softmax"}]}
    with pytest.raises(AuditError, match=r"^cfg.yaml: config key model.body_options.stride: body "):
        check_study(study, "cfg.yaml")
    study["model"]["body_options"] = {"kernel": 2}
    assert check_study(study, "cfg.yaml")["model"]["body_options"] == {"kernel": 2}
    built_in = {**study, "model": {"emb_size": 6, "body_options": {"kernel": 2}}}
    with pytest.raises(AuditError, match=r"^cfg.yaml: config key model.body_options: body 'awd_lstm' is built in"):
        check_study(built_in, "cfg.yaml")


def test_the_planner_counts_an_outside_body_at_its_body_options(bodies):
    from audit.plan.bodycost import outside_body_params
    from audit.schema import schema_defaults

    sizes = {**schema_defaults("model", unfilled=True), "emb_size": 6, "body": f"{bodies}:CausalConv"}
    # the convolution alone, 6 -> 6 of width k, and its bias: the body option reaches the count
    for kernel in (2, 4):
        assert outside_body_params({**sizes, "body_options": {"kernel": kernel}}, 30) == 6 * 6 * kernel + 6
