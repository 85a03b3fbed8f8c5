"""Reading by lookup ids: paging with peek_range, remove_through, measure_range."""

from __future__ import annotations

import dataclasses

import pytest
from client_kit import run_call

from qmgr.client import ConnectionLost, InvalidArgument, NotSupported, QueueNotFound, RangeInfo
from qmgr.client.calls import messages
from wire import MessageProperties
from wire import client as cf

MESSAGE = cf.QueuedMessage(
    queue="q", lookup_id=0, arrived_time=0.0, message=MessageProperties(destination="q")
)


def page(*lookup_ids: int) -> cf.MessageList:
    return cf.MessageList(
        messages=tuple(dataclasses.replace(MESSAGE, lookup_id=n) for n in lookup_ids)
    )


def test_peek_range_asks_until_the_queue_has_no_more() -> None:
    run = run_call(messages.peek_range, "q", 10, 5, answers=[page(11, 12, 13), page()])
    assert run.requests == [
        cf.PeekRange(queue="q", after=10, max_count=5),
        cf.PeekRange(queue="q", after=13, max_count=2),
    ]
    assert [m.lookup_id for m in run.result] == [11, 12, 13]


def test_peek_range_stops_at_max_without_asking_again() -> None:
    run = run_call(messages.peek_range, "q", 0, 3, answers=[page(11, 12), page(13)])
    assert [r.max_count for r in run.requests] == [3, 1]  # type: ignore[attr-defined]
    assert [m.lookup_id for m in run.result] == [11, 12, 13]
    assert run_call(messages.peek_range, "q", 0, 0).requests == []


def test_peek_range_asks_at_most_a_u32_of_messages_at_a_time() -> None:
    # A page holds about 4 MB of messages: max over 2**32 - 1 is no limit, not an error.
    run = run_call(messages.peek_range, "q", 0, 2**40, answers=[page(11), page()])
    assert [r.max_count for r in run.requests] == [2**32 - 1, 2**32 - 1]  # type: ignore[attr-defined]
    with pytest.raises(InvalidArgument, match=r"after must be 0\.\.18446744073709551615"):
        run_call(messages.peek_range, "q", 2**64, 10)


def test_measure_range_names_a_number_out_of_range() -> None:
    with pytest.raises(InvalidArgument, match=r"max_count must be 0\.\.4294967295, not 4294967296"):
        run_call(messages.measure_range, "q", 0, 2**32)


def test_peek_range_refuses_another_reply() -> None:
    with pytest.raises(ConnectionLost, match="not MessageList"):
        run_call(messages.peek_range, "q", 0, 10, answers=[cf.NoMessage()])
    with pytest.raises(QueueNotFound):
        run_call(messages.peek_range, "q", 0, 10, answers=[QueueNotFound("no 'q'")])


def test_remove_through() -> None:
    run = run_call(messages.remove_through, "q", 9, answers=[cf.Ok(value=4)])
    assert (run.requests, run.result) == ([cf.RemoveThrough(queue="q", lookup_id=9)], 4)
    with pytest.raises(InvalidArgument, match="cannot send"):
        run_call(messages.remove_through, "q", -1)


def test_measure_range() -> None:
    answer = cf.RangeInfo(queue_id=7, count=2, last=9)
    run = run_call(messages.measure_range, "q", 4, 2, answers=[answer])
    assert run.requests == [cf.MeasureRange(queue="q", after=4, max_count=2)]
    assert run.result == RangeInfo(queue_id=7, count=2, last=9)
    with pytest.raises(ConnectionLost, match="not RangeInfo"):
        run_call(messages.measure_range, "q", 0, 0, answers=[cf.NoMessage()])


@pytest.mark.parametrize(
    ("call", "args", "what"),
    [
        (messages.remove_through, ("q", 1), "remove_through()"),
        (messages.measure_range, ("q", 0, 0), "measure_range()"),
    ],
)
def test_ranges_need_protocol_version_3(call: object, args: tuple[object, ...], what: str) -> None:
    with pytest.raises(NotSupported, match="speaks version 2") as caught:
        run_call(call, *args, version=2)  # type: ignore[arg-type]
    assert str(caught.value).startswith(f"{what} needs a queue manager")
    assert "measure_range()" in str(caught.value)  # what upgrading gives
