"""The AWD-LSTM body: embedding noise of the fair comparison, DropConnect without reassignment."""

import torch

from audit.model.language_model import LanguageModel, ModelConfig


def _model(**overrides):
    settings = dict(vocab_size=50, emb_size=64, hidden_size=32, n_layers=2, dropoute=0.0, dropouti=0.0,
                    dropouth=0.0, dropout=0.0, wdrop=0.0)
    cfg = ModelConfig.of(**{**settings, **overrides})
    torch.manual_seed(0)
    return LanguageModel(cfg)


def _first_layer_input(model, words):
    seen = []
    handle = model.body.rnns[0].register_forward_hook(lambda module, args, out: seen.append(args[0].detach()))
    model(words, model.init_hidden(words.size(1)))
    handle.remove()
    return seen[0]


def test_embedding_noise_has_its_sigma_in_training_and_is_off_in_evaluation():
    model = _model(emb_noise=0.15)
    words = torch.randint(0, 50, (50, 8), generator=torch.Generator().manual_seed(1))
    clean = model.encoder(words).detach()
    torch.manual_seed(2)
    noise = _first_layer_input(model.train(), words) - clean
    assert abs(noise.std().item() - 0.15) < 0.15 * 0.03       # 25,600 draws: SE of the SD ~ 0.5%
    assert abs(noise.mean().item()) < 0.005
    assert torch.equal(_first_layer_input(model.eval(), words), clean)
    assert torch.equal(_first_layer_input(_model().train(), words), clean)   # sigma 0: no noise at all


def test_dropconnect_leaves_the_module_parameters_in_place():
    model = _model(wdrop=0.5).train()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    words = torch.randint(0, 50, (5, 2), generator=torch.Generator().manual_seed(3))
    model(words, model.init_hidden(2))[0].sum().backward()
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), before[name]), name
    assert model.body.rnns[0].lstm.weight_hh_l0.grad is not None   # gradients reach the undropped weights


def test_checkpoints_from_before_bodies_load():
    """Weights saved when the LSTM layers were the model's own ``rnns`` load under ``body.rnns``."""
    cfg = ModelConfig.of(vocab_size=30, emb_size=4, hidden_size=6, n_layers=2)
    torch.manual_seed(0)
    source = LanguageModel(cfg)
    old = {k.replace("body.rnns.", "rnns."): v for k, v in source.state_dict().items()}
    assert any(k.startswith("rnns.") for k in old) and not any(k.startswith("body.") for k in old)
    torch.manual_seed(1)
    target = LanguageModel(cfg)
    target.load_state_dict(old)
    for key, value in source.state_dict().items():
        assert torch.equal(target.state_dict()[key], value)


def test_given_targets_the_model_returns_log_p_there_for_heads_with_a_shortcut():
    words = torch.randint(0, 50, (6, 3), generator=torch.Generator().manual_seed(4))
    targets = torch.randint(0, 50, (6, 3), generator=torch.Generator().manual_seed(5))
    for head, options, shortcut in (("mos", {"experts": 2, "dropoutl": 0.0}, True), ("softmax", {}, False)):
        model = _model(head=head, head_options=options, last_size=64).double().train()
        full = model(words, model.init_hidden(3))[0]
        out = model(words, model.init_hidden(3), targets)[0]
        if shortcut:     # MoS: the mixture at the targets, (T, B)
            torch.testing.assert_close(out, full.gather(-1, targets.unsqueeze(-1)).squeeze(-1), rtol=0, atol=1e-12)
        else:            # the full log-P, (T, B, V), as without targets
            assert torch.equal(out, full)
