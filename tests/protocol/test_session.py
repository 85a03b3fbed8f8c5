"""PeerSession, the MQQB session state machine, driven without sockets.

Two sessions talk through the bytes of ``wire.build_packet`` and a
``wire.FrameDecoder`` each; time is the explicit ``now`` of every call.
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import wire
from qmgr.protocol import (
    Acked,
    Action,
    Arrived,
    Close,
    Opened,
    PeerSession,
    Role,
    Send,
    SessionError,
    SessionSettings,
    SessionState,
)

from .model_kit import A_QM, B_QM, C_QM, T0

PacketT = TypeVar("PacketT", bound=wire.Packet)

FULL_BITMAP = 0xFFFFFFFF
DEFAULTS = SessionSettings()

# --------------------------------------------------------------------------
# Packets and byte streams
# --------------------------------------------------------------------------


def user_message(
    tag: int, *, recoverable: bool, session: wire.SessionHeader | None = None
) -> wire.UserMessage:
    """A user packet whose message id is ``tag``."""
    return wire.UserMessage(
        user=wire.UserHeader(
            source_qm=A_QM,
            sent_time=1_700_000_000,
            message_id=tag,
            delivery=wire.DeliveryMode.RECOVERABLE if recoverable else wire.DeliveryMode.EXPRESS,
            destination=wire.PrivateQueueId(number=7),
        ),
        properties=wire.MessagePropertiesHeader(body=b"message %d" % tag),
        session=session,
    )


def user_packet(tag: int, *, recoverable: bool) -> bytes:
    return wire.build_packet(user_message(tag, recoverable=recoverable))


def decode(data: bytes) -> wire.Packet:
    """The one packet in ``data``."""
    decoder = wire.FrameDecoder()
    decoder.receive_data(data)
    packet = decoder.next_packet()
    assert packet is not None
    assert decoder.buffered == 0
    return packet


def sent(action: object, kind: type[PacketT]) -> PacketT:
    """The packet of kind ``kind`` that a :class:`Send` action carries."""
    assert isinstance(action, Send)
    packet = decode(action.data)
    assert isinstance(packet, kind)
    return packet


def header_of(action: Action) -> wire.SessionHeader:
    """The SessionHeader of a Send(SessionAck)."""
    assert isinstance(action, Send)
    packet = decode(action.data)
    assert isinstance(packet, wire.SessionAck)
    return packet.session


Chunker = Callable[[bytes], Iterator[bytes]]


def whole(data: bytes) -> Iterator[bytes]:
    yield data


def byte_by_byte(data: bytes) -> Iterator[bytes]:
    for index in range(len(data)):
        yield data[index : index + 1]


def odd_chunks(data: bytes) -> Iterator[bytes]:
    sizes = itertools.cycle((1, 3, 7, 13, 31, 2, 97, 5, 577))
    offset = 0
    while offset < len(data):
        size = next(sizes)
        yield data[offset : offset + size]
        offset += size


# --------------------------------------------------------------------------
# Two sessions and the link between them
# --------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class Endpoint:
    """One side: its session, its decoder, and what its session reported."""

    session: PeerSession
    decoder: wire.FrameDecoder = dataclasses.field(default_factory=wire.FrameDecoder)
    #: Packets on their way to this side, one per item.
    inbox: list[bytes] = dataclasses.field(default_factory=list)
    opened: list[Opened] = dataclasses.field(default_factory=list)
    arrived: list[Arrived] = dataclasses.field(default_factory=list)
    acked: list[object] = dataclasses.field(default_factory=list)
    closed: list[str] = dataclasses.field(default_factory=list)
    #: Recoverable numbers arrived and not yet passed to persisted().
    to_persist: list[int] = dataclasses.field(default_factory=list)


class Pair:
    """An initiator (``a``) and an acceptor (``b``) joined by an in-memory link."""

    def __init__(
        self,
        *,
        a_settings: SessionSettings = DEFAULTS,
        b_settings: SessionSettings = DEFAULTS,
        expect: uuid.UUID | None = B_QM,
        a_qm: uuid.UUID = A_QM,
        b_qm: uuid.UUID = B_QM,
        now: float = T0,
        chunker: Chunker = whole,
    ) -> None:
        self.a = Endpoint(
            PeerSession(
                Role.INITIATOR, local_qm=a_qm, remote_qm=expect, settings=a_settings, now=now
            )
        )
        self.b = Endpoint(PeerSession(Role.ACCEPTOR, local_qm=b_qm, settings=b_settings, now=now))
        self.chunker = chunker
        self.cache: dict[bytes, wire.Packet] | None = None

    def other(self, side: Endpoint) -> Endpoint:
        return self.b if side is self.a else self.a

    def apply(self, side: Endpoint, actions: Sequence[Action]) -> Sequence[Action]:
        for action in actions:
            if isinstance(action, Send):
                self.other(side).inbox.append(action.data)
            elif isinstance(action, Opened):
                side.opened.append(action)
            elif isinstance(action, Arrived):
                side.arrived.append(action)
                if action.recoverable_number is not None:
                    side.to_persist.append(action.recoverable_number)
            elif isinstance(action, Acked):
                side.acked.extend(action.tags)
            else:
                assert isinstance(action, Close)
                side.closed.append(action.reason)
        return actions

    def deliver(self, side: Endpoint, now: float, *, count: int | None = None) -> None:
        """Carry the packets waiting for ``side`` (all, or the first ``count``) into it."""
        taken = side.inbox[:count] if count is not None else list(side.inbox)
        del side.inbox[: len(taken)]
        if self.cache is not None:  # fast path for long runs: parse each distinct packet once
            for data in taken:
                packet = self.cache.get(data)
                if packet is None:
                    packet = self.cache[data] = decode(data)
                self.apply(side, side.session.receive(packet, now))
            return
        for chunk in self.chunker(b"".join(taken)):
            side.decoder.receive_data(chunk)
            while (packet := side.decoder.next_packet()) is not None:
                self.apply(side, side.session.receive(packet, now))

    def pump(self, now: float) -> None:
        while self.a.inbox or self.b.inbox:
            self.deliver(self.a, now)
            self.deliver(self.b, now)

    def open(self, now: float = T0) -> None:
        self.apply(self.a, self.a.session.start(now))
        self.apply(self.b, self.b.session.start(now))
        self.pump(now)
        assert self.a.session.state is SessionState.OPEN
        assert self.b.session.state is SessionState.OPEN

    def send(self, side: Endpoint, tag: int, *, recoverable: bool, now: float) -> None:
        data = user_packet(tag, recoverable=recoverable)
        written = side.session.send(data, recoverable=recoverable, tag=tag, now=now)
        assert written == data
        self.other(side).inbox.append(written)

    def persist(self, side: Endpoint, now: float, number: int | None = None) -> Sequence[Action]:
        """Persist ``number`` (default: the oldest arrived) at ``side``."""
        if number is None:
            number = side.to_persist[0]
        side.to_persist.remove(number)
        return self.apply(side, side.session.persisted(number, now))

    def persist_all(self, side: Endpoint, now: float) -> None:
        while side.to_persist:
            self.persist(side, now)

    def tick(self, side: Endpoint, now: float) -> Sequence[Action]:
        return self.apply(side, side.session.timer(now))


def state_of(session: PeerSession) -> SessionState:
    """The session's state (a call, so that mypy does not narrow it across calls)."""
    return session.state


