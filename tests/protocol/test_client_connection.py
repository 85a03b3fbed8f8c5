"""The server side of a client connection as a sans-IO machine: bytes and ``now`` in,
events and framed replies out. No sockets, no trio, no store.

Covered: the Hello and version negotiation, which requests each version may
make, authentication (a principal from the transport, a token, "authenticate
first"), refusals while stopping, malformed bytes, the reservation of large
frames, what is refused from a frame's header alone before the connection is
admitted (a first frame other than Hello, a request before authenticating, a
frame over ``MAX_UNADMITTED_BODY``), the deadlines and their reasons, the
outbox, and with hypothesis: frames fed a byte at a time decide the same as
fed whole, and garbage never raises.
"""

from __future__ import annotations

import itertools
import struct
import uuid
from collections.abc import Iterable
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reply_kit import long_queue_list

from qmgr.protocol.client_connection import (
    AUTHENTICATE_FIRST,
    LARGE_FRAME,
    LARGEST_HELLO_BODY,
    MAX_UNADMITTED_BODY,
    SERVED_REQUESTS,
    SHUTTING_DOWN,
    ClientConnection,
    ConnectionSettings,
    newer_field,
    version_needed,
    versions_needed,
)
from qmgr.protocol.client_events import (
    CLOSED,
    NEED_DATA,
    Authenticated,
    Closed,
    Event,
    Greeted,
    Refused,
    ReleaseFrame,
    Request,
    ReserveFrame,
    TokenOffered,
    Violation,
    ViolationKind,
)
from wire import client as cf
from wire.text_fields import MAX_TEXT_BYTES

GUID = uuid.UUID(int=42)
SETTINGS = ConnectionSettings(
    qm_name="qm",
    qm_guid=GUID,
    server_version="9.9",
    hello_timeout=10.0,
    frame_timeout=30.0,
    idle_timeout=600.0,
    large_frame=1024,
    flush_bytes=4096,
)
REQUIRED = ConnectionSettings(qm_name="qm", qm_guid=GUID, server_version="9.9", auth_required=True)

#: One request of every class a server runs.
SAMPLES: list[cf.ClientRequest] = [
    cf.CreateQueue(name="q"),
    cf.DeleteQueue(name="q"),
    cf.PurgeQueue(name="q"),
    cf.ListQueues(),
    cf.GetStatus(),
    cf.Begin(tx_id=1),
    cf.Commit(tx_id=1),
    cf.Abort(tx_id=1),
    cf.Send(message=cf.MessageProperties(destination="q", body=b"x")),
    cf.Receive(queue="q"),
    cf.PeekRange(queue="q"),
    cf.ListOutgoing(),
    cf.ControlOutgoing(action=1, destination="d"),
    cf.BeginGlobal(tx_id=1, xid="x"),
    cf.Prepare(tx_id=1),
    cf.Resolve(commit=True, xids=("x",)),
    cf.ListTransactions(),
    cf.RemoveThrough(queue="q", lookup_id=1),
    cf.MeasureRange(queue="q"),
    cf.SetQueueProperties(name="q", retry_count=1),
    cf.MoveMessages(source="q;poison", target="q"),
    cf.GetPermissions(queue="q"),
    cf.ChangePermissions(queue="q", entry="bob", grant=1),
    cf.TraceMessage(message_id="{00000000-0000-0000-0000-000000000001}\\1"),
    cf.GetRouting(destination="10.0.0.5"),
    cf.CancelReceive(request_id=3),
    cf.CreateList(name="l", targets=("q",)),
    cf.ChangeList(name="l"),
    cf.DeleteList(name="l"),
    cf.GetLists(),
]


def frames(*values: cf.FrameValue, first_id: int = 1) -> bytes:
    return b"".join(cf.encode_frame(first_id + i, v) for i, v in enumerate(values))


