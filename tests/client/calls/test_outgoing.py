"""Outgoing-queue calls: ListOutgoing and the three ControlOutgoing actions."""

from __future__ import annotations

import pytest
from client_kit import run_call
from wire_samples import ORDERS, OUTGOING_INFO

from qmgr.client import ConnectionLost, InvalidArgument, OutgoingInfo
from qmgr.client._common import OUTGOING_PAUSE, OUTGOING_PURGE, OUTGOING_RESUME
from qmgr.client.calls import outgoing
from wire import client as cf

INFO = OUTGOING_INFO


def test_outgoing_lists_every_queue() -> None:
    run = run_call(outgoing.outgoing, answers=[cf.OutgoingList(outgoing=(INFO, INFO))])
    assert run.requests == [cf.ListOutgoing()]
    assert run.result == [OutgoingInfo.from_wire(INFO)] * 2


@pytest.mark.parametrize(
    ("call", "action", "result"),
    [
        (outgoing.pause_outgoing, OUTGOING_PAUSE, OutgoingInfo.from_wire(INFO)),
        (outgoing.resume_outgoing, OUTGOING_RESUME, OutgoingInfo.from_wire(INFO)),
        (outgoing.purge_outgoing, OUTGOING_PURGE, 12),
    ],
)
def test_each_control_is_one_action(call: object, action: int, result: object) -> None:
    answer = cf.OutgoingList(outgoing=(INFO,), purged=12)
    run = run_call(call, ORDERS, answers=[answer])  # type: ignore[arg-type]
    assert run.requests == [cf.ControlOutgoing(action=action, destination=ORDERS)]
    assert run.result == result


def test_a_control_answered_with_other_than_one_queue_is_a_protocol_error() -> None:
    for count in (0, 2):
        answer = cf.OutgoingList(outgoing=(INFO,) * count)
        with pytest.raises(ConnectionLost, match=f"answered with {count} outgoing queues, not 1"):
            run_call(outgoing.pause_outgoing, ORDERS, answers=[answer])
    with pytest.raises(InvalidArgument, match="cannot send this request"):
        run_call(outgoing.pause_outgoing, "\ud800")