def same_tags(reported: Sequence[object], expected: Iterable[object]) -> bool:
    """Whether ``reported`` holds each expected tag exactly once, in any order."""
    return len(reported) == len(set(reported)) and set(reported) == set(expected)


def opened_pair(**options: Any) -> Pair:
    pair = Pair(**options)
    pair.open()
    return pair


# --------------------------------------------------------------------------
# Handshake
# --------------------------------------------------------------------------


def test_handshake_exchanges_guids_timeouts_and_windows() -> None:
    a = PeerSession(
        Role.INITIATOR,
        local_qm=A_QM,
        remote_qm=B_QM,
        settings=SessionSettings(window_size=10, ack_timeout=30.0, recoverable_ack_timeout=2.0),
        now=T0,
    )
    b = PeerSession(
        Role.ACCEPTOR,
        local_qm=B_QM,
        settings=SessionSettings(window_size=20, ack_timeout=50.0, recoverable_ack_timeout=1.0),
        now=T0,
    )
    assert b.start(T0) == []
    assert state_of(b) is SessionState.WAITING_EC

    [send] = a.start(T0 + 1.5)
    assert state_of(a) is SessionState.WAITING_ECR
    request = sent(send, wire.EstablishConnection)
    assert (request.client_qm, request.server_qm) == (A_QM, B_QM)
    assert request.timestamp == 1_001_500
    assert not request.refused

    [send] = b.receive(request, T0 + 2)
    assert state_of(b) is SessionState.WAITING_CP
    response = sent(send, wire.EstablishConnection)
    assert (response.client_qm, response.server_qm) == (A_QM, B_QM)
    assert response.timestamp == 1_001_500
    assert response.padding == b"\x5a" * 512
    assert not response.refused

    [send] = a.receive(response, T0 + 3)
    assert state_of(a) is SessionState.WAITING_CPR
    parameters = sent(send, wire.ConnectionParameters)
    assert (parameters.recoverable_ack_timeout, parameters.ack_timeout) == (2000, 30000)
    assert parameters.window_size == 10

    send, opened = b.receive(parameters, T0 + 4)
    assert state_of(b) is SessionState.OPEN
    assert opened == Opened(remote_qm=A_QM, peer_window=10)
    answer = sent(send, wire.ConnectionParameters)
    assert (answer.recoverable_ack_timeout, answer.ack_timeout) == (2000, 30000)
    assert answer.window_size == 20
    # The acceptor adopts the initiator's timeouts.
    assert (b.ack_timeout, b.recoverable_ack_timeout) == (30.0, 2.0)

    assert a.receive(answer, T0 + 5) == [Opened(remote_qm=B_QM, peer_window=20)]
    assert state_of(a) is SessionState.OPEN
    assert (a.peer_window, b.peer_window) == (20, 10)
    assert (a.remote_qm, b.remote_qm) == (B_QM, A_QM)


@pytest.mark.parametrize("chunker", [whole, byte_by_byte, odd_chunks])
@pytest.mark.parametrize(("initiator", "acceptor"), [(A_QM, B_QM), (B_QM, A_QM)])
@pytest.mark.parametrize("by_direct_name", [False, True])
def test_handshake_both_ways(
    initiator: uuid.UUID, acceptor: uuid.UUID, by_direct_name: bool, chunker: Chunker
) -> None:
    pair = Pair(
        a_qm=initiator,
        b_qm=acceptor,
        expect=None if by_direct_name else acceptor,
        chunker=chunker,
    )
    pair.apply(pair.a, pair.a.session.start(T0))
    request = decode(pair.b.inbox[0])
    assert isinstance(request, wire.EstablishConnection)
    assert request.server_qm == (wire.NULL_GUID if by_direct_name else acceptor)
    pair.apply(pair.b, pair.b.session.start(T0))
    pair.pump(T0)
    assert pair.a.session.state is pair.b.session.state is SessionState.OPEN
    assert pair.a.opened == [Opened(remote_qm=acceptor, peer_window=64)]
    assert pair.b.opened == [Opened(remote_qm=initiator, peer_window=64)]
    assert pair.a.session.remote_qm == acceptor
    assert pair.b.session.remote_qm == initiator


def test_timestamp_is_milliseconds_modulo_2_32() -> None:
    now = 2**32 / 1000 + 1.5
    session = PeerSession(Role.INITIATOR, local_qm=A_QM, now=now)
    [send] = session.start(now)
    request = sent(send, wire.EstablishConnection)
    assert request.timestamp == 1500


@pytest.mark.parametrize(
    ("requested", "answered"), [(0x0110, 0x0110), (0x0310, 0x0110), (0x0010, 0x0010)]
)
def test_acceptor_echoes_only_the_no_ping_bit(requested: int, answered: int) -> None:
    b = PeerSession(Role.ACCEPTOR, local_qm=B_QM, now=T0)
    request = wire.EstablishConnection(client_qm=A_QM, timestamp=7, operating_system=requested)
    [send] = b.receive(request, T0)
    response = sent(send, wire.EstablishConnection)
    assert response.operating_system == answered


def test_acceptor_refuses_a_request_for_another_queue_manager() -> None:
    pair = Pair(expect=C_QM)
    pair.apply(pair.a, pair.a.session.start(T0))
    pair.deliver(pair.b, T0)
    assert pair.b.session.state is SessionState.CLOSED
    assert len(pair.b.closed) == 1
    assert str(C_QM) in pair.b.closed[0]
    [data] = pair.a.inbox
    response = decode(data)
    assert isinstance(response, wire.EstablishConnection)
    assert response.refused
    assert response.server_qm == B_QM

    pair.deliver(pair.a, T0)
    assert pair.a.session.state is SessionState.CLOSED
    assert pair.a.closed == [f"the peer ({B_QM}) refused the connection"]
    assert pair.a.opened == pair.b.opened == []


