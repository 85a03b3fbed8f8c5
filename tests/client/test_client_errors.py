"""Error replies become typed SDK exceptions; values convert from the wire."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

import qmgr.client as sdk
from qmgr.client import (
    Delivery,
    Message,
    QueueError,
    QueueInfo,
    QueueKind,
    Status,
    error_from_reply,
)
from wire import MessageProperties
from wire import client_frames as cf

#: What every error code of the protocol raises, spelled out.
EXPECTED_CLASS: dict[cf.ErrorCode, type[QueueError]] = {
    cf.ErrorCode.BAD_REQUEST: sdk.ProtocolViolation,
    cf.ErrorCode.UNSUPPORTED_VERSION: sdk.UnsupportedVersion,
    cf.ErrorCode.QUEUE_NOT_FOUND: sdk.QueueNotFound,
    cf.ErrorCode.QUEUE_EXISTS: sdk.QueueExists,
    cf.ErrorCode.INVALID_NAME: sdk.InvalidName,
    cf.ErrorCode.MESSAGE_TOO_LARGE: sdk.MessageTooLarge,
    cf.ErrorCode.QUOTA_EXCEEDED: sdk.QuotaExceeded,
    cf.ErrorCode.TRANSACTION_USAGE: sdk.TransactionUsageError,
    cf.ErrorCode.TRANSACTION_NOT_FOUND: sdk.TransactionNotFound,
    cf.ErrorCode.TRANSACTION_ABORTED: sdk.TransactionAborted,
    cf.ErrorCode.TRANSACTION_TOO_LARGE: sdk.TransactionTooLarge,
    cf.ErrorCode.STORE_FULL: sdk.StoreFull,
    cf.ErrorCode.ACCESS_DENIED: sdk.AccessDenied,
    cf.ErrorCode.INVALID_ARGUMENT: sdk.InvalidArgument,
    cf.ErrorCode.NOT_SUPPORTED: sdk.NotSupported,
    cf.ErrorCode.SHUTTING_DOWN: sdk.ShuttingDown,
    cf.ErrorCode.INTERNAL: sdk.InternalError,
    cf.ErrorCode.LIMIT_EXCEEDED: sdk.LimitExceeded,
    cf.ErrorCode.TRANSACTION_COMMITTED: sdk.TransactionCommitted,
}


def test_the_table_names_every_code_once() -> None:
    assert set(EXPECTED_CLASS) == set(cf.ErrorCode)
    assert len(set(EXPECTED_CLASS.values())) == len(EXPECTED_CLASS)


@pytest.mark.parametrize(
    ("code", "cls"), list(EXPECTED_CLASS.items()), ids=[code.name for code in EXPECTED_CLASS]
)
def test_every_error_code_raises_its_class(code: cf.ErrorCode, cls: type[QueueError]) -> None:
    error = error_from_reply(int(code), "what was wrong")
    assert type(error) is cls
    assert cls.code is code
    assert error.code is code
    assert error.message == str(error) == "what was wrong"
    assert cls.__name__ in sdk.__all__
    assert getattr(sdk, cls.__name__) is cls
    assert issubclass(cls, QueueError)


def test_limit_exceeded_is_its_own_error() -> None:
    error = error_from_reply(18, "too many connections")
    assert isinstance(error, sdk.LimitExceeded)
    assert not isinstance(error, sdk.InternalError | sdk.QuotaExceeded | sdk.StoreFull)
    assert error.code is cf.ErrorCode.LIMIT_EXCEEDED
    with pytest.raises(sdk.LimitExceeded, match="too many connections"):
        raise error


@pytest.mark.parametrize("code", [0, 20, 999, 0xFFFF])
def test_unknown_code_still_says_what_was_wrong(code: int) -> None:
    error = error_from_reply(code, "new in a later version")
    assert type(error) is QueueError
    assert error.code is None
    assert "new in a later version" in error.message
    assert str(code) in error.message


def test_connection_lost_is_client_side() -> None:
    assert sdk.ConnectionLost("x").code is None
    assert issubclass(sdk.ConnectionLost, QueueError)
    assert QueueError("x").code is None


def test_public_names() -> None:
    for name in sdk.__all__:
        assert getattr(sdk, name) is not None
    assert sdk.open_client.__name__ == "open_client"


# --------------------------------------------------------------------------
# The SDK's views of wire values
# --------------------------------------------------------------------------

QM_GUID = uuid.UUID(int=5)
PROPERTIES = MessageProperties(
    label="l",
    body="h\u00e9".encode(),
    correlation_id=bytes(range(20)),
    app_specific=1,
    priority=2,
    delivery=0,
    acknowledge=0x0E,
    journal=1,
    admin_queue="a",
    response_queue="r",
    time_to_reach_queue=0xFFFFFFFF,
    time_to_be_received=30,
    message_class=0x100,
    sent_time=1_700_000_000.5,
    source_qm=QM_GUID,
    ordinal=1,
    transactional=True,
    destination="DIRECT=OS:.\\private$\\q",
)


def _message(properties: MessageProperties = PROPERTIES, lookup_id: int = 3) -> Message:
    return Message.from_wire(
        cf.QueuedMessage(queue="q", lookup_id=lookup_id, arrived_time=1.25, message=properties)
    )


def test_message_from_wire() -> None:
    message = _message()
    assert message.queue == "q"
    assert message.lookup_id == 3
    assert message.properties is PROPERTIES
    assert message.body == "h\u00e9".encode()
    assert message.text == "h\u00e9"
    assert message.label == "l"
    assert message.id == f"{{{QM_GUID}}}\\1"
    assert message.correlation_id == bytes(range(20))
    assert message.app_specific == 1
    assert message.priority == 2
    assert message.message_class == 0x100
    assert message.delivery is Delivery.EXPRESS
    assert message.acknowledge == 0x0E
    assert message.journal == 1
    assert message.admin_queue == "a"
    assert message.response_queue == "r"
    assert message.time_to_reach_queue is None
    assert message.time_to_be_received == 30
    assert message.transactional is True
    assert message.destination == "DIRECT=OS:.\\private$\\q"
    assert message.source_qm == QM_GUID
    assert message.sent_time == dt.datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=dt.UTC)
    assert message.arrived_time == dt.datetime(1970, 1, 1, 0, 0, 1, 250000, tzinfo=dt.UTC)


def test_message_defaults_read_as_python_values() -> None:
    message = _message(MessageProperties(body=b"\xff"))
    assert message.correlation_id is None
    assert message.time_to_reach_queue is None
    assert message.time_to_be_received is None
    assert message.delivery is Delivery.RECOVERABLE
    assert message.sent_time == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    assert message.source_qm == uuid.UUID(int=0)
    assert message.transactional is False
    assert message.admin_queue == message.response_queue == message.label == ""
    with pytest.raises(UnicodeDecodeError):
        _ = message.text


def test_message_from_a_decoded_frame() -> None:
    """A message read from a reply frame (a view over the frame) reads the same."""
    reply = cf.MessageReply(
        message=cf.QueuedMessage(queue="q", lookup_id=3, arrived_time=1.25, message=PROPERTIES)
    )
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(cf.encode_frame(1, reply))
    frame = decoder.next_frame()
    assert frame is not None
    assert isinstance(frame.value, cf.MessageReply)
    message = Message.from_wire(frame.value.message)
    assert message == _message()
    assert (message.body, message.label, message.id) == (PROPERTIES.body, "l", _message().id)


def test_an_unknown_delivery_value_reads_as_recoverable() -> None:
    assert _message(MessageProperties(delivery=7)).delivery is Delivery.RECOVERABLE


def test_message_equality_and_repr() -> None:
    assert _message() == _message()
    assert hash(_message()) == hash(_message())
    assert _message() != _message(lookup_id=4)
    assert _message() != _message(PROPERTIES.replace(body=b"other"))
    assert _message() != PROPERTIES
    big = _message(PROPERTIES.replace(body=b"x" * 1000))
    text = repr(big)
    assert "lookup_id=3" in text
    assert "1000 bytes" in text
    assert len(text) < 400


def test_queue_info_from_wire() -> None:
    data = cf.QueueInfo(
        name="system$;deadxact",
        format_name=".\\system$;deadxact",
        kind=3,
        transactional=True,
        journal=False,
        quota=None,
        depth=4,
        bytes=40,
        locked=1,
        created_at=0.0,
    )
    info = QueueInfo.from_wire(data)
    assert info.kind is QueueKind.DEADXACT
    assert info.created_at == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    assert (info.name, info.format_name) == (data.name, data.format_name)
    assert (info.transactional, info.journal, info.quota) == (True, False, None)
    assert (info.depth, info.bytes, info.locked) == (4, 40, 1)
    kinds = {QueueInfo.from_wire(_replace_kind(data, k)).kind for k in cf.QueueKind}
    assert kinds == set(QueueKind)
    assert QueueInfo.from_wire(_replace_kind(data, 99)).kind is QueueKind.NORMAL


def _replace_kind(data: cf.QueueInfo, kind: int) -> cf.QueueInfo:
    return cf.QueueInfo(
        name=data.name,
        format_name=data.format_name,
        kind=kind,
        transactional=data.transactional,
        journal=data.journal,
        quota=7,
        depth=data.depth,
        bytes=data.bytes,
        locked=data.locked,
        created_at=data.created_at,
    )


def test_status_from_wire() -> None:
    queue = cf.QueueInfo(
        name="q",
        format_name=".\\private$\\q",
        kind=0,
        transactional=False,
        journal=True,
        quota=100,
        depth=0,
        bytes=0,
        locked=0,
        created_at=10.0,
    )
    status = Status.from_wire(
        cf.StatusInfo(
            qm_name="qm",
            qm_guid=QM_GUID,
            server_version="1.2",
            started_at=20.0,
            connections=2,
            open_transactions=1,
            commits=9,
            aborts=3,
            batches=5,
            uncommitted_bytes=64,
            erasing=1,
            queues=(queue,),
        )
    )
    assert (status.qm_name, status.qm_guid, status.server_version) == ("qm", QM_GUID, "1.2")
    assert status.started_at == dt.datetime(1970, 1, 1, 0, 0, 20, tzinfo=dt.UTC)
    assert (status.connections, status.open_transactions) == (2, 1)
    assert (status.commits, status.aborts, status.batches) == (9, 3, 5)
    assert (status.uncommitted_bytes, status.erasing) == (64, 1)
    assert status.queues == (QueueInfo.from_wire(queue),)
    assert status.queues[0].quota == 100
    assert status.uptime > dt.timedelta(days=365)