def events(connection: ClientConnection, data: bytes = b"", now: float = 0.0) -> list[Event]:
    """Feed ``data`` and take events until the machine needs more (or is over)."""
    if data:
        connection.receive_data(data, now)
    taken: list[Event] = []
    while True:
        event = connection.next_event()
        if event is NEED_DATA:
            return taken
        taken.append(event)
        if isinstance(event, Violation | Closed | ReserveFrame):
            return taken


def replies(connection: ClientConnection) -> list[cf.Frame]:
    decoder = cf.ClientFrameDecoder(max_list_body=cf.MAX_LIST_FRAME_BODY)  # as the SDK reads
    decoder.receive_data(connection.data_to_send())
    found = []
    while (frame := decoder.next_frame()) is not None:
        found.append(frame)
    return found


def greeted(
    settings: ConnectionSettings = SETTINGS,
    *,
    version: int = cf.PROTOCOL_VERSION,
    principal: str | None = None,
) -> ClientConnection:
    connection = ClientConnection(settings, opened_at=0.0, principal=principal)
    [event] = events(connection, frames(cf.Hello(min_version=2, max_version=version)))
    assert isinstance(event, Greeted)
    connection.data_to_send()
    return connection


# ---------------------------------------------------------------------- Hello


def test_the_hello_is_answered_with_the_highest_common_version() -> None:
    connection = ClientConnection(SETTINGS, opened_at=0.0)
    hello = cf.Hello(client_name="app", min_version=2, max_version=99)
    assert events(connection, frames(hello)) == [Greeted("app", cf.PROTOCOL_VERSION, True)]
    [reply] = replies(connection)
    assert reply == cf.Frame(
        request_id=1,
        value=cf.HelloOk(
            version=cf.PROTOCOL_VERSION, server_version="9.9", qm_name="qm", qm_guid=GUID
        ),
    )
    assert (connection.greeted, connection.admitted, connection.version) == (True, True, 10)


@pytest.mark.parametrize(
    ("low", "high", "agreed"),
    [
        (2, 2, 2),
        (1, 3, 3),
        (4, 6, 6),
        (2, 5, 5),
        (7, 7, 7),
        (6, 200, 10),
        (1, 1, None),
        (11, 12, None),
    ],
)
def test_version_negotiation(low: int, high: int, agreed: int | None) -> None:
    connection = ClientConnection(SETTINGS, opened_at=0.0)
    [event] = events(connection, frames(cf.Hello(min_version=low, max_version=high)))
    if agreed is not None:
        assert event == Greeted("", agreed, True)
        return
    assert isinstance(event, Violation)
    assert event.kind is ViolationKind.UNSUPPORTED_VERSION
    assert event.message == f"client speaks versions {low}..{high}; this queue manager speaks 2..10"
    [reply] = replies(connection)
    assert reply.value == cf.ErrorReply(
        code=cf.ErrorCode.UNSUPPORTED_VERSION, message=event.message
    )
    assert connection.closed


@pytest.mark.parametrize("first", [*SAMPLES[:6], cf.Ok(), cf.Authenticate(token="t")])
def test_the_first_frame_must_be_hello(first: cf.FrameValue) -> None:
    connection = ClientConnection(SETTINGS, opened_at=0.0)
    [event] = events(connection, frames(first, first_id=7))
    name = type(first).__name__
    assert event == Violation(
        ViolationKind.HELLO_FIRST, 7, f"the first frame must be Hello, not {name}", name
    )
    assert event.reason == "protocol violation"
    [reply] = replies(connection)
    assert reply.request_id == 7
    assert reply.value == cf.ErrorReply(code=cf.ErrorCode.BAD_REQUEST, message=event.message)
    assert connection.next_event() == Closed("protocol violation")


# ---------------------------------------------------------------------- requests by version


def test_the_served_requests_are_every_request_but_hello_and_authenticate() -> None:
    assert set(SERVED_REQUESTS) == {type(sample) for sample in SAMPLES}
    assert versions_needed(type(sample) for sample in SAMPLES) == SERVED_REQUESTS