def test_acceptor_expecting_a_client_refuses_another() -> None:
    b = PeerSession(Role.ACCEPTOR, local_qm=B_QM, remote_qm=C_QM, now=T0)
    send, close = b.receive(wire.EstablishConnection(client_qm=A_QM, timestamp=1), T0)
    response = sent(send, wire.EstablishConnection)
    assert response.refused
    assert isinstance(close, Close)
    assert str(C_QM) in close.reason
    assert b.state is SessionState.CLOSED


@pytest.mark.parametrize(
    ("expect", "changes", "words"),
    [
        (B_QM, {"client_qm": C_QM}, "ClientGuid"),
        (B_QM, {"server_qm": C_QM}, f"reached {C_QM}"),
        (None, {"server_qm": wire.NULL_GUID}, "without a ServerGuid"),
    ],
)
def test_initiator_checks_the_echo(
    expect: uuid.UUID | None, changes: dict[str, Any], words: str
) -> None:
    a = PeerSession(Role.INITIATOR, local_qm=A_QM, remote_qm=expect, now=T0)
    a.start(T0)
    response = dataclasses.replace(
        wire.EstablishConnection(client_qm=A_QM, server_qm=B_QM, timestamp=1), **changes
    )
    [close] = a.receive(response, T0)
    assert isinstance(close, Close)
    assert words in close.reason
    assert a.state is SessionState.CLOSED


@pytest.mark.parametrize("side", ["a", "b"])
def test_refused_connection_parameters_close(side: str) -> None:
    pair = Pair()
    pair.apply(pair.a, pair.a.session.start(T0))
    pair.deliver(pair.b, T0)
    pair.deliver(pair.a, T0)
    assert pair.a.session.state is SessionState.WAITING_CPR
    refused = wire.ConnectionParameters(
        internal=wire.InternalHeader(flags=wire.InternalFlags.CONNECTION_REFUSED),
        recoverable_ack_timeout=500,
        ack_timeout=20000,
    )
    endpoint = pair.a if side == "a" else pair.b
    [close] = endpoint.session.receive(refused, T0)
    assert isinstance(close, Close)
    assert "refused" in close.reason
    assert endpoint.session.state is SessionState.CLOSED


# --------------------------------------------------------------------------
# Packets in the wrong state; misuse; the closed state
# --------------------------------------------------------------------------

PACKETS: dict[str, wire.Packet] = {
    "EstablishConnection": wire.EstablishConnection(client_qm=A_QM, server_qm=B_QM, timestamp=1),
    "ConnectionParameters": wire.ConnectionParameters(
        recoverable_ack_timeout=500, ack_timeout=20000
    ),
    "SessionAck": wire.SessionAck(session=wire.SessionHeader()),
    "UserMessage": user_message(1, recoverable=False),
}
LEGAL = {
    ("WAITING_EC", "EstablishConnection"),
    ("WAITING_ECR", "EstablishConnection"),
    ("WAITING_CP", "ConnectionParameters"),
    ("WAITING_CPR", "ConnectionParameters"),
    ("OPEN", "SessionAck"),
    ("OPEN", "UserMessage"),
}
STATES = [
    ("b", "WAITING_EC"),
    ("a", "WAITING_ECR"),
    ("b", "WAITING_CP"),
    ("a", "WAITING_CPR"),
    ("a", "OPEN"),
    ("b", "OPEN"),
]


def session_in(side: str, state: str) -> PeerSession:
    """A session of the named side, driven into ``state``."""
    pair = Pair()
    steps: list[Callable[[], object]] = [
        lambda: pair.apply(pair.a, pair.a.session.start(T0)),
        lambda: pair.deliver(pair.b, T0),
        lambda: pair.deliver(pair.a, T0),
        lambda: pair.deliver(pair.b, T0),
        lambda: pair.deliver(pair.a, T0),
    ]
    endpoint = pair.a if side == "a" else pair.b
    pair.b.session.start(T0)
    steps.pop(0)()  # an initiator is in WAITING_ECR from the start, but must be started
    for step in steps:
        if endpoint.session.state.name == state:
            break
        step()
    assert endpoint.session.state.name == state
    return endpoint.session


@pytest.mark.parametrize("kind", sorted(PACKETS))
@pytest.mark.parametrize(("side", "state"), STATES)
def test_every_packet_in_every_state(side: str, state: str, kind: str) -> None:
    session = session_in(side, state)
    actions = session.receive(PACKETS[kind], T0)
    if (state, kind) in LEGAL:
        assert not any(isinstance(action, Close) for action in actions)
        assert session.state is not SessionState.CLOSED
        return
    assert actions == [Close(reason=f"unexpected {kind} in state {state}")]
    assert session.state is SessionState.CLOSED
    assert session.close_reason == f"unexpected {kind} in state {state}"
    # Closed is final and inert.
    assert session.receive(PACKETS[kind], T0) == []
    assert session.timer(T0 + 1e6) == []
    assert session.next_deadline() is None
    assert not session.can_send()


def test_refused_establish_connection_is_named_in_the_reason() -> None:
    pair = Pair()
    pair.open()
    refused = wire.EstablishConnection(
        internal=wire.InternalHeader(flags=wire.InternalFlags.CONNECTION_REFUSED),
        client_qm=A_QM,
        timestamp=1,
    )
    [close] = pair.a.session.receive(refused, T0)
    assert close == Close(reason="unexpected EstablishConnection (refused) in state OPEN")


def test_initiator_must_start_before_receiving_and_only_once() -> None:
    a = PeerSession(Role.INITIATOR, local_qm=A_QM, now=T0)
    with pytest.raises(SessionError, match="before start"):
        a.receive(PACKETS["EstablishConnection"], T0)
    a.start(T0)
    with pytest.raises(SessionError, match="already"):
        a.start(T0)


def test_send_needs_an_open_session_and_a_user_packet() -> None:
    pair = Pair()
    data = user_packet(1, recoverable=False)
    with pytest.raises(SessionError, match="WAITING_ECR"):
        pair.a.session.send(data, recoverable=False, tag=1, now=T0)
    pair.open()
    ack = wire.build_packet(wire.SessionAck(session=wire.SessionHeader()))
    with pytest.raises(SessionError, match="without a SessionHeader"):
        pair.a.session.send(ack, recoverable=False, tag=1, now=T0)
    carrying = wire.build_packet(user_message(1, recoverable=False, session=wire.SessionHeader()))
    with pytest.raises(SessionError, match="without a SessionHeader"):
        pair.a.session.send(carrying, recoverable=False, tag=1, now=T0)
    with pytest.raises(SessionError, match="not a packet"):
        pair.a.session.send(b"\x10", recoverable=False, tag=1, now=T0)
    assert pair.a.session.unacked == 0


