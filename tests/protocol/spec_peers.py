"""qmgr's two ends of the [MS-MQQB] example session, opened with the example's
frames, for the replay and Windows-peer tests: a :class:`Server` (qmgr as the
ACCEPTOR, with the receiver of messages) and a :class:`Client` (qmgr as the
INITIATOR, with one outgoing queue's sequence); the transactional stream the
example's client sends on, and small helpers over session actions."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import wire
from qmgr.protocol import (
    Accepted,
    Action,
    ArrivalKind,
    Arrived,
    Dropped,
    OutgoingSequence,
    PeerSession,
    Receiver,
    Role,
    Send,
    SessionSettings,
    SessionState,
)

from . import spec_packets as sp
from .spec_frames import (
    ACK_TIMEOUT,
    CLIENT_QM,
    CP_REQUEST,
    CP_RESPONSE,
    EC_REQUEST,
    RECOVERABLE_ACK_TIMEOUT,
    SERVER_QM,
    corrected_establish_response,
    decode_one,
)

T = 80_000.0
WALL = 1_700_000_000.0
#: The client's sequence: (Ordinal, Timestamp); Windows takes the install time.
SEQUENCE = (1, 0x5F00_0000)
SEQUENCE_ID = wire.TxSequenceId(ordinal=SEQUENCE[0], timestamp=SEQUENCE[1])
QUEUE = "OS:a04bm02\\private$\\orders"


def client_message(number: int, *, flags: int = 0, **parts: Any) -> bytes:
    """Message ``number`` of the client's sequence, written from the spec's rules;
    ``parts``: optional headers (see :func:`spec_packets.transactional_message`)."""
    return sp.transactional_message(
        source=CLIENT_QM,
        queue=QUEUE,
        message_id=0x900 + number,
        sequence=SEQUENCE,
        number=number,
        previous=number - 1,
        body=b"order %d" % number,
        tx_flags=flags,
        **parts,
    )


def only(actions: Sequence[Action], kind: type) -> object:
    """The one action in ``actions``, of type ``kind``."""
    [action] = actions
    assert isinstance(action, kind)
    return action


def sent_data(actions: Sequence[Action]) -> bytes:
    """The bytes of the one :class:`Send` in ``actions``."""
    send = only(actions, Send)
    assert isinstance(send, Send)
    return send.data


class Server:
    """qmgr as the example's server: its session, and its receiver of messages."""

    def __init__(self) -> None:
        self.session = PeerSession(Role.ACCEPTOR, local_qm=SERVER_QM, now=T)
        self.session.start(T)
        self.session.receive(decode_one(EC_REQUEST), T)
        self.session.receive(decode_one(CP_REQUEST), T)
        assert self.session.state is SessionState.OPEN
        self.receiver: Receiver[str] = Receiver(SERVER_QM, wall=WALL)

    def take(self, data: bytes, now: float) -> Accepted | Dropped:
        """Receive a message: the session counts it, the receiver decides, the
        store (here: nothing) persists it, the session may report it."""
        arrived = only(self.session.receive(decode_one(data), now), Arrived)
        assert isinstance(arrived, Arrived)
        assert self.receiver.arrive(arrived.packet, "client") is ArrivalKind.MESSAGE
        decision = self.receiver.accept(
            arrived.packet, queue_key="orders", relayed=False, now=now, wall=WALL
        )
        if isinstance(decision, Accepted):
            self.receiver.persisted(decision, now=now, wall=WALL)
        assert arrived.recoverable_number is not None
        assert self.session.persisted(arrived.recoverable_number, now) == []
        return decision


class Client:
    """qmgr as the example's client: its session and one outgoing queue's sequence."""

    def __init__(self, *, peer_window: int = 64) -> None:
        """Opened with the example's frames; ``peer_window`` replaces the WindowSize
        of the server's ConnectionParameters (64 in the example)."""
        self.session = PeerSession(
            Role.INITIATOR,
            local_qm=CLIENT_QM,
            remote_qm=SERVER_QM,
            settings=SessionSettings(
                ack_timeout=ACK_TIMEOUT, recoverable_ack_timeout=RECOVERABLE_ACK_TIMEOUT
            ),
            now=T,
        )
        self.session.start(T)
        self.session.receive(decode_one(corrected_establish_response()), T)
        self.session.receive(decode_one(CP_RESPONSE[:30] + struct.pack("<H", peer_window)), T)
        assert self.session.state is SessionState.OPEN
        self.sequence = OutgoingSequence(sequence_id=SEQUENCE_ID, base=100)
        self.receiver: Receiver[str] = Receiver(CLIENT_QM, wall=WALL)

    def transmit(self, now: float) -> bytes:
        """The next entry, as the outgoing queue sends it (its stored message with
        the header the sequence gives it)."""
        transmission = self.sequence.next_transmission(now)
        assert transmission is not None
        assert transmission.header is not None
        number = transmission.header.sequence_number
        data = wire.build_packet(
            wire.UserMessage(
                base=wire.BaseHeader(priority=0, time_to_reach_queue=345_600),
                user=wire.UserHeader(
                    source_qm=CLIENT_QM,
                    sent_time=1_700_000_000,
                    message_id=0x900 + number,
                    delivery=wire.DeliveryMode.RECOVERABLE,
                    destination=wire.DirectQueue(name=QUEUE),
                ),
                transaction=transmission.header,
                properties=wire.MessagePropertiesHeader(
                    body_type=wire.VarType.UI1_VECTOR, body=b"order %d" % number
                ),
            )
        )
        return self.session.send(data, recoverable=True, tag=transmission.lookup_id, now=now)
