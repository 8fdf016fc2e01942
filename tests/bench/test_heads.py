"""The head benchmark (audit.bench.heads) runs every head and reports ratios to softmax."""

import pytest

from audit.bench.heads import DEFAULT_HEADS, bench, format_table, main
from audit.errors import AuditError


def test_bench_times_every_head_and_formats_ratios():
    times = bench(["mos", "plif"], T=3, B=2, d=8, V=50, reps=2, warmup=1)
    assert list(times) == ["softmax", "mos", "plif"]  # softmax first: the reference
    assert all(len(v) == 2 and min(v) >= 0 for v in times.values())
    table = format_table({"softmax": [1.0, 1.0], "plif": [1.3, 1.3], "mos": [2.0], "mixtape": [1.5]})
    rows = {line.split()[0]: line for line in table.splitlines()[1:]}
    assert "1.300" in rows["plif"] and "MISSED" in rows["plif"]
    assert "< mos: ok" in rows["mixtape"]


def test_bench_cli_small_shape(capsys):
    assert main(["--T", "2", "--B", "2", "--d", "8", "--V", "40", "--reps", "1", "--warmup", "0",
                 "--heads", ",".join(DEFAULT_HEADS)]) == 0
    out = capsys.readouterr().out
    assert all(f"\n{name} " in out for name in DEFAULT_HEADS)


def test_bench_unknown_head():
    with pytest.raises(AuditError, match="unknown head"):
        bench(["nope"], T=2, B=2, d=4, V=10, reps=1)