def test_close_and_connection_lost_are_final() -> None:
    pair = opened_pair()
    pair.send(pair.a, 1, recoverable=True, now=T0)
    pair.deliver(pair.b, T0)
    assert pair.a.session.close("shutting down") == [Close(reason="shutting down")]
    assert pair.a.session.close("again") == []
    assert pair.a.session.close_reason == "shutting down"
    assert pair.a.session.next_deadline() is None
    with pytest.raises(SessionError, match="CLOSED"):
        pair.a.session.send(user_packet(2, recoverable=False), recoverable=False, tag=2, now=T0)

    pair.b.session.connection_lost()
    assert pair.b.session.state is SessionState.CLOSED
    assert pair.b.session.close_reason == "connection lost"
    assert pair.b.session.persisted(1, T0) == []
    assert pair.b.session.timer(T0 + 1e6) == []
    assert pair.b.session.close("later") == []


def test_persisted_takes_only_numbers_awaiting_persistence() -> None:
    pair = opened_pair()
    pair.send(pair.a, 1, recoverable=True, now=T0)
    pair.send(pair.a, 2, recoverable=False, now=T0)
    pair.deliver(pair.b, T0)
    assert [d.recoverable_number for d in pair.b.arrived] == [1, None]
    with pytest.raises(SessionError, match="2 is not awaiting"):
        pair.b.session.persisted(2, T0)
    pair.b.session.persisted(1, T0)
    with pytest.raises(SessionError, match="1 is not awaiting"):
        pair.b.session.persisted(1, T0)


@pytest.mark.parametrize(("seconds", "milliseconds"), [(0.1, 500), (3.0, 3000), (500.0, 120000)])
def test_recoverable_ack_timeout_is_clamped(seconds: float, milliseconds: int) -> None:
    a = PeerSession(
        Role.INITIATOR,
        local_qm=A_QM,
        settings=SessionSettings(recoverable_ack_timeout=seconds),
        now=T0,
    )
    a.start(T0)
    [send] = a.receive(wire.EstablishConnection(client_qm=A_QM, server_qm=B_QM, timestamp=1), T0)
    parameters = sent(send, wire.ConnectionParameters)
    assert parameters.recoverable_ack_timeout == milliseconds
    assert a.recoverable_ack_timeout == milliseconds / 1000


# --------------------------------------------------------------------------
# Window and acknowledgements
# --------------------------------------------------------------------------


def test_window_exhaustion_until_an_ack() -> None:
    pair = opened_pair(b_settings=SessionSettings(window_size=4))
    a = pair.a.session
    assert a.peer_window == 4
    for tag in range(4):
        assert a.can_send()
        pair.send(pair.a, tag, recoverable=False, now=T0)
    assert not a.can_send()
    assert a.unacked == 4
    with pytest.raises(SessionError, match="window is full"):
        a.send(user_packet(9, recoverable=False), recoverable=False, tag=9, now=T0)
    pair.deliver(pair.b, T0 + 1)
    assert not a.can_send()  # the acks are still on their way
    pair.deliver(pair.a, T0 + 1)
    assert a.can_send()
    assert a.unacked == 0
    assert pair.a.acked == [0, 1, 2, 3]


def test_peer_window_follows_session_acks() -> None:
    pair = opened_pair()
    a = pair.a.session
    for window, expected in [(1, 1), (0, 1), (5, 5)]:
        a.receive(wire.SessionAck(session=wire.SessionHeader(window_size=window)), T0)
        assert a.peer_window == expected
    pair.send(pair.a, 1, recoverable=False, now=T0)
    a.receive(wire.SessionAck(session=wire.SessionHeader(window_size=1)), T0)
    assert not a.can_send()


def test_express_is_acked_on_receipt_recoverable_only_once_persisted() -> None:
    pair = opened_pair()
    pair.send(pair.a, 1, recoverable=False, now=T0)
    pair.send(pair.a, 2, recoverable=True, now=T0)
    pair.deliver(pair.b, T0)
    assert [(d.packet.user.message_id, d.recoverable_number) for d in pair.b.arrived] == [
        (1, None),
        (2, 1),
    ]
    b = pair.b.session
    assert pair.a.inbox == []
    assert b.next_deadline() == T0 + 10.0  # AckWaitTimeout / 2

    [send] = pair.tick(pair.b, T0 + 10.0)
    header = header_of(send)
    assert header == wire.SessionHeader(ack_sequence_number=2, window_size=64)
    pair.deliver(pair.a, T0 + 10.0)
    assert pair.a.acked == [1]  # the recoverable one is not stored yet
    assert (pair.a.session.unacked, pair.a.session.unpersisted) == (0, 1)

    assert pair.persist(pair.b, T0 + 11) == []
    assert b.next_deadline() == T0 + 11.5  # RecoverableAckSendTimeout
    [send] = pair.tick(pair.b, T0 + 11.5)
    header = header_of(send)
    assert (header.ack_sequence_number, header.recoverable_ack_sequence_number) == (2, 1)
    assert header.recoverable_ack_flags == 1
    pair.deliver(pair.a, T0 + 11.5)
    assert pair.a.acked == [1, 2]
    assert (pair.a.session.unacked, pair.a.session.unpersisted) == (0, 0)


def test_session_ack_carries_our_sent_counts() -> None:
    pair = opened_pair(b_settings=SessionSettings(window_size=100))
    for tag in range(3):
        pair.send(pair.b, tag, recoverable=tag == 1, now=T0)
    pair.deliver(pair.a, T0)
    pair.send(pair.a, 10, recoverable=False, now=T0)
    pair.deliver(pair.b, T0)
    [send] = pair.tick(pair.b, T0 + 10)
    header = header_of(send)
    assert header.user_message_sequence_number == 3
    assert header.recoverable_message_sequence_number == 1
    assert header.window_size == 100
    pair.deliver(pair.a, T0 + 10)
    assert pair.a.closed == []
    assert pair.a.acked == [10]


