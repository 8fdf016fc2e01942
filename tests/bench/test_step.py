"""The step benchmark (audit.bench.step): ours and the plain nn.LSTM loop, side by side."""

from audit.bench import step


def test_tiny_step_bench_prints_both_loops(ptb_corpus, capsys):
    assert step.main(["--corpus", str(ptb_corpus), "--tiny", "--steps", "3", "--reps", "1", "--threads", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in out[2:]}
    assert set(rows) == {"ours", "plain"}
    assert float(rows["ours"][1]) > 0 and float(rows["plain"][1]) > 0      # wall ms/step, measured


def test_table_is_the_median_window_per_step_and_per_epoch():
    """Hand-worked: medians of three windows; 929,589 / (20 x 35) = 1,327.98 steps per PTB epoch."""
    times = {"ours": [(0.004, 0.003, 0.001), (0.002, 0.0015, 0.0002), (0.003, 0.002, 0.0004)],
             "plain": [(0.0015, 0.001, 0.0001), (0.0025, 0.002, 0.0003), (0.001, 0.0009, 0.0)]}
    lines = step.format_table(times).splitlines()
    assert lines[1].split() == ["ours", "3.00", "2.00", "0.40", "4.0", "2.000"]     # 3 ms x 1,328 = 3.98 s
    assert lines[2].split() == ["plain", "1.50", "1.00", "0.10", "2.0", "1.000"]


def test_plain_model_is_tied_and_the_anchor_settings_match_the_issue():
    import torch

    model = step.PlainModel(50, dict(step.ANCHOR, emb=8, hidden=8))
    assert model.decoder.weight is model.encoder.weight
    s = step.anchor_settings(2, "cpu", 10)
    assert s["model"]["wdrop"] == 0 and s["model"]["n_layers"] == 2 and s["model"]["emb_size"] == 200
    assert (s["train"]["alpha"], s["train"]["beta"], s["train"]["asgd"], s["train"]["variable_bptt"]) == (0, 0, "none", False)
    assert s["train"]["epoch_tokens"] == 10 * 20 * 35 and s["train"]["clip"] == 0.25
    assert isinstance(model(torch.zeros(3, 2, dtype=torch.long), None)[0], torch.Tensor)
