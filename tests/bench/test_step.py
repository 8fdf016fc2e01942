"""The step benchmark (audit.bench.step): ours and the plain nn.LSTM loop, side by side."""

from audit.bench import step


def test_tiny_step_bench_prints_both_loops(ptb_corpus, capsys):
    assert step.main(["--corpus", str(ptb_corpus), "--tiny", "--steps", "3", "--reps", "1", "--threads", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in out[2:]}
    assert set(rows) == {"ours", "plain"}
    assert float(rows["plain"][-1]) == 1.0 and float(rows["ours"][1]) > 0   # x plain, ms/step


def test_plain_model_is_tied_and_the_anchor_settings_match_the_issue():
    import torch

    model = step.PlainModel(50, dict(step.ANCHOR, emb=8, hidden=8))
    assert model.decoder.weight is model.encoder.weight
    s = step.anchor_settings(2, "cpu", 10)
    assert s["model"]["wdrop"] == 0 and s["model"]["n_layers"] == 2 and s["model"]["emb_size"] == 200
    assert (s["train"]["alpha"], s["train"]["beta"], s["train"]["asgd"], s["train"]["variable_bptt"]) == (0, 0, "none", False)
    assert s["train"]["epoch_tokens"] == 10 * 20 * 35 and s["train"]["clip"] == 0.25
    assert isinstance(model(torch.zeros(3, 2, dtype=torch.long), None)[0], torch.Tensor)