def test_a_full_bitmap_is_acked_at_once() -> None:
    pair = opened_pair(b_settings=SessionSettings(window_size=200))
    for tag in range(40):
        pair.send(pair.a, tag, recoverable=True, now=T0)
    pair.deliver(pair.b, T0)
    for _ in range(31):
        assert pair.persist(pair.b, T0) == []
    [send] = pair.persist(pair.b, T0)
    header = header_of(send)
    assert header.ack_sequence_number == 40
    assert (header.recoverable_ack_sequence_number, header.recoverable_ack_flags) == (
        1,
        FULL_BITMAP,
    )
    pair.deliver(pair.a, T0)
    assert pair.a.acked == list(range(32))
    pair.persist_all(pair.b, T0 + 1)
    assert pair.a.inbox == []
    [send] = pair.tick(pair.b, T0 + 1.5)
    header = header_of(send)
    assert (header.recoverable_ack_sequence_number, header.recoverable_ack_flags) == (33, 0xFF)
    pair.deliver(pair.a, T0 + 1.5)
    assert pair.a.acked == list(range(40))


def test_nothing_above_a_gap_is_claimed() -> None:
    pair = opened_pair(b_settings=SessionSettings(window_size=200))
    for tag in range(1, 35):
        pair.send(pair.a, tag, recoverable=True, now=T0)
    pair.deliver(pair.b, T0)
    # Numbers 2..34 are stored, 1 is not: no base can be true.
    for number in range(2, 35):
        assert pair.persist(pair.b, T0, number) == []
    assert pair.b.session.next_deadline() == T0 + 10  # only the arrival timer
    [send] = pair.tick(pair.b, T0 + 10)
    header = header_of(send)
    assert (header.recoverable_ack_sequence_number, header.recoverable_ack_flags) == (0, 0)
    pair.deliver(pair.a, T0 + 10)
    assert pair.a.acked == []
    [send] = pair.persist(pair.b, T0 + 11, 1)  # the 32 lowest fill the bitmap
    assert (
        header_of(send).recoverable_ack_sequence_number,
        header_of(send).recoverable_ack_flags,
    ) == (
        1,
        FULL_BITMAP,
    )
    pair.deliver(pair.a, T0 + 11)
    assert pair.a.acked == list(range(1, 33))
    [send] = pair.tick(pair.b, T0 + 11.5)
    pair.deliver(pair.a, T0 + 11.5)
    assert pair.a.acked == list(range(1, 35))


def test_a_gap_above_the_stored_prefix() -> None:
    pair = opened_pair()
    for tag in range(1, 6):
        pair.send(pair.a, tag, recoverable=True, now=T0)
    pair.deliver(pair.b, T0)
    for number in (1, 2, 4, 5):
        pair.persist(pair.b, T0, number)
    [send] = pair.tick(pair.b, T0 + 0.5)
    header = header_of(send)
    # Base 1 (bit 0), 2 (bit 1), 4 (bit 3), 5 (bit 4); 3 is not claimed.
    assert (header.recoverable_ack_sequence_number, header.recoverable_ack_flags) == (1, 0b11011)
    pair.deliver(pair.a, T0 + 0.5)
    assert pair.a.acked == [1, 2, 4, 5]
    pair.persist(pair.b, T0 + 1, 3)
    [send] = pair.tick(pair.b, T0 + 1.5)
    assert header_of(send).recoverable_ack_sequence_number == 3
    pair.deliver(pair.a, T0 + 1.5)
    assert pair.a.acked == [1, 2, 4, 5, 3]


def test_gap_with_a_stored_prefix_restates_the_prefix() -> None:
    pair = opened_pair()
    for tag in range(1, 6):
        pair.send(pair.a, tag, recoverable=True, now=T0)
    pair.deliver(pair.b, T0)
    pair.persist(pair.b, T0, 1)
    pair.persist(pair.b, T0, 2)
    pair.tick(pair.b, T0 + 0.5)
    pair.deliver(pair.a, T0 + 0.5)
    assert pair.a.acked == [1, 2]
    pair.persist(pair.b, T0 + 1, 4)
    pair.persist(pair.b, T0 + 1, 5)
    [send] = pair.tick(pair.b, T0 + 1.5)
    header = header_of(send)
    # Base 2 (the stored prefix), 4 at bit 2 and 5 at bit 3; 3 is not claimed.
    assert (header.recoverable_ack_sequence_number, header.recoverable_ack_flags) == (2, 0b1101)
    pair.deliver(pair.a, T0 + 1.5)
    assert pair.a.acked == [1, 2, 4, 5]


def test_half_window_received_is_acked_at_once_from_persisted() -> None:
    pair = opened_pair(b_settings=SessionSettings(window_size=8))
    for tag in range(4):
        pair.send(pair.a, tag, recoverable=True, now=T0)
    pair.deliver(pair.b, T0)
    assert pair.a.inbox == []
    [send] = pair.persist(pair.b, T0)
    header = header_of(send)
    assert header.ack_sequence_number == 4
    assert (header.recoverable_ack_sequence_number, header.recoverable_ack_flags) == (1, 1)
    assert pair.persist(pair.b, T0) == []  # nothing new received since that ack


def test_express_stream_is_acked_at_half_window_on_receipt() -> None:
    pair = opened_pair(b_settings=SessionSettings(window_size=8))
    for tag in range(4):
        pair.send(pair.a, tag, recoverable=False, now=T0)
    pair.deliver(pair.b, T0, count=3)
    assert pair.a.inbox == []
    pair.deliver(pair.b, T0, count=1)
    [data] = pair.a.inbox
    assert decode(data) == wire.SessionAck(
        session=wire.SessionHeader(ack_sequence_number=4, window_size=8)
    )


def test_express_does_not_ack_early_while_a_recoverable_awaits_persistence() -> None:
    pair = opened_pair(b_settings=SessionSettings(window_size=8))
    pair.send(pair.a, 0, recoverable=True, now=T0)
    for tag in range(1, 4):
        pair.send(pair.a, tag, recoverable=False, now=T0)
    pair.deliver(pair.b, T0)
    assert pair.a.inbox == []
    [send] = pair.persist(pair.b, T0)  # persisted() sends it, with the bit
    assert header_of(send).recoverable_ack_flags == 1


