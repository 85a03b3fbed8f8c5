"""PeerSession, the MQQB session state machine, driven without sockets: the
handshake, and every packet in every state. Two sessions talk through the bytes
of ``wire.build_packet`` and a ``wire.FrameDecoder`` each (:mod:`.session_kit`);
time is the explicit ``now`` of every call; windows and acknowledgments, timers
and random interleavings have files of their own beside this one.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

import pytest

import wire
from qmgr.protocol import (
    Close,
    Opened,
    PeerSession,
    Role,
    SessionError,
    SessionSettings,
    SessionState,
)

from .model_kit import A_QM, B_QM, C_QM, T0
from .session_kit import (
    Chunker,
    Pair,
    byte_by_byte,
    decode,
    odd_chunks,
    opened_pair,
    sent,
    state_of,
    user_message,
    user_packet,
    whole,
)

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