@pytest.mark.parametrize(
    ("request_class", "version"),
    [
        (cf.Send, 2),
        (cf.ControlOutgoing, 2),
        (cf.BeginGlobal, 3),
        (cf.MeasureRange, 3),
        (cf.TraceMessage, 4),
        (cf.GetLists, 4),
        (cf.MoveMessages, 5),
        (cf.ChangePermissions, 6),
        (cf.Authenticate, 6),
        (cf.GetRouting, 7),
        (cf.CancelReceive, 8),
        (cf.Hello, 2),
        (cf.Ok, 2),
    ],
)
def test_the_version_each_request_needs(request_class: type[object], version: int) -> None:
    assert version_needed(request_class) == version


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6, 7, 8, 9, 10])
@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: type(s).__name__)
def test_a_request_is_let_through_only_from_the_version_it_needs(
    sample: cf.ClientRequest, version: int
) -> None:
    connection = greeted(version=version)
    [event] = events(connection, frames(sample, first_id=3))
    needed = version_needed(type(sample))
    if needed <= version:
        assert event == cf.Frame(request_id=3, value=sample)
        assert isinstance(event, Request)
        assert connection.outbox == []
        return
    name = type(sample).__name__
    message = (
        f"{name} is not a request a client may send now "
        f"(it needs protocol version {needed}; this connection agreed on {version})"
    )
    assert event == Violation(ViolationKind.NOT_ALLOWED, 3, message, name)
    [reply] = replies(connection)
    assert reply.value == cf.ErrorReply(code=cf.ErrorCode.BAD_REQUEST, message=message)


@pytest.mark.parametrize("version", [5, 9, 10])
@pytest.mark.parametrize(
    "change", [{"quota": 0}, {"quota": 2**40}, {"no_quota": True}], ids=["0", "2**40", "none"]
)
def test_a_quota_change_is_refused_below_the_version_that_added_it(
    version: int, change: dict[str, object]
) -> None:
    assert newer_field(cf.SetQueueProperties(name="q", retry_count=1)) is None
    request = cf.SetQueueProperties(name="q", **change)  # type: ignore[arg-type]
    assert newer_field(request) == ("quota", cf.QUOTA_VERSION)
    connection = greeted(version=version)
    [event] = events(connection, frames(request, first_id=3))
    if version >= cf.QUOTA_VERSION:
        assert event == cf.Frame(request_id=3, value=request)
        return
    message = (
        f"SetQueueProperties.quota needs protocol version 10; this connection agreed on {version}"
    )
    assert event == Violation(ViolationKind.NOT_ALLOWED, 3, message, "SetQueueProperties")
    [reply] = replies(connection)
    assert reply.value == cf.ErrorReply(code=cf.ErrorCode.BAD_REQUEST, message=message)
    assert connection.closed


@pytest.mark.parametrize("frame", [cf.Hello(), cf.Ok(), cf.NoMessage(), cf.ListQueues()])
def test_what_is_not_a_request_the_server_runs_is_a_violation(frame: cf.FrameValue) -> None:
    settings = ConnectionSettings(
        qm_name="qm", qm_guid=GUID, server_version="1", requests=versions_needed([cf.Send])
    )
    connection = greeted(settings)
    [event] = events(connection, frames(frame))
    name = type(frame).__name__
    assert event == Violation(
        ViolationKind.NOT_ALLOWED, 1, f"{name} is not a request a client may send now", name
    )


def test_requests_are_refused_while_the_server_stops() -> None:
    connection = greeted()
    connection.stop()
    send = cf.Send(tx_id=4, message=cf.MessageProperties(destination="q"))
    assert events(connection, frames(send, cf.Hello())) == [
        Refused(1, send, "the queue manager is shutting down"),
        Violation(
            ViolationKind.NOT_ALLOWED, 2, "Hello is not a request a client may send now", "Hello"
        ),
    ]


# ---------------------------------------------------------------------- authentication


def test_a_principal_from_the_transport_is_admitted_at_the_hello() -> None:
    connection = ClientConnection(REQUIRED, opened_at=0.0, principal="alice")
    assert events(connection, frames(cf.Hello())) == [Greeted("", cf.PROTOCOL_VERSION, True)]
    assert connection.principal == "alice"