@pytest.mark.parametrize("next_is_recoverable", [True, False])
def test_a_lost_session_ack_is_made_good_by_the_next(next_is_recoverable: bool) -> None:
    pair = opened_pair()
    pair.send(pair.a, 1, recoverable=False, now=T0)
    for tag in (2, 3, 4):
        pair.send(pair.a, tag, recoverable=True, now=T0)
    pair.deliver(pair.b, T0)
    pair.persist_all(pair.b, T0)
    pair.tick(pair.b, T0 + 0.5)
    assert len(pair.a.inbox) == 1
    pair.a.inbox.clear()  # the SessionAck is lost
    pair.send(pair.a, 5, recoverable=next_is_recoverable, now=T0 + 1)
    pair.deliver(pair.b, T0 + 1)
    pair.persist_all(pair.b, T0 + 1)
    pair.tick(pair.b, T0 + 11)
    pair.deliver(pair.a, T0 + 11)
    assert same_tags(pair.a.acked, [1, 2, 3, 4, 5])
    assert (pair.a.session.unacked, pair.a.session.unpersisted) == (0, 0)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"user_message_sequence_number": 2}, "2 sent / 0 recoverable sent, but we received 1 / 0"),
        (
            {"recoverable_message_sequence_number": 1},
            "1 sent / 1 recoverable sent, but we received 1 / 0",
        ),
    ],
)
def test_count_mismatch_closes(changes: dict[str, int], words: str) -> None:
    pair = opened_pair()
    pair.send(pair.b, 1, recoverable=False, now=T0)
    pair.deliver(pair.a, T0)
    pair.send(pair.a, 2, recoverable=False, now=T0)
    header = dataclasses.replace(
        wire.SessionHeader(ack_sequence_number=1, user_message_sequence_number=1), **changes
    )
    [close] = pair.a.session.receive(wire.SessionAck(session=header), T0)
    assert isinstance(close, Close)
    assert words in close.reason
    assert pair.a.acked == []
    assert pair.a.session.state is SessionState.CLOSED


@pytest.mark.parametrize("counts_carrier", [False, True])
@pytest.mark.parametrize("recoverable", [False, True])
def test_piggy_backed_session_header(counts_carrier: bool, recoverable: bool) -> None:
    pair = opened_pair()
    pair.send(pair.a, 1, recoverable=False, now=T0)
    pair.deliver(pair.b, T0)
    # B's next packet carries its ack; it is B's first user packet.
    header = wire.SessionHeader(
        ack_sequence_number=1,
        user_message_sequence_number=int(counts_carrier),
        recoverable_message_sequence_number=int(counts_carrier and recoverable),
        window_size=7,
    )
    carrier = wire.build_packet(user_message(50, recoverable=recoverable, session=header))
    pair.a.inbox.append(carrier)
    pair.deliver(pair.a, T0)
    assert pair.a.closed == []
    assert pair.a.acked == [1]
    assert pair.a.session.peer_window == 7
    [delivered] = pair.a.arrived
    assert delivered.packet.user.message_id == 50
    assert delivered.recoverable_number == (1 if recoverable else None)


def test_piggy_backed_session_header_with_wrong_counts_closes() -> None:
    pair = opened_pair()
    header = wire.SessionHeader(user_message_sequence_number=2)
    [close] = pair.a.session.receive(user_message(1, recoverable=False, session=header), T0)
    assert isinstance(close, Close)
    assert pair.a.arrived == []


def test_stale_ack_sequence_acknowledges_nothing() -> None:
    pair = opened_pair()
    for tag in range(3):
        pair.send(pair.a, tag, recoverable=False, now=T0)
    pair.a.session.receive(wire.SessionAck(session=wire.SessionHeader(ack_sequence_number=2)), T0)
    assert pair.a.session.unacked == 1
    # Going back (or beyond what was sent) acknowledges nothing more.
    for stale in (1, 0, 5):
        actions = pair.a.session.receive(
            wire.SessionAck(session=wire.SessionHeader(ack_sequence_number=stale)), T0
        )
        assert actions == []
    assert pair.a.session.unacked == 1


# --------------------------------------------------------------------------
# u16 wrap-around
# --------------------------------------------------------------------------


def test_counters_wrap_over_70000_packets() -> None:
    pair = opened_pair()
    pair.cache = {}
    packets = {flag: user_packet(0, recoverable=flag) for flag in (False, True)}
    a, b = pair.a.session, pair.b.session
    total = 70_000
    tag = 0
    now = T0
    headers: list[wire.SessionHeader] = []
    while len(pair.a.acked) < total:
        now += 0.001
        while tag < total and a.can_send():
            recoverable = tag % 20 != 0
            pair.b.inbox.append(
                a.send(packets[recoverable], recoverable=recoverable, tag=tag, now=now)
            )
            tag += 1
        pair.deliver(pair.b, now)
        while pair.b.to_persist:
            pair.persist(pair.b, now)
        if not pair.a.inbox:
            pair.tick(pair.b, b.next_deadline() or now)
        headers.extend(header_of(Send(data=data)) for data in pair.a.inbox)
        pair.deliver(pair.a, now)
        assert pair.a.closed == pair.b.closed == []
    # Recoverable packets are reported later than the express ones around them.
    assert same_tags(pair.a.acked, range(total))
    assert (a.unacked, a.unpersisted) == (0, 0)
    assert headers[-1].ack_sequence_number == total % 65536
    assert max(h.ack_sequence_number for h in headers) < 65536
    # 66500 recoverable packets: the bitmap's base wrapped too.
    bases = [h.recoverable_ack_sequence_number for h in headers]
    assert max(bases) > 65000
    last = headers[-1]
    highest = last.recoverable_ack_sequence_number + last.recoverable_ack_flags.bit_length() - 1
    assert highest == 66500 - 65536  # the last ack marks the last recoverable packet
    assert len(pair.b.arrived) == total


def test_a_base_at_zero_modulo_2_16_moves_one_lower() -> None:
    pair = opened_pair()
    pair.a.session._skip_counters(sent=65535, recoverable_sent=65535)
    pair.b.session._skip_counters(received=65535, recoverable_received=65535)
    pair.send(pair.a, 1, recoverable=True, now=T0)
    pair.send(pair.a, 2, recoverable=True, now=T0)
    pair.deliver(pair.b, T0)
    assert [d.recoverable_number for d in pair.b.arrived] == [65536, 65537]
    pair.persist_all(pair.b, T0)
    [send] = pair.tick(pair.b, T0 + 0.5)
    header = header_of(send)
    assert header.ack_sequence_number == 1  # 65537 mod 2^16
    # 65536 would be 0 ("no base") on the wire: the base is 65535, stored as well.
    assert (header.recoverable_ack_sequence_number, header.recoverable_ack_flags) == (
        0xFFFF,
        0b111,
    )
    pair.deliver(pair.a, T0 + 0.5)
    assert pair.a.closed == []
    assert pair.a.acked == [1, 2]


