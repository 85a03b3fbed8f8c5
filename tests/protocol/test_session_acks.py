"""PeerSession's windows, SessionAcks and counters (``qmgr.protocol.session``),
driven without sockets (:mod:`.session_kit`)."""

from __future__ import annotations

import dataclasses

import pytest

import wire
from qmgr.protocol import (
    Close,
    Send,
    SessionError,
    SessionSettings,
    SessionState,
)

from .model_kit import T0
from .session_kit import (
    FULL_BITMAP,
    decode,
    header_of,
    opened_pair,
    same_tags,
    user_message,
    user_packet,
)

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
    wide = SessionSettings(window_size=200)
    pair = opened_pair(a_settings=wide, b_settings=wide)
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
    wide = SessionSettings(window_size=200)
    pair = opened_pair(a_settings=wide, b_settings=wide)
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
    # The 32 lowest fill one bitmap; the rest go in a second SessionAck at once,
    # not a recoverable_ack_timeout later (a backlog drains at the link's pace).
    first, second = pair.persist(pair.b, T0 + 11, 1)
    assert (
        header_of(first).recoverable_ack_sequence_number,
        header_of(first).recoverable_ack_flags,
    ) == (1, FULL_BITMAP)
    assert (
        header_of(second).recoverable_ack_sequence_number,
        header_of(second).recoverable_ack_flags,
    ) == (33, 0b11)
    assert pair.b.session.next_deadline() != T0 + 11.5  # nothing left to mark
    pair.deliver(pair.a, T0 + 11)
    assert pair.a.acked == list(range(1, 35))


def test_a_backlog_of_stored_packets_is_acknowledged_at_once() -> None:
    pair = opened_pair(b_settings=SessionSettings(window_size=512))
    for tag in range(1, 301):
        pair.send(pair.a, tag, recoverable=True, now=T0)
    pair.deliver(pair.b, T0)
    for number in range(2, 301):  # stored behind a gap at 1
        pair.persist(pair.b, T0, number)
    sends = pair.persist(pair.b, T0 + 1, 1)
    assert len(sends) == 10  # 300 numbers, 32 a bitmap
    pair.deliver(pair.a, T0 + 1)
    assert pair.a.acked == list(range(1, 301))


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


@pytest.mark.parametrize(
    ("sender_window", "receiver_window"), [(64, 8), (8, 2048)], ids=["ours", "the-senders"]
)
def test_express_stream_is_acked_at_half_the_smaller_window_on_receipt(
    sender_window: int, receiver_window: int
) -> None:
    """At half our window, or half the sender's when it is smaller: a sender stops
    at its own window ([MS-MQQB] §3.1.7.1: 64 on Windows), which it announced, so
    the receiver acknowledges before that fills, however large its own window is
    (else the sender would wait for the acknowledgment timer)."""
    pair = opened_pair(
        a_settings=SessionSettings(window_size=sender_window),
        b_settings=SessionSettings(window_size=receiver_window),
    )
    for tag in range(4):
        pair.send(pair.a, tag, recoverable=False, now=T0)
    pair.deliver(pair.b, T0, count=3)
    assert pair.a.inbox == []
    pair.deliver(pair.b, T0, count=1)
    [data] = pair.a.inbox
    assert decode(data) == wire.SessionAck(
        session=wire.SessionHeader(ack_sequence_number=4, window_size=receiver_window)
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