def test_without_a_principal_requests_wait_for_authentication() -> None:
    connection = ClientConnection(REQUIRED, opened_at=0.0)
    assert events(connection, frames(cf.Hello())) == [Greeted("", cf.PROTOCOL_VERSION, False)]
    connection.data_to_send()
    [event] = events(connection, frames(cf.ListQueues(), first_id=2))
    assert event == Violation(ViolationKind.AUTHENTICATE_FIRST, 2, AUTHENTICATE_FIRST, "ListQueues")
    [reply] = replies(connection)
    assert reply.value == cf.ErrorReply(code=cf.ErrorCode.ACCESS_DENIED, message=AUTHENTICATE_FIRST)


def test_a_token_admits_the_connection() -> None:
    connection = greeted(REQUIRED)
    assert not connection.admitted
    [event] = events(connection, frames(cf.Authenticate(token="secret"), first_id=5))
    assert event == TokenOffered(5, "secret")
    assert connection.authenticate(5, "alice") == Authenticated("alice", True)
    assert [r.value for r in replies(connection)] == [cf.Ok()]
    assert connection.admitted
    assert connection.principal == "alice"
    [request] = events(connection, frames(cf.ListQueues(), first_id=6))
    assert request == cf.Frame(request_id=6, value=cf.ListQueues())


def test_a_token_for_the_same_principal_changes_nothing() -> None:
    connection = greeted(REQUIRED, principal="alice")
    events(connection, frames(cf.Authenticate(token="t")))
    assert connection.authenticate(1, "alice") == Authenticated("alice", False)


@pytest.mark.parametrize(
    ("principal", "named", "message"),
    [
        (None, None, "the token is not accepted"),
        ("bob", None, "the token is not accepted"),
        ("bob", "alice", "this connection is authenticated as 'bob'"),
    ],
)
def test_a_token_refused_ends_the_connection(
    principal: str | None, named: str | None, message: str
) -> None:
    connection = greeted(REQUIRED, principal=principal)
    events(connection, frames(cf.Authenticate(token="t"), first_id=3))
    refused = connection.authenticate(3, named)
    assert refused == Violation(ViolationKind.TOKEN_REFUSED, 3, message, "Authenticate")
    [reply] = replies(connection)
    assert reply.value == cf.ErrorReply(code=cf.ErrorCode.ACCESS_DENIED, message=message)
    assert connection.next_event() == Closed("protocol violation")


def test_authenticate_before_version_6_is_not_a_request() -> None:
    connection = greeted(version=5)
    [event] = events(connection, frames(cf.Authenticate(token="t")))
    assert isinstance(event, Violation)
    assert event.kind is ViolationKind.NOT_ALLOWED
    assert "it needs protocol version 6; this connection agreed on 5" in event.message


# ---------------------------------------------------------------------- bytes


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"\x00\x00\x00\x00\x01\x00\x01\x00\x01\x00\x00\x00", "reserved flags"),
        (b"\xff\xff\xff\x7f\x01\x00\x00\x00\x01\x00\x00\x00", "over the"),
        (b"\x00\x00\x00\x00\x7e\x00\x00\x00\x01\x00\x00\x00", "unknown frame kind"),
        (b"\x05\x00\x00\x00\x0a\x00\x00\x00\x01\x00\x00\x00junk!", "Send"),
    ],
)
def test_malformed_bytes_are_a_violation_about_the_connection(data: bytes, expected: str) -> None:
    connection = greeted()
    [event] = events(connection, data)
    assert isinstance(event, Violation)
    assert event.kind is ViolationKind.MALFORMED
    assert event.request_id == 0
    assert expected in event.message
    assert event.reason == f"malformed frame: {event.message}"
    [reply] = replies(connection)
    assert reply.request_id == 0
    assert reply.value == cf.ErrorReply(code=cf.ErrorCode.BAD_REQUEST, message=event.message)


