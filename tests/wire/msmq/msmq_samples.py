"""Sample MSMQ packets shared by the tests, the fuzz harness and the benchmark.

* The [MS-MQQB] §4.1 example frames kept in ``vectors/``, and the 4.1.7 user
  message completed with the body bytes its dump leaves out.
* Hand-made values: an OrderAck and a FinalAck, a transactional message as a
  queue manager sends one, a message with every optional header, and a small
  express message to change field by field.
* Helpers that damage a packet's bytes, and one that expects them refused.

The fuzz harness and the benchmark run as scripts; they put ``tests/wire`` on
``sys.path`` and import it as ``msmq.msmq_samples``.
"""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from typing import Any

import wire

VECTORS = Path(__file__).parent / "vectors"

#: The example frames that hold one whole session packet each.
WHOLE_FRAMES = [
    "4.1.3-establish-connection-request",
    "4.1.4-establish-connection-response",
    "4.1.5-connection-parameters-request",
    "4.1.6-connection-parameters-response",
    "4.1.8-session-ack",
]
#: The example user message: its dump stops 574 bytes short of its PacketSize.
TRUNCATED_USER_MESSAGE = "4.1.7-user-message-truncated"

#: The queue manager that acknowledges, in the sample acks.
RECEIVER = uuid.UUID("11111111-2222-3333-4444-555555555555")
#: The queue manager that sent the acknowledged messages, in the sample acks.
SENDER = uuid.UUID("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
#: The sequence the sample acks acknowledge.
SEQUENCE = wire.TxSequenceId(ordinal=3, timestamp=1_700_000_000)

#: The sender of the sample transactional message.
MESSAGE_SOURCE = uuid.UUID("6f9619ff-8b86-d011-b42d-00c04fc964ff")
#: The destination of the sample transactional message.
ORDERS = wire.DirectQueue(name="TCP:10.0.0.5\\private$\\orders")
#: The sample transactional message's TransactionHeader: the first of its transaction.
FIRST_OF_TRANSACTION = wire.TransactionHeader(
    flags=wire.TransactionFlags.FIRST,
    transaction_id=77,
    sequence_id=wire.TxSequenceId(ordinal=1, timestamp=1_700_000_000),
    sequence_number=5_000,
    previous_sequence_number=4_999,
)
#: The sample transactional message's label and 256-byte body.
ORDER_PROPERTIES = wire.MessagePropertiesHeader(
    label="order 123456", body_type=wire.VarType.UI1_VECTOR, body=bytes(range(256))
)


def frame(name: str) -> bytes:
    """The bytes of the example frame ``vectors/<name>.hex``."""
    return bytes.fromhex((VECTORS / f"{name}.hex").read_text())


def completed_user_message(padding: bytes = b"\x00\x00") -> bytes:
    """4.1.7 with the 572 missing body bytes (more UTF-16 "a") and its 2 padding bytes."""
    return frame(TRUNCATED_USER_MESSAGE) + b"a\x00" * 286 + padding


def order_ack(**changes: object) -> wire.OrderAck:
    """An OrderAck to the sender's private ``order_queue$``, with ``changes`` applied."""
    ack = wire.OrderAck(
        source_qm=RECEIVER,
        destination_qm=SENDER,
        message_id=17,
        sent_time=1_700_000_100,
        sequence_id=SEQUENCE,
        sequence_number=9,
        previous_sequence_number=8,
    )
    return dataclasses.replace(ack, **changes)  # type: ignore[arg-type]


def final_ack(**changes: object) -> wire.FinalAck:
    """A FinalAck (the message was purged) to a direct order queue, with ``changes`` applied."""
    ack = wire.FinalAck(
        source_qm=RECEIVER,
        destination=wire.DirectQueue(name="TCP:192.0.2.7\\PRIVATE$\\order_queue$"),
        message_id=18,
        sent_time=1_700_000_200,
        message_class=wire.MessageClass.NACK_Q_PURGED,
        sequence_id=SEQUENCE,
        sequence_number=9,
        previous_sequence_number=8,
        acked_source_qm=SENDER,
        acked_message_id=4242,
    )
    return dataclasses.replace(ack, **changes)  # type: ignore[arg-type]


def transactional_message(
    *,
    source_qm: uuid.UUID = MESSAGE_SOURCE,
    sent_time: int = 1_700_000_000,
    message_id: int = 123_456,
    time_to_reach_queue: int = 345_600,
    destination: wire.DirectQueue = ORDERS,
    transaction: wire.TransactionHeader = FIRST_OF_TRANSACTION,
    security: wire.SecurityHeader | None = None,
    properties: wire.MessagePropertiesHeader = ORDER_PROPERTIES,
    session: wire.SessionHeader | None = None,
) -> wire.UserMessage:
    """A transactional message as a queue manager sends one: recoverable, PR=0, to a
    direct name; by default with a label and a 256-byte body (484 bytes on the wire)."""
    return wire.UserMessage(
        base=wire.BaseHeader(priority=0, time_to_reach_queue=time_to_reach_queue),
        user=wire.UserHeader(
            source_qm=source_qm,
            sent_time=sent_time,
            message_id=message_id,
            delivery=wire.DeliveryMode.RECOVERABLE,
            destination=destination,
        ),
        transaction=transaction,
        security=security,
        properties=properties,
        session=session,
    )


def message_with_every_header() -> wire.UserMessage:
    """A transactional message with every optional header, queue and field present."""
    qm = uuid.UUID(int=0x1234_5678_9ABC_DEF0_1122_3344_5566_7788)
    message = transactional_message(
        source_qm=qm,
        message_id=42,
        transaction=wire.TransactionHeader(
            flags=wire.TransactionFlags.FIRST | wire.TransactionFlags.FINAL_ACK,
            transaction_id=5,
            sequence_id=wire.TxSequenceId(ordinal=1, timestamp=1_700_000_000),
            sequence_number=3,
            previous_sequence_number=2,
            connector_qm=qm,
        ),
        security=wire.SecurityHeader(flags=1, sender_id=b"\x01\x05" + bytes(26), signature=b"sig"),
        properties=wire.MessagePropertiesHeader(
            flags=wire.AckFlags.NEGATIVE_ARRIVAL,
            label="label",
            extension=b"ext",
            body=b"body" * 10,
        ),
        session=wire.SessionHeader(ack_sequence_number=9),
    )
    return dataclasses.replace(
        message,
        base=wire.BaseHeader(priority=0, flags=wire.BaseFlags.TRACE),
        user=dataclasses.replace(
            message.user,
            admin=wire.PrivateQueue(qm=qm, number=7),
            response=wire.PublicQueue(queue_id=qm),
            connector_type=qm,
        ),
        debug=wire.DebugHeader(queue=qm),
        soap=wire.SoapHeader(header="<h/>", body="<b/>"),
        multi_queue=wire.MultiQueueFormatHeader(
            destination=wire.MqfAddressHeader.from_elements(
                (wire.DirectQueue(name="OS:host\\q"), wire.PrivateQueue(qm=qm, number=1))
            ),
            signature=wire.MqfSignatureHeader(signature=b"s"),
        ),
        trailer=b"\x0c\x00\x00\x00trailer!",
    )


# --- a small message, and damaging packets ---------------------------------------------------

#: The source of :func:`express_message`.
QM = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def express_message(**changes: Any) -> wire.UserMessage:
    """An express message to a direct queue, with a label and a body, and ``changes``:
    ``user_<field>`` and ``props_<field>`` change its UserHeader and its
    MessagePropertiesHeader, any other name the UserMessage itself."""
    user_changes = {k[5:]: changes.pop(k) for k in list(changes) if k.startswith("user_")}
    props_changes = {k[6:]: changes.pop(k) for k in list(changes) if k.startswith("props_")}
    base = wire.UserMessage(
        user=wire.UserHeader(
            source_qm=QM,
            sent_time=1_700_000_000,
            message_id=1,
            destination=wire.DirectQueue(name="OS:host\\private$\\q"),
        ),
        properties=wire.MessagePropertiesHeader(label="hello", body=b"payload"),
    )
    return dataclasses.replace(
        base,
        user=dataclasses.replace(base.user, **user_changes),
        properties=dataclasses.replace(base.properties, **props_changes),
        **changes,
    )


def patched(data: bytes, offset: int, value: bytes) -> bytes:
    """``data`` with ``value`` written over it at ``offset``."""
    return data[:offset] + value + data[offset + len(value) :]


def u16(value: int) -> bytes:
    """A little-endian u16."""
    return value.to_bytes(2, "little")


def u32(value: int) -> bytes:
    """A little-endian u32."""
    return value.to_bytes(4, "little")


def refused(data: bytes) -> wire.RemoteProtocolError:
    """The error ``parse_packet`` refuses ``data`` with (failing when it parses)."""
    try:
        wire.parse_packet(data)
    except wire.RemoteProtocolError as exc:
        return exc
    raise AssertionError(f"{len(data)} bytes parsed; they should have been refused")