def test_skip_counters_needs_a_quiet_session() -> None:
    pair = opened_pair()
    pair.send(pair.a, 1, recoverable=False, now=T0)
    with pytest.raises(SessionError, match="quiet"):
        pair.a.session._skip_counters(sent=5)
    with pytest.raises(SessionError, match="exceed"):
        pair.b.session._skip_counters(received=1, recoverable_received=2)


# --------------------------------------------------------------------------
# Timers
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("side", "state"), [("a", "WAITING_ECR"), ("b", "WAITING_CP")])
def test_init_timeout(side: str, state: str) -> None:
    pair = Pair(
        a_settings=SessionSettings(init_timeout=30.0), b_settings=SessionSettings(init_timeout=30.0)
    )
    pair.apply(pair.a, pair.a.session.start(T0))
    pair.deliver(pair.b, T0 + 1)  # b answers; a's answer never comes
    endpoint = pair.a if side == "a" else pair.b
    if side == "a":
        pair.a.inbox.clear()
    assert endpoint.session.next_deadline() == T0 + 30.0
    assert pair.tick(endpoint, T0 + 29.999) == []
    [close] = pair.tick(endpoint, T0 + 30.0)
    assert isinstance(close, Close)
    assert "handshake" in close.reason
    assert state in close.reason
    assert endpoint.session.state is SessionState.CLOSED


def test_no_init_timeout_once_open() -> None:
    pair = opened_pair(a_settings=SessionSettings(init_timeout=30.0, idle_timeout=1000.0))
    assert pair.a.session.next_deadline() == T0 + 1000.0
    assert pair.tick(pair.a, T0 + 30.0) == []


def test_ack_wait_timeout_closes() -> None:
    pair = opened_pair()
    a = pair.a.session
    assert a.next_deadline() == T0 + 300.0  # idle only
    pair.send(pair.a, 1, recoverable=False, now=T0 + 5)
    assert a.next_deadline() == T0 + 25.0
    assert pair.tick(pair.a, T0 + 24.999) == []
    [close] = pair.tick(pair.a, T0 + 25.0)
    assert isinstance(close, Close)
    assert "no acknowledgement for 1 sent packets" in close.reason


def test_ack_wait_restarts_on_anything_received() -> None:
    pair = opened_pair()
    a = pair.a.session
    pair.send(pair.a, 1, recoverable=False, now=T0)
    pair.send(pair.b, 2, recoverable=False, now=T0 + 15)
    pair.deliver(pair.a, T0 + 15)
    assert a.next_deadline() == T0 + 25.0  # a's own ack-send timer for b's packet
    [send] = pair.tick(pair.a, T0 + 25.0)
    assert isinstance(send, Send)
    assert a.next_deadline() == T0 + 35.0  # 20 s after the last packet received
    assert pair.tick(pair.a, T0 + 34.999) == []
    [close] = pair.tick(pair.a, T0 + 35.0)
    assert isinstance(close, Close)


def test_ack_wait_covers_recoverable_packets_not_reported_stored() -> None:
    pair = opened_pair()
    pair.send(pair.a, 1, recoverable=True, now=T0)
    pair.deliver(pair.b, T0)
    pair.tick(pair.b, T0 + 10)  # session-level ack only
    pair.deliver(pair.a, T0 + 10)
    a = pair.a.session
    assert (a.unacked, a.unpersisted) == (0, 1)
    assert a.next_deadline() == T0 + 30.0
    [close] = pair.tick(pair.a, T0 + 30.0)
    assert isinstance(close, Close)


def test_ack_send_timer() -> None:
    pair = opened_pair(a_settings=SessionSettings(ack_timeout=40.0, recoverable_ack_timeout=2.0))
    b = pair.b.session
    assert b.ack_timeout == 40.0  # adopted from the initiator
    pair.send(pair.a, 1, recoverable=True, now=T0)
    pair.deliver(pair.b, T0)
    assert b.next_deadline() == T0 + 20.0  # AckWaitTimeout / 2
    pair.persist(pair.b, T0 + 1)
    assert b.next_deadline() == T0 + 3.0  # pulled in to RecoverableAckSendTimeout
    pair.send(pair.a, 2, recoverable=True, now=T0 + 2)
    pair.deliver(pair.b, T0 + 2)
    pair.persist(pair.b, T0 + 2.5)
    assert b.next_deadline() == T0 + 3.0  # never pushed out
    assert pair.tick(pair.b, T0 + 2.999) == []
    [send] = pair.tick(pair.b, T0 + 3.0)
    assert header_of(send).recoverable_ack_flags == 0b11
    assert b.next_deadline() == T0 + 2 + 300.0  # nothing left to acknowledge: idle only


def test_an_immediate_ack_leaves_no_ack_send_timer() -> None:
    pair = opened_pair(b_settings=SessionSettings(window_size=2))
    pair.send(pair.a, 1, recoverable=False, now=T0)
    pair.deliver(pair.b, T0)  # half the window: acknowledged at once
    assert len(pair.a.inbox) == 1
    assert pair.b.session.next_deadline() == T0 + 300.0  # idle only
    pair.send(pair.a, 2, recoverable=True, now=T0)
    pair.deliver(pair.b, T0)
    assert pair.b.session.next_deadline() == T0 + 10.0
    [send] = pair.persist(pair.b, T0 + 1)  # half the window again, with the bit
    assert header_of(send).recoverable_ack_flags == 1
    assert pair.b.session.next_deadline() == T0 + 300.0


def test_idle_timeout() -> None:
    pair = opened_pair(a_settings=SessionSettings(idle_timeout=100.0))
    a = pair.a.session
    assert a.next_deadline() == T0 + 100.0
    pair.send(pair.b, 1, recoverable=False, now=T0 + 50)  # a user packet arrives
    pair.deliver(pair.a, T0 + 50)
    assert a.next_deadline() == T0 + 60.0  # first a's ack-send timer
    pair.tick(pair.a, T0 + 60)
    pair.deliver(pair.b, T0 + 60)
    assert a.next_deadline() == T0 + 150.0
    pair.send(pair.a, 2, recoverable=False, now=T0 + 60)  # a user packet is sent
    pair.deliver(pair.b, T0 + 60)
    pair.tick(pair.b, T0 + 70)
    pair.deliver(pair.a, T0 + 70)  # a SessionAck is not a user packet
    assert a.next_deadline() == T0 + 160.0
    assert pair.tick(pair.a, T0 + 159.9) == []
    [close] = pair.tick(pair.a, T0 + 160.0)
    assert close == Close(reason="idle: no user packet for 100 s")


# --------------------------------------------------------------------------
# Whole conversations over a trickle of bytes
# --------------------------------------------------------------------------


