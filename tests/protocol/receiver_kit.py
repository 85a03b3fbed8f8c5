"""Packets and a receiver for the tests of ``qmgr.protocol.receiver``: messages,
OrderAcks and FinalAcks from two source queue managers, a receiver at a fixed
wall time, and its accept decision as the tests check it."""

from __future__ import annotations

import uuid

import wire
from qmgr.protocol import (
    Accepted,
    ArrivalKind,
    Dropped,
    Receiver,
    ReturnPaths,
)

from .model_kit import A_QM, B_QM, C_QM, T0

LOCAL = uuid.UUID("10000000-0000-4000-8000-000000000001")
A, B, C = A_QM, B_QM, C_QM
SEQ = wire.TxSequenceId(ordinal=1, timestamp=1_700_000_000)
WALL = 1_700_000_000.0
ORDERS = "orders"
PLAIN = "plain"


def message(
    source: uuid.UUID,
    message_id: int,
    queue: str = ORDERS,
    *,
    number: int | None = None,
    previous: int | None = None,
    sequence_id: wire.TxSequenceId = SEQ,
) -> wire.UserMessage:
    """A recoverable message from ``source`` to ``queue``; transactional with
    ``number`` (of ``sequence_id``)."""
    header = None
    if number is not None:
        header = wire.TransactionHeader(
            sequence_id=sequence_id,
            sequence_number=number,
            previous_sequence_number=number - 1 if previous is None else previous,
        )
    return wire.UserMessage(
        user=wire.UserHeader(
            source_qm=source,
            sent_time=1_700_000_000,
            message_id=message_id,
            delivery=wire.DeliveryMode.RECOVERABLE,
            destination=wire.DirectQueue(name=f"TCP:10.0.0.9\\private$\\{queue}"),
        ),
        transaction=header,
        properties=wire.MessagePropertiesHeader(body=b"m%d" % message_id),
    )


def order_ack(
    destination_qm: uuid.UUID,
    number: int,
    *,
    sender: uuid.UUID = C,
    sequence_id: wire.TxSequenceId = SEQ,
) -> wire.UserMessage:
    """``sender``'s OrderAck for ``destination_qm``'s stream ``sequence_id``, up
    to ``number``."""
    return wire.OrderAck(
        source_qm=sender,
        destination_qm=destination_qm,
        message_id=1,
        sent_time=1_700_000_000,
        sequence_id=sequence_id,
        sequence_number=number,
        previous_sequence_number=number - 1,
    ).to_message()


def final_ack(acked_source: uuid.UUID) -> wire.UserMessage:
    return wire.FinalAck(
        source_qm=C,
        message_id=2,
        sent_time=1_700_000_000,
        sequence_id=SEQ,
        sequence_number=1,
        previous_sequence_number=0,
        acked_source_qm=acked_source,
        acked_message_id=9,
    ).to_message()


_RETURN_PATHS_ARGS = frozenset({"router", "closing", "vias", "hop_of", "relayed_sources"})


def receiver(**kwargs: object) -> Receiver[str]:
    """A receiver for this queue manager (``LOCAL``); the arguments of its
    :class:`ReturnPaths` (``router``, ``closing``, ``vias``, ``hop_of``,
    ``relayed_sources``) may be given with the receiver's own."""
    paths = {name: kwargs.pop(name) for name in _RETURN_PATHS_ARGS & kwargs.keys()}
    return_paths: ReturnPaths[str] = ReturnPaths(**paths)  # type: ignore[arg-type]
    return Receiver(LOCAL, wall=WALL, return_paths=return_paths, **kwargs)  # type: ignore[arg-type]


def accept(
    machine: Receiver[str],
    packet: wire.UserMessage,
    queue: str | None = ORDERS,
    *,
    path: str = "conn-1",
    now: float = T0,
    wall: float = WALL,
) -> Accepted | Dropped:
    """Arrive and accept, as the adapter does for a message to a queue here."""
    assert machine.arrive(packet, path) is ArrivalKind.MESSAGE
    return machine.accept(packet, queue_key=queue, relayed=False, now=now, wall=wall)


def parse_packet(data: bytes) -> wire.UserMessage:
    decoder = wire.FrameDecoder()
    decoder.receive_data(data)
    packet = decoder.next_packet()
    assert isinstance(packet, wire.UserMessage)
    return packet


def parse_order_ack(data: bytes) -> wire.OrderAck:
    return wire.OrderAck.from_message(parse_packet(data))


def announced(
    machine: Receiver[str], decisions: list[Accepted | Dropped]
) -> list[tuple[str, wire.OrderAck]]:
    """Persist the accepted ``decisions``: the OrderAcks due a second later, with their paths."""
    for decision in decisions:
        assert isinstance(decision, Accepted)
        machine.persisted(decision, now=T0, wall=WALL)
    return [(path, parse_order_ack(data)) for path, data in machine.order_acks(T0 + 1, WALL)]
