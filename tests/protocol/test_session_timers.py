"""PeerSession's timers, and whole conversations fed in pieces
(``qmgr.protocol.session``), driven without sockets (:mod:`.session_kit`)."""

from __future__ import annotations

import pytest

from qmgr.protocol import (
    Close,
    Send,
    SessionSettings,
    SessionState,
)

from .model_kit import T0
from .session_kit import (
    Chunker,
    Pair,
    byte_by_byte,
    header_of,
    odd_chunks,
    opened_pair,
)

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
    assert a.silent_since is None
    [close] = pair.tick(pair.a, T0 + 25.0)
    assert isinstance(close, Close)
    assert "no acknowledgement for 1 sent packets" in close.reason
    # The peer has been silent since the send (nothing outstanding before it).
    assert a.silent_since == T0 + 5


def test_ack_wait_restarts_while_the_packets_still_reach_the_peer() -> None:
    # A large packet on a slow link: the peer's TCP takes more of it now and then.
    pair = opened_pair()
    a = pair.a.session
    a.transmitting(T0 + 1)  # nothing outstanding: changes nothing
    assert a.next_deadline() == T0 + 300.0
    pair.send(pair.a, 1, recoverable=True, now=T0 + 5)
    assert a.next_deadline() == T0 + 25.0
    a.transmitting(T0 + 25.0)
    assert pair.tick(pair.a, T0 + 25.0) == []
    assert a.next_deadline() == T0 + 45.0
    [close] = pair.tick(pair.a, T0 + 45.0)  # nothing more went through
    assert isinstance(close, Close)


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


@pytest.mark.parametrize(
    ("announced", "own", "adopted"),
    [
        (4e6, 30.0, 120.0),
        (1.0, 30.0, 20.0),
        (60.0, 30.0, 60.0),
        # An operator's own setting outside the range widens it, so that two
        # queue managers configured alike agree.
        (300.0, 300.0, 300.0),
        (4e6, 300.0, 300.0),
        (2.0, 2.0, 2.0),
        (0.5, 2.0, 2.0),
    ],
)
def test_the_acceptor_adopts_an_ack_timeout_within_the_spec_range(
    announced: float, own: float, adopted: float
) -> None:
    """A peer cannot switch off the close of a session whose acknowledgments stop
    (0xFFFFFFFF ms is 50 days) nor make it hair-trigger: 20..120 s, as the spec's range."""
    pair = opened_pair(
        a_settings=SessionSettings(ack_timeout=announced),
        b_settings=SessionSettings(ack_timeout=own),
    )
    assert pair.b.session.ack_timeout == adopted


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
    assert a.silent_since is None  # idle is not silent: the peer answered


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