def conversation(chunker: Chunker) -> Pair:
    """Handshake, both sides sending express and recoverable packets, acks both ways."""
    pair = Pair(chunker=chunker, b_settings=SessionSettings(window_size=6))
    pair.open()
    now = T0
    for round_ in range(5):
        now += 1
        for index in range(3):
            pair.send(pair.a, 100 * round_ + index, recoverable=index != 1, now=now)
            pair.send(pair.b, 1000 + 100 * round_ + index, recoverable=index == 1, now=now)
        pair.pump(now)
        pair.persist_all(pair.a, now)
        pair.persist_all(pair.b, now)
        pair.pump(now)
        now += 10
        pair.tick(pair.a, now)
        pair.tick(pair.b, now)
        pair.pump(now)
    return pair


def check_conversation(pair: Pair) -> None:
    assert pair.a.closed == pair.b.closed == []
    sent_by_a = [100 * r + i for r in range(5) for i in range(3)]
    assert pair.a.acked == sent_by_a
    assert pair.b.acked == [1000 + tag for tag in sent_by_a]
    assert [d.packet.user.message_id for d in pair.b.arrived] == sent_by_a
    assert pair.a.decoder.buffered == pair.b.decoder.buffered == 0


def test_conversation_fed_one_byte_at_a_time() -> None:
    check_conversation(conversation(byte_by_byte))


def test_conversation_fed_in_odd_chunks() -> None:
    check_conversation(conversation(odd_chunks))


# --------------------------------------------------------------------------
# Random interleavings
# --------------------------------------------------------------------------

SIDES = st.sampled_from(["a", "b"])


class Interleavings(RuleBasedStateMachine):
    """Random interleavings of sends, deliveries, persists, lost SessionAcks and time.

    Invariants: no tag is reported twice; a tag is reported only once the peer
    delivered it and, if recoverable, persisted it. At the end, once everything
    is delivered and stored and the timers ran, each sender has everything
    acknowledged or its session closed (after a lost ack, by the ack-wait timer).
    """

    def __init__(self) -> None:
        super().__init__()
        self.pair = Pair()
        self.now = T0
        self.tags = itertools.count()
        self.sent: dict[str, list[object]] = {"a": [], "b": []}
        self.ack_timeout = 20.0
        self.dropped = False

    def side(self, name: str) -> Endpoint:
        return self.pair.a if name == "a" else self.pair.b

    @initialize(window=st.integers(1, 40), ack_timeout=st.sampled_from([20.0, 60.0]))
    def open(self, window: int, ack_timeout: float) -> None:
        session_settings = SessionSettings(
            window_size=window, ack_timeout=ack_timeout, idle_timeout=1e9
        )
        self.pair = opened_pair(a_settings=session_settings, b_settings=session_settings)
        self.ack_timeout = ack_timeout

    @rule(name=SIDES, recoverable=st.booleans())
    def send(self, name: str, recoverable: bool) -> None:
        endpoint = self.side(name)
        if endpoint.session.can_send():
            tag = next(self.tags)
            self.pair.send(endpoint, tag, recoverable=recoverable, now=self.now)
            self.sent[name].append(tag)

    @rule(name=SIDES, count=st.integers(1, 4))
    def deliver(self, name: str, count: int) -> None:
        self.pair.deliver(self.side(name), self.now, count=count)

    @rule(name=SIDES)
    def lose_a_session_ack(self, name: str) -> None:
        inbox = self.side(name).inbox
        if inbox and isinstance(decode(inbox[0]), wire.SessionAck):
            del inbox[0]
            self.dropped = True

    @rule(name=SIDES, index=st.integers(0, 50))
    def persist(self, name: str, index: int) -> None:
        endpoint = self.side(name)
        if endpoint.to_persist:
            number = endpoint.to_persist[index % len(endpoint.to_persist)]
            self.pair.persist(endpoint, self.now, number)

    @rule(milliseconds=st.sampled_from([100, 500, 5_000]))
    def wait(self, milliseconds: int) -> None:
        self.now += milliseconds / 1000
        self.run_due_timers()

    @rule(name=SIDES)
    def sleep_until_deadline(self, name: str) -> None:
        """Time jumps to the side's next deadline, as its adapter's sleep would."""
        self.now = max(self.now, self.side(name).session.next_deadline() or self.now)
        self.run_due_timers()

    def run_due_timers(self) -> None:
        for endpoint in (self.pair.a, self.pair.b):
            deadline = endpoint.session.next_deadline()
            if deadline is not None and self.now >= deadline:
                self.pair.tick(endpoint, self.now)

    @invariant()
    def reported_once_and_only_when_stored(self) -> None:
        for endpoint in (self.pair.a, self.pair.b):
            peer = self.pair.other(endpoint)
            waiting = set(peer.to_persist)
            stored = {
                d.packet.user.message_id
                for d in peer.arrived
                if d.recoverable_number is None or d.recoverable_number not in waiting
            }
            assert len(endpoint.acked) == len(set(endpoint.acked)), "a tag was reported twice"
            assert set(endpoint.acked) <= stored, "a tag was reported before it was stored"

    def settled(self, endpoint: Endpoint) -> bool:
        session = endpoint.session
        if session.state is SessionState.CLOSED:
            return True
        return session.unacked == 0 and session.unpersisted == 0

    def teardown(self) -> None:
        # Drain: everything arrives and is stored; time jumps from deadline to
        # deadline until each side has nothing outstanding or has closed.
        pair = self.pair
        for _ in range(50):
            pair.pump(self.now)
            pair.persist_all(pair.a, self.now)
            pair.persist_all(pair.b, self.now)
            pair.pump(self.now)
            self.reported_once_and_only_when_stored()
            if self.settled(pair.a) and self.settled(pair.b):
                break
            deadlines = [
                deadline
                for deadline in (pair.a.session.next_deadline(), pair.b.session.next_deadline())
                if deadline is not None
            ]
            self.now = max(self.now, min(deadlines))
            self.run_due_timers()
        else:
            raise AssertionError("the sessions did not settle")
        for name in ("a", "b"):
            endpoint = self.side(name)
            if endpoint.session.state is not SessionState.CLOSED:
                assert same_tags(endpoint.acked, self.sent[name])
        if not self.dropped and not (pair.a.closed or pair.b.closed):
            assert len(pair.a.acked) == len(self.sent["a"])
            assert len(pair.b.acked) == len(self.sent["b"])


TestRandomInterleavings = Interleavings.TestCase
TestRandomInterleavings.settings = settings(max_examples=500, stateful_step_count=60)
