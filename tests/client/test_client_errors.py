"""Error replies become typed SDK exceptions; values convert from the wire."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

import qmgr.client as sdk
from qmgr.client import Delivery, Message, QueueError, QueueInfo, QueueKind, error_from_reply
from wire import MessageProperties
from wire import client_frames as cf


@pytest.mark.parametrize("code", list(cf.ErrorCode))
def test_every_error_code_has_its_own_class(code: cf.ErrorCode) -> None:
    error = error_from_reply(int(code), "what was wrong")
    assert type(error) is not QueueError
    assert isinstance(error, QueueError)
    assert error.code is code
    assert error.message == str(error) == "what was wrong"
    assert type(error).__name__ in sdk.__all__


def test_unknown_code_still_says_what_was_wrong() -> None:
    error = error_from_reply(999, "new in a later version")
    assert type(error) is QueueError
    assert error.code is None
    assert "new in a later version" in error.message
    assert "999" in error.message


def test_connection_lost_is_client_side() -> None:
    assert sdk.ConnectionLost("x").code is None
    assert issubclass(sdk.ConnectionLost, QueueError)


def test_public_names() -> None:
    for name in sdk.__all__:
        assert getattr(sdk, name) is not None
    assert sdk.open_client.__name__ == "open_client"


def test_message_from_wire() -> None:
    qm_guid = uuid.UUID(int=5)
    properties = MessageProperties(
        label="l",
        body=b"b",
        app_specific=1,
        priority=2,
        delivery=0,
        journal=1,
        response_queue="r",
        time_to_be_received=30,
        source_qm=qm_guid,
        ordinal=1,
        destination="q",
    )
    data = cf.QueuedMessage(queue="q", lookup_id=3, arrived_time=1.25, message=properties)
    message = Message.from_wire(data)
    assert message.queue == "q"
    assert message.lookup_id == 3
    assert message.body == b"b"
    assert message.label == "l"
    assert message.app_specific == 1
    assert message.priority == 2
    assert message.response_queue == "r"
    assert message.correlation_id is None
    assert message.delivery is Delivery.EXPRESS
    assert message.time_to_reach_queue is None
    assert message.time_to_be_received == 30
    assert message.sent_time == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    assert message.arrived_time.timestamp() == 1.25
    assert message.id == f"{{{qm_guid}}}\\1"
    assert message.properties is properties


def test_queue_info_from_wire() -> None:
    info = QueueInfo.from_wire(
        cf.QueueInfo(
            name="system$;deadxact",
            format_name=".\\system$;deadxact",
            kind=3,
            transactional=True,
            journal=False,
            quota=None,
            depth=0,
            bytes=0,
            locked=0,
            created_at=0.0,
        )
    )
    assert info.kind is QueueKind.DEADXACT
    assert info.created_at.tzinfo is dt.UTC
