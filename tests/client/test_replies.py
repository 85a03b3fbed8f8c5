"""Replies to values: the right kind converts, any other kind is a protocol error."""

from __future__ import annotations

import uuid

import pytest
from client_kit import status_info
from wire_samples import OUTGOING_INFO, QUEUE_INFO, QUEUED

from qmgr.client import ConnectionLost, Message, OutgoingInfo, QueueInfo, Resolution, Status
from qmgr.client import _replies as reply_values
from wire import client as cf

HELLO_OK = cf.HelloOk(version=1, qm_name="", qm_guid=uuid.UUID(int=0), server_version="")
OUTGOING = OUTGOING_INFO


def test_each_conversion() -> None:
    assert reply_values.ok_value(cf.Ok(value=5)) == 5
    assert reply_values.message_id(cf.Sent(message_id="m", queue="q", lookup_id=1)) == "m"
    assert reply_values.message_or_none(cf.MessageReply(message=QUEUED)) == Message.from_wire(
        QUEUED
    )
    assert reply_values.message_or_none(cf.NoMessage()) is None
    assert reply_values.queue_list(cf.QueueList(queues=(QUEUE_INFO,))) == [
        QueueInfo.from_wire(QUEUE_INFO)
    ]
    assert reply_values.status(status_info()) == Status.from_wire(status_info())
    assert reply_values.expect(cf.Ok(value=1), cf.Ok) == cf.Ok(value=1)


def test_outgoing_replies() -> None:
    listed = cf.OutgoingList(outgoing=(OUTGOING, OUTGOING), purged=0)
    assert reply_values.outgoing_list(listed) == [OutgoingInfo.from_wire(OUTGOING)] * 2
    assert reply_values.outgoing_list(cf.OutgoingList(outgoing=())) == []
    changed = cf.OutgoingList(outgoing=(OUTGOING,), purged=7)
    assert reply_values.outgoing_changed(changed) == (OutgoingInfo.from_wire(OUTGOING), 7)
    for count in (0, 2):
        with pytest.raises(ConnectionLost, match=f"answered with {count} outgoing queues, not 1"):
            reply_values.outgoing_changed(cf.OutgoingList(outgoing=(OUTGOING,) * count))


def test_resolutions() -> None:
    assert reply_values.resolutions(cf.Resolutions(outcomes=(1, 4)), 2) == [
        Resolution.COMMITTED,
        Resolution.ALREADY_ABORTED,
    ]
    with pytest.raises(ConnectionLost, match="protocol error"):
        reply_values.resolutions(cf.Resolutions(outcomes=(1,)), 2)
    with pytest.raises(ConnectionLost, match="protocol error"):
        reply_values.resolutions(cf.Resolutions(outcomes=(5,)), 1)


@pytest.mark.parametrize(
    ("convert", "wanted"),
    [
        (reply_values.ok_value, "Ok"),
        (reply_values.message_id, "Sent"),
        (reply_values.message_or_none, "MessageReply or NoMessage"),
        (reply_values.queue_list, "QueueList"),
        (reply_values.status, "StatusInfo"),
        (reply_values.outgoing_list, "OutgoingList"),
        (reply_values.outgoing_changed, "OutgoingList"),
        (lambda reply: reply_values.resolutions(reply, 1), "Resolutions"),
    ],
)
def test_the_wrong_kind_is_a_protocol_error(convert: object, wanted: str) -> None:
    with pytest.raises(ConnectionLost, match=f"protocol error: .* answered HelloOk, not {wanted}$"):
        convert(HELLO_OK)  # type: ignore[operator]
