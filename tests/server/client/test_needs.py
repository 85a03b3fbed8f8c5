"""The needs a request declares: which queue and which right a queue right names."""

from __future__ import annotations

from qmgr.core.permissions import Right
from qmgr.server.client.needs import MOVE_RIGHTS, NEEDS, OPEN, QueueRight
from wire import client as cf


def test_a_queue_right_names_the_queue_of_its_field() -> None:
    need = QueueRight("queue", Right.RECEIVE)
    assert need.of(cf.RemoveThrough(queue="a;poison", lookup_id=3)) == ("a;poison", Right.RECEIVE)


def test_a_peek_needs_the_peek_right_where_one_is_declared() -> None:
    need = QueueRight("queue", Right.RECEIVE, peek=Right.PEEK)
    assert need.of(cf.Receive(queue="q")) == ("q", Right.RECEIVE)
    assert need.of(cf.Receive(queue="q", peek=True)) == ("q", Right.PEEK)
    without = QueueRight("queue", Right.RECEIVE)
    assert without.of(cf.Receive(queue="q", peek=True)) == ("q", Right.RECEIVE)


def test_the_needs_are_values() -> None:
    assert QueueRight("queue", Right.PEEK) == QueueRight("queue", Right.PEEK)
    assert isinstance(OPEN, NEEDS)
    assert isinstance(MOVE_RIGHTS, NEEDS)
    assert not isinstance(Right.PEEK, NEEDS)
