"""audit.train.schedule: warmup then cosine, against values worked out by hand."""

import math

import pytest

from audit.train.schedule import warmup_cosine


def test_warmup_is_linear_and_never_zero():
    assert [warmup_cosine(s, 4, 100) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]


@pytest.mark.parametrize("step, expected", [(10, 1.0), (55, 0.5), (100, 0.0), (250, 0.0),
                                            (32.5, 0.5 * (1 + math.cos(math.pi / 4)))])
def test_cosine_after_warmup(step, expected):
    # warmup 10, total 100: the decay spans steps 10 .. 100
    assert warmup_cosine(step, 10, 100) == pytest.approx(expected, abs=1e-12)


def test_no_warmup_starts_at_one():
    assert warmup_cosine(0, 0, 10) == 1.0 and warmup_cosine(5, 0, 10) == pytest.approx(0.5)
