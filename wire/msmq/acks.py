"""OrderAck and FinalAck: the transactional acknowledgements, and packet classification.

On the wire both are ordinary UserMessages addressed to the original sender's
``order_queue$``, labelled "QM Ordering Ack", with a 36-byte body
([MS-MQQB] §2.2.4, §2.2.5). :func:`classify_packet` tells them apart from
other packets by the rules of [MS-MQQB] §3.1.5.1.1; :class:`OrderAck` and
:class:`FinalAck` are typed views that decode such a message
(``from_message``) and build one (``to_message``, or :func:`wire.build_packet`
directly).

The views keep what the acknowledgement means plus the addressing needed to
send it; they do not keep arbitrary bytes of a received packet (the
BaseHeader's Reserved byte, padding). Round trips of the raw bytes go through
the :class:`UserMessage` that :func:`wire.parse_packet` returns.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Any

from ..protocol_errors import LocalProtocolError, RemoteProtocolError
from .constants import (
    INFINITE,
    NULL_GUID,
    ORDER_ACK_BODY_SIZE,
    ORDER_ACK_LABEL,
    DeliveryMode,
    MessageClass,
    VarType,
)
from .fixed import FINAL_ACK_BODY, ORDER_ACK_BODY, FixedLayout
from .headers import BaseHeader, MessagePropertiesHeader, TxSequenceId, UserHeader
from .packets import (
    ConnectionParameters,
    EstablishConnection,
    Packet,
    SessionAck,
    UserMessage,
)
from .queues import ORDER_QUEUE, DirectQueue, PrivateQueueId, is_order_queue
from .trusted import new, trusted_constructor

#: The lowest MessageClass of a FinalAck ([MS-MQQB] §3.1.5.1.1).
_FINAL_ACK_MIN_CLASS = 0x4000


class PacketKind(enum.Enum):
    """What a received packet is, per [MS-MQQB] §3.1.5.1.1."""

    ESTABLISH_CONNECTION = "EstablishConnection"
    CONNECTION_PARAMETERS = "ConnectionParameters"
    SESSION_ACK = "SessionAck"
    #: A UserMessage that is an OrderAck: decode it with :meth:`OrderAck.from_message`.
    ORDER_ACK = "OrderAck"
    #: A UserMessage that is a FinalAck: decode it with :meth:`FinalAck.from_message`.
    FINAL_ACK = "FinalAck"
    #: Any other UserMessage, administration acknowledgements included.
    USER_MESSAGE = "UserMessage"


def classify_packet(packet: Packet) -> PacketKind:
    """Say what a parsed packet is ([MS-MQQB] §3.1.5.1.1, reference §10).

    A UserMessage is an OrderAck when its destination is ``order_queue$``
    (private queue 4 on the destination, or a direct ``...\\PRIVATE$\\order_queue$``
    name), its Label is "QM Ordering Ack", its body is 36 bytes and its class
    is ORDER_ACK; a FinalAck when the same holds with a class of 0x4000 or
    more. BaseHeader.Flags, which the spec wants all clear, is not looked at:
    a piggy-backed SessionHeader does not change what the message is. Whether
    the order queue is *this* queue manager's is for the caller to check.
    """
    if isinstance(packet, UserMessage):
        return _user_message_kind(packet)
    kind = _INTERNAL_KINDS.get(type(packet))
    if kind is None:
        msg = f"not a packet value: {type(packet).__name__}"
        raise TypeError(msg)
    return kind


_INTERNAL_KINDS: dict[type, PacketKind] = {
    SessionAck: PacketKind.SESSION_ACK,
    ConnectionParameters: PacketKind.CONNECTION_PARAMETERS,
    EstablishConnection: PacketKind.ESTABLISH_CONNECTION,
}


def _user_message_kind(message: UserMessage) -> PacketKind:
    properties = message.properties
    if (
        properties.label != ORDER_ACK_LABEL
        or len(properties.body) != ORDER_ACK_BODY_SIZE
        or not is_order_queue(message.user.destination)
    ):
        return PacketKind.USER_MESSAGE
    if properties.message_class == MessageClass.ORDER_ACK:
        return PacketKind.ORDER_ACK
    if properties.message_class >= _FINAL_ACK_MIN_CLASS:
        return PacketKind.FINAL_ACK
    return PacketKind.USER_MESSAGE


@dataclass(frozen=True, kw_only=True)
class _AckEnvelope:
    """The fields an OrderAck and a FinalAck share: the user message around the body.

    It has no slots of its own (``__slots__`` is empty), so each subclass holds
    every field, inherited ones included, in its own slots: that keeps instances
    without a ``__dict__`` and lets :func:`trusted_constructor` fill them.

    Attributes:
        source_qm: the acknowledging queue manager (it sends the ack).
        destination: the original sender's ``order_queue$``: private queue 4
            (the default) or a direct name ``TCP:<ip>\\PRIVATE$\\order_queue$``.
        destination_qm: the original sender's GUID when ``destination`` is the
            private queue id; the NULL GUID for a direct name.
        message_id: this packet's own message ordinal.
        sent_time: Unix seconds.
        time_to_reach_queue: BaseHeader TimeToReachQueue.
        time_to_be_received: UserHeader TimeToBeReceived.
    """

    __slots__ = ()

    source_qm: uuid.UUID
    destination: PrivateQueueId | DirectQueue = ORDER_QUEUE
    destination_qm: uuid.UUID = NULL_GUID
    message_id: int
    sent_time: int
    time_to_reach_queue: int = INFINITE
    time_to_be_received: int = INFINITE


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderAck(_AckEnvelope):
    """An OrderAck ([MS-MQQB] §2.2.4): "every message of the sequence up to here is accepted".

    The envelope fields are those of :class:`_AckEnvelope`; ``source_qm`` is the
    receiving queue manager that accepted the messages.

    Attributes:
        sequence_id: TxSequenceID of the acknowledged sequence.
        sequence_number: the highest in-order sequence number accepted.
        previous_sequence_number: SHOULD be ``sequence_number - 1``.
        reserved: the 20 reserved body bytes (SHOULD be zero; Windows sends garbage).
    """

    sequence_id: TxSequenceId
    sequence_number: int
    previous_sequence_number: int
    reserved: bytes = bytes(20)

    def to_message(self) -> UserMessage:
        """The UserMessage that carries this OrderAck: express, flags all clear.

        Raises:
            LocalProtocolError: a body field does not fit.
        """
        body = ORDER_ACK_BODY.build(
            self.sequence_id.ordinal,
            self.sequence_id.timestamp,
            self.sequence_number,
            self.previous_sequence_number,
            _exact_bytes(self.reserved, 20, "OrderAck.reserved"),
        )
        return _ack_message(self, MessageClass.ORDER_ACK, DeliveryMode.EXPRESS, body)

    @classmethod
    def from_message(cls, message: UserMessage) -> OrderAck:
        """Decode the OrderAck that ``message`` carries.

        Raises:
            RemoteProtocolError: ``message`` is not an OrderAck (see :func:`classify_packet`).
        """
        fields, (reserved,) = _read_ack(message, PacketKind.ORDER_ACK, ORDER_ACK_BODY)
        make = _new_order_ack if cls is OrderAck else cls  # a subclass gets its own __init__
        return make(**fields, reserved=reserved)


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalAck(_AckEnvelope):
    """A FinalAck ([MS-MQQB] §2.2.5): the final fate of one transactional message.

    The envelope fields are those of :class:`_AckEnvelope`; ``source_qm`` is the
    destination queue manager of the acknowledged message.

    Attributes:
        message_class: ACK_RECEIVE, or the NACK class saying why the message left
            its queue unread (0x4000 or more).
        sequence_id: TxSequenceID of the acknowledged message.
        sequence_number: its TxSequenceNumber.
        previous_sequence_number: its predecessor's sequence number.
        acked_source_qm: SourceGUID of the acknowledged message.
        acked_message_id: MessageID of the acknowledged message.
    """

    message_class: int = MessageClass.ACK_RECEIVE
    sequence_id: TxSequenceId
    sequence_number: int
    previous_sequence_number: int
    acked_source_qm: uuid.UUID
    acked_message_id: int

    def to_message(self) -> UserMessage:
        """The UserMessage that carries this FinalAck: recoverable, flags otherwise clear.

        Raises:
            LocalProtocolError: a body field does not fit, or the class is below 0x4000.
        """
        if not isinstance(self.message_class, int) or not (
            _FINAL_ACK_MIN_CLASS <= self.message_class <= 0xFFFF
        ):
            msg = f"a FinalAck class is 0x4000..0xffff, got {self.message_class!r}"
            raise LocalProtocolError(msg, field="FinalAck.message_class")
        body = FINAL_ACK_BODY.build(
            self.sequence_id.ordinal,
            self.sequence_id.timestamp,
            self.sequence_number,
            self.previous_sequence_number,
            _guid_bytes(self.acked_source_qm, "FinalAck.acked_source_qm"),
            self.acked_message_id,
        )
        return _ack_message(self, self.message_class, DeliveryMode.RECOVERABLE, body)

    @classmethod
    def from_message(cls, message: UserMessage) -> FinalAck:
        """Decode the FinalAck that ``message`` carries.

        Raises:
            RemoteProtocolError: ``message`` is not a FinalAck (see :func:`classify_packet`).
        """
        fields, (source, acked_id) = _read_ack(message, PacketKind.FINAL_ACK, FINAL_ACK_BODY)
        make = _new_final_ack if cls is FinalAck else cls  # a subclass gets its own __init__
        return make(
            **fields,
            message_class=message.properties.message_class,
            acked_source_qm=uuid.UUID(bytes_le=source),
            acked_message_id=acked_id,
        )


# Constructors of the views decoded from a message, whose fields need no checks.
_new_order_ack = trusted_constructor(OrderAck)
_new_final_ack = trusted_constructor(FinalAck)


def _read_ack(
    message: UserMessage, kind: PacketKind, layout: FixedLayout
) -> tuple[dict[str, Any], list[Any]]:
    """Check that ``message`` is an ack of ``kind`` and decode it.

    Returns:
        The fields every ack view has (envelope and sequence position), and the
        body fields that follow the sequence position.

    Raises:
        RemoteProtocolError: ``message`` is not an ack of ``kind``.
    """
    found = _user_message_kind(message)
    if found is not kind:
        msg = f"expected {kind.value}, got {found.value}"
        raise RemoteProtocolError(msg, field="UserMessage")
    ordinal, timestamp, number, previous, *rest = layout.unpack_from(message.properties.body)
    user = message.user
    fields = {
        "source_qm": user.source_qm,
        # Classification has established that the destination is an order queue.
        "destination": user.destination,
        "destination_qm": user.destination_qm,
        "message_id": user.message_id,
        "sent_time": user.sent_time,
        "time_to_reach_queue": message.base.time_to_reach_queue,
        "time_to_be_received": user.time_to_be_received,
        "sequence_id": new.TxSequenceId(ordinal=ordinal, timestamp=timestamp),
        "sequence_number": number,
        "previous_sequence_number": previous,
    }
    return fields, rest


def _ack_message(
    ack: OrderAck | FinalAck, message_class: int, delivery: int, body: bytes
) -> UserMessage:
    return UserMessage(
        base=BaseHeader(priority=0, time_to_reach_queue=ack.time_to_reach_queue),
        user=UserHeader(
            source_qm=ack.source_qm,
            destination_qm=ack.destination_qm,
            time_to_be_received=ack.time_to_be_received,
            sent_time=ack.sent_time,
            message_id=ack.message_id,
            delivery=delivery,
            destination=ack.destination,
        ),
        properties=MessagePropertiesHeader(
            message_class=message_class,
            body_type=VarType.EMPTY,
            label=ORDER_ACK_LABEL,
            body=body,
        ),
    )


def _exact_bytes(value: bytes, size: int, field: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != size:
        msg = f"must be {size} bytes, got {value!r:.60}"
        raise LocalProtocolError(msg, field=field)
    return value


def _guid_bytes(value: object, field: str) -> bytes:
    if not isinstance(value, uuid.UUID):
        msg = f"expected a uuid.UUID, got {type(value).__name__}"
        raise LocalProtocolError(msg, field=field)
    return value.bytes_le
