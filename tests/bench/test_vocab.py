"""audit/bench/vocab.py: every head's spectrum, argmax and gradient-share seconds at a BPE V,
beside the evaluate job's planned budget for the same run settings."""

from pathlib import Path

import pytest
import yaml

from audit.bench import picks, vocab
from audit.config import check_study, run_settings
from audit.plan.resources import evaluate_minutes

REPO = Path(__file__).resolve().parents[2]


def planned_seconds(head: str, V: int, d: int, contexts: int) -> int:
    """60 x evaluate_minutes of configs/smoke.yaml's run of ``head`` made a BPE study of V tokens, built here."""
    raw = yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text())
    raw["data"].update(tokenizer="bpe", vocab_size=V)
    raw["model"]["emb_size"] = d
    raw["train"].update(device="cpu", threads=1)
    raw["evaluate"]["contexts"] = contexts
    raw["heads"] = [{"name": head}]
    for key in ("comparisons", "correlations"):
        raw.pop(key)
    return 60 * evaluate_minutes(run_settings(check_study(raw, "test"), "ptb", head, 0))


def test_every_head_is_timed_against_its_planned_budget(capsys):
    from audit.evaluate.gradient_share import pre_map
    from audit.model.heads import HeadSpec, build_head, head_class
    import torch

    rc = vocab.main(["--vocab", "300", "--emb-size", "8", "--contexts", "20"])
    out = capsys.readouterr().out
    assert "V = 300" in out and "untrained" in out and "threads 1" in out
    table = [line.strip("|").split("|") for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    heads = picks.standalone_heads()
    assert [row[0].strip() for row in table] == heads
    for row in table:
        head, spectrum, argmax, share, total, budget, within = (cell.strip() for cell in row)
        # "-" exactly where the evaluation measures no gradient share (a head without pre-map logits)
        embedding = torch.nn.Embedding(300, 8)
        built = build_head(head, HeadSpec(d_in=8, embedding=embedding, options=dict(head_class(head).defaults or {})))
        assert (share == "-") == (pre_map(built, 8) is None)
        parts = [float(spectrum), float(argmax)] + ([] if share == "-" else [float(share)])
        assert all(p >= 0 for p in parts)   # a pass at V = 300 may print 0.0
        assert float(total) == pytest.approx(sum(parts), abs=0.16)   # each printed to 0.1
        assert int(budget) == planned_seconds(head, 300, 8, 20)
        assert within == ("yes" if float(total) <= int(budget) else "NO")
    assert rc == (0 if all(row[6].strip() == "yes" for row in table) else 1)


def test_registered_and_listed():
    from audit import bench

    assert bench.BENCHMARKS["vocab"] == "audit.bench.vocab"
    assert "``vocab``" in bench.__doc__