def test_a_large_frame_is_buffered_once_reserved_and_released_when_whole() -> None:
    connection = greeted()
    send = cf.Send(message=cf.MessageProperties(destination="q", body=b"x" * 5000))
    data = frames(send)
    length = len(data) - cf.HEADER_SIZE
    assert events(connection, data[:100]) == [ReserveFrame(length)]
    assert events(connection) == [ReserveFrame(length)]  # until it is reserved
    connection.frame_reserved()
    assert connection.reserved == length
    assert events(connection) == []
    assert events(connection, data[100:]) == [
        ReleaseFrame(length),
        cf.Frame(request_id=1, value=send),
    ]
    assert connection.reserved == 0


def test_a_small_frame_needs_no_reservation() -> None:
    connection = greeted()
    send = cf.Send(message=cf.MessageProperties(destination="q", body=b"x" * 500))
    assert events(connection, frames(send)) == [cf.Frame(request_id=1, value=send)]


def test_the_end_of_the_stream_closes_after_the_frames_before_it() -> None:
    connection = greeted()
    connection.receive_data(frames(cf.ListQueues()), 1.0)
    connection.receive_data(b"", 2.0)
    assert connection.next_event() == cf.Frame(request_id=1, value=cf.ListQueues())
    assert connection.next_event() is CLOSED
    assert CLOSED.reason == "closed by client"
    assert connection.next_event() is CLOSED


# ---------------------------------------------------------------------- before admission


def header(length: int, kind: cf.FrameKind, request_id: int = 1) -> bytes:
    """The 12-byte header of a frame, with none of its body."""
    return struct.pack("<IHHI", length, kind, 0, request_id)


def test_the_largest_hello_and_authenticate_fit_under_the_bound_before_admission() -> None:
    hello = cf.Hello(client_name="n" * MAX_TEXT_BYTES)
    authenticate = cf.Authenticate(token="t" * MAX_TEXT_BYTES)
    hello_body = len(frames(hello)) - cf.HEADER_SIZE
    assert hello_body == LARGEST_HELLO_BODY == 65_545
    assert len(frames(authenticate)) - cf.HEADER_SIZE == 65_537
    assert LARGEST_HELLO_BODY < MAX_UNADMITTED_BODY < LARGE_FRAME
    connection = ClientConnection(replace(REQUIRED, large_frame=LARGE_FRAME), opened_at=0.0)
    assert events(connection, frames(hello, authenticate)) == [
        Greeted(hello.client_name, cf.PROTOCOL_VERSION, False),
        TokenOffered(2, authenticate.token),
    ]


@pytest.mark.parametrize("length", [MAX_UNADMITTED_BODY + 1, cf.MAX_FRAME_BODY])
@pytest.mark.parametrize("settings", [SETTINGS, REQUIRED], ids=["open", "auth required"])
def test_a_hello_too_large_is_refused_from_its_header_and_reserves_nothing(
    settings: ConnectionSettings, length: int
) -> None:
    connection = ClientConnection(replace(settings, large_frame=1024), opened_at=0.0)
    [event] = events(connection, header(length, cf.FrameKind.HELLO, 7))
    message = (
        f"a Hello frame of {length} bytes is over the {MAX_UNADMITTED_BODY}-byte limit "
        "of a frame before the connection is admitted"
    )
    assert event == Violation(ViolationKind.MALFORMED, 0, message)
    assert connection.reserved == 0
    [reply] = replies(connection)
    assert (reply.request_id, reply.value) == (
        0,
        cf.ErrorReply(code=cf.ErrorCode.BAD_REQUEST, message=message),
    )
    assert connection.next_event() == Closed(f"malformed frame: {message}")


def test_a_token_too_large_is_refused_from_its_header() -> None:
    connection = greeted(replace(REQUIRED, large_frame=1024))
    length = MAX_UNADMITTED_BODY + 1
    [event] = events(connection, header(length, cf.FrameKind.AUTHENTICATE, 2))
    assert isinstance(event, Violation)
    assert event.kind is ViolationKind.MALFORMED
    assert event.message.startswith(f"a Authenticate frame of {length} bytes is over the")
    assert connection.reserved == 0


