"""A client's repeated warnings at a bounded rate (``qmgr.server.http.repeats``)."""

from __future__ import annotations

from qmgr.server.http.repeats import Repeats


def test_the_first_is_logged_then_one_a_period_with_the_number_passed_over() -> None:
    repeats = Repeats(every=60.0)
    assert repeats.take("10.0.0.1", 0.0) == 0
    assert [repeats.take("10.0.0.1", t) for t in (1.0, 2.0, 59.9)] == [None, None, None]
    assert repeats.take("10.0.0.2", 30.0) == 0  # each peer on its own
    assert repeats.take("10.0.0.1", 60.0) == 3
    assert repeats.take("10.0.0.1", 61.0) is None
    assert repeats.take("10.0.0.1", 500.0) == 1


def test_it_keeps_a_bounded_number_of_kinds_forgetting_the_least_recent() -> None:
    repeats = Repeats(every=60.0, kinds=2)
    assert repeats.take("a", 0.0) == 0
    assert repeats.take("b", 0.0) == 0
    assert repeats.take("a", 1.0) is None  # "a" is the most recent now
    assert repeats.take("c", 2.0) == 0  # "b" is forgotten
    assert len(repeats) == 2
    assert repeats.take("b", 3.0) == 0  # a first warning again
    assert repeats.take("c", 4.0) is None