@pytest.mark.parametrize("length", [0, 10, MAX_UNADMITTED_BODY + 1, cf.MAX_FRAME_BODY])
@pytest.mark.parametrize(
    "kind",
    [cf.FrameKind.CREATE_LIST, cf.FrameKind.SEND, cf.FrameKind.AUTHENTICATE, cf.FrameKind.OK],
    ids=lambda kind: kind.name,
)
def test_a_first_frame_not_hello_is_refused_from_its_header_without_its_body(
    kind: cf.FrameKind, length: int
) -> None:
    connection = ClientConnection(SETTINGS, opened_at=0.0)
    [event] = events(connection, header(length, kind, 7))  # the body never comes
    name = cf.CLASS_OF[kind].__name__
    message = f"the first frame must be Hello, not {name}"
    assert event == Violation(ViolationKind.HELLO_FIRST, 7, message, name)
    assert connection.reserved == 0
    [reply] = replies(connection)
    assert reply.request_id == 7
    assert reply.value == cf.ErrorReply(code=cf.ErrorCode.BAD_REQUEST, message=message)
    assert connection.next_event() == Closed("protocol violation")


@pytest.mark.parametrize("length", [10, MAX_UNADMITTED_BODY + 1, cf.MAX_FRAME_BODY])
def test_before_authenticating_a_request_is_refused_from_its_header(length: int) -> None:
    connection = greeted(replace(REQUIRED, large_frame=1024))
    [event] = events(connection, header(length, cf.FrameKind.SEND, 4))
    assert event == Violation(ViolationKind.AUTHENTICATE_FIRST, 4, AUTHENTICATE_FIRST, "Send")
    assert connection.reserved == 0
    [reply] = replies(connection)
    assert reply.value == cf.ErrorReply(code=cf.ErrorCode.ACCESS_DENIED, message=AUTHENTICATE_FIRST)


def test_while_stopping_a_request_before_authenticating_is_refused_as_before() -> None:
    send = cf.Send(message=cf.MessageProperties(destination="q", body=b"x"))
    small = greeted(REQUIRED)
    small.stop()
    assert events(small, frames(send, first_id=3)) == [Refused(3, send, SHUTTING_DOWN)]
    large = greeted(REQUIRED)
    large.stop()
    [event] = events(large, header(cf.MAX_FRAME_BODY, cf.FrameKind.SEND, 3))
    assert event == Violation(ViolationKind.AUTHENTICATE_FIRST, 3, AUTHENTICATE_FIRST, "Send")


def test_the_bound_holds_only_until_the_connection_is_admitted() -> None:
    big = header(cf.MAX_FRAME_BODY, cf.FrameKind.SEND, 9)
    settings = replace(REQUIRED, large_frame=1024)
    waiting = greeted(settings)
    assert events(waiting, big) == [
        Violation(ViolationKind.AUTHENTICATE_FIRST, 9, AUTHENTICATE_FIRST, "Send")
    ]
    by_token = greeted(settings)
    [offered] = events(by_token, frames(cf.Authenticate(token="t"), first_id=2))
    assert offered == TokenOffered(2, "t")
    assert by_token.authenticate(2, "alice") == Authenticated("alice", True)
    assert events(by_token, big) == [ReserveFrame(cf.MAX_FRAME_BODY)]
    by_transport = greeted(settings, principal="alice")
    assert events(by_transport, big) == [ReserveFrame(cf.MAX_FRAME_BODY)]
    assert events(greeted(), big) == [ReserveFrame(cf.MAX_FRAME_BODY)]


# ---------------------------------------------------------------------- deadlines


def test_until_admitted_the_hello_deadline_counts_from_the_arrival() -> None:
    connection = ClientConnection(REQUIRED, opened_at=100.0)
    assert connection.deadline(busy=False) == 110.0
    assert connection.deadline_reason() == "no Hello within 10 s"
    events(connection, frames(cf.Hello()), now=105.0)
    assert connection.deadline(busy=True) == 110.0
    assert connection.deadline_reason() == "not authenticated within 10 s of connecting"
    assert connection.idle_since(busy=False) == 105.0


def test_a_frame_that_has_begun_must_be_whole_within_the_frame_timeout() -> None:
    connection = greeted()
    data = frames(cf.ListQueues(), cf.GetStatus())
    first = len(data) // 2 + 1  # the first frame whole, the second begun
    assert len(events(connection, data[:5], now=1.0)) == 0
    assert connection.frame_started == 1.0
    events(connection, data[5:7], now=2.0)  # more of the same frame: still from 1.0
    assert connection.deadline(busy=True) == 31.0
    assert connection.deadline_reason() == "a frame did not arrive whole within 30 s"
    assert len(events(connection, data[7:first], now=3.0)) == 1
    assert connection.frame_started == 3.0  # a whole frame came: the next counts from here
    assert len(events(connection, data[first:], now=4.0)) == 1
    assert connection.frame_started is None


def test_an_idle_connection_has_the_idle_deadline_and_a_busy_one_none() -> None:
    connection = greeted()
    events(connection, frames(cf.ListQueues()), now=50.0)
    assert connection.deadline(busy=False) == 650.0
    assert connection.deadline_reason() == "closing a connection idle for 600 s"
    assert connection.deadline(busy=True) == float("inf")
    assert connection.idle_since(busy=False) == 50.0
    assert connection.idle_since(busy=True) is None


def test_a_connection_not_greeted_is_never_idle() -> None:
    connection = ClientConnection(SETTINGS, opened_at=0.0)
    assert connection.idle_since(busy=False) is None


# ---------------------------------------------------------------------- the outbox


def test_replies_are_framed_in_order_and_taken_as_one_write() -> None:
    connection = greeted()
    connection.send(4, cf.NoMessage())
    connection.send_bytes(cf.encode_ok(5, 9))
    assert connection.outbox_bytes == sum(len(frame) for frame in connection.outbox)
    assert [(r.request_id, r.value) for r in replies(connection)] == [
        (4, cf.NoMessage()),
        (5, cf.Ok(value=9)),
    ]
    assert connection.outbox == []
    assert connection.outbox_bytes == 0
    assert connection.data_to_send() == b""


def test_the_outbox_is_full_past_the_flush_threshold() -> None:
    connection = greeted()
    while not connection.outbox_full:
        connection.send_bytes(b"x" * 1000)
    assert connection.outbox_bytes == 5000


def test_a_farewell_is_a_limit_about_the_connection_and_ends_it() -> None:
    connection = greeted()
    connection.farewell("closing this idle connection to make room")
    [reply] = replies(connection)
    assert reply == cf.Frame(
        request_id=0,
        value=cf.ErrorReply(
            code=cf.ErrorCode.LIMIT_EXCEEDED, message="closing this idle connection to make room"
        ),
    )
    assert connection.next_event() == Closed("closing this idle connection to make room")


# ---------------------------------------------------------------------- properties


def _decisions(connection: ClientConnection, chunks: Iterable[bytes]) -> list[object]:
    taken: list[object] = []
    for chunk in chunks:
        connection.receive_data(chunk, 0.0)
        while True:
            event = connection.next_event()
            if event is NEED_DATA:
                break
            if isinstance(event, ReserveFrame):
                connection.frame_reserved()
                continue
            if isinstance(event, ReleaseFrame):
                continue
            taken.append(event)
            if isinstance(event, Violation | Closed):
                return taken
    return taken


@given(
    st.lists(st.sampled_from(SAMPLES), max_size=8),
    st.integers(min_value=2, max_value=8),
    st.lists(st.integers(min_value=1, max_value=2000), max_size=20),
)
def test_frames_fed_in_any_pieces_are_decided_as_fed_whole(
    requests: list[cf.ClientRequest], version: int, cuts: list[int]
) -> None:
    data = frames(cf.Hello(max_version=version), *requests)
    whole = _decisions(ClientConnection(SETTINGS, opened_at=0.0), [data])
    points = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    pieces = [data[a:b] for a, b in itertools.pairwise(points)]
    assert _decisions(ClientConnection(SETTINGS, opened_at=0.0), pieces) == whole
    one_by_one = [data[i : i + 1] for i in range(len(data))]
    assert _decisions(ClientConnection(SETTINGS, opened_at=0.0), one_by_one) == whole


@given(st.lists(st.binary(max_size=64), max_size=12), st.booleans())
def test_garbage_never_raises(chunks: list[bytes], greet: bool) -> None:
    connection = greeted() if greet else ClientConnection(SETTINGS, opened_at=0.0)
    taken = _decisions(connection, chunks)
    for event in taken[:-1]:
        assert isinstance(event, cf.Frame | Greeted | TokenOffered | Refused)
    if taken and isinstance(taken[-1], Violation):
        assert connection.closed
        assert isinstance(connection.next_event(), Closed)


# ---------------------------------------------------------------------- replies too large


def test_a_whole_list_over_4_mib_goes_to_a_client_of_version_9() -> None:
    connection = greeted(version=cf.LARGE_LISTS_VERSION)
    queues = cf.QueueList(queues=long_queue_list(20_000))
    connection.send(3, queues)
    assert replies(connection) == [cf.Frame(request_id=3, value=queues)]


def test_a_list_too_large_for_an_older_client_is_limit_exceeded() -> None:
    connection = greeted(version=cf.LARGE_LISTS_VERSION - 1)
    connection.send(3, cf.QueueList(queues=long_queue_list(20_000)))
    [reply] = replies(connection)
    assert reply.request_id == 3
    assert isinstance(reply.value, cf.ErrorReply)
    assert reply.value.code == cf.ErrorCode.LIMIT_EXCEEDED
    assert reply.value.message.startswith("the reply (QueueList) would be ")
    assert f"over the {cf.MAX_FRAME_BODY}-byte limit of a frame at protocol version 8: " in (
        reply.value.message
    )
    assert "upgrade the client" in reply.value.message
    connection.send(4, cf.Ok(value=1))  # the connection goes on
    assert replies(connection) == [cf.Frame(request_id=4, value=cf.Ok(value=1))]


def test_a_list_over_the_largest_frame_is_limit_exceeded(monkeypatch: pytest.MonkeyPatch) -> None:
    connection = greeted()
    monkeypatch.setattr(cf, "max_reply_body", lambda reply, version: 100)  # as over 64 MiB
    connection.send(3, cf.QueueList(queues=long_queue_list(2)))
    [reply] = replies(connection)
    assert isinstance(reply.value, cf.ErrorReply)
    assert reply.value.code == cf.ErrorCode.LIMIT_EXCEEDED
    assert reply.value.message.endswith(
        "over the 100-byte limit of a frame: read it over HTTP (/api/v1)"
    )


def test_an_older_client_is_told_to_upgrade_only_when_that_would_help(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection = greeted(version=cf.LARGE_LISTS_VERSION - 1)
    monkeypatch.setattr(cf, "max_reply_body", lambda reply, version: 100)  # as over 64 MiB
    connection.send(3, cf.QueueList(queues=long_queue_list(2)))
    [reply] = replies(connection)
    assert isinstance(reply.value, cf.ErrorReply)
    assert "upgrade" not in reply.value.message
    assert reply.value.message.endswith(": read it over HTTP (/api/v1)")


def test_distribution_lists_too_large_are_asked_for_one_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection = greeted()
    monkeypatch.setattr(cf, "max_reply_body", lambda reply, version: 10)
    lists = cf.ListInfoList(lists=(cf.ListInfo(name="big", targets=("q",)),))
    connection.send(3, lists)
    [reply] = replies(connection)
    assert isinstance(reply.value, cf.ErrorReply)
    assert reply.value.message.endswith(
        ": ask for one distribution list at a time (qmgr dl list NAME)"
    )
