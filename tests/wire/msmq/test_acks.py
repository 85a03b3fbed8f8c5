"""OrderAck and FinalAck: the user messages they build, and how they are recognised."""

from __future__ import annotations

import dataclasses

import pytest

import wire

from .msmq_samples import SENDER, final_ack, order_ack


def test_order_ack_is_an_express_user_message_to_order_queue() -> None:
    data = wire.build_packet(order_ack())
    assert int.from_bytes(data[2:4], "little") == 0  # BaseHeader.Flags all clear
    # UserHeader.Flags: MP and DQ=3 only; DM=0 (express).
    assert int.from_bytes(data[60:64], "little") == 0x00200000 | (3 << 10)
    assert data[64:68] == (4).to_bytes(4, "little")  # PrivateQueueIdentifier 4
    message = wire.parse_packet(data)
    assert isinstance(message, wire.UserMessage)
    assert message.properties.label == "QM Ordering Ack"
    assert message.properties.message_class == wire.MessageClass.ORDER_ACK
    assert message.properties.body_type == wire.VarType.EMPTY
    assert message.properties.flags == 0
    body = message.properties.body
    assert len(body) == 0x24
    assert body == (
        (3).to_bytes(4, "little")
        + (1_700_000_000).to_bytes(4, "little")
        + (9).to_bytes(4, "little")
        + (8).to_bytes(4, "little")
        + bytes(20)
    )


def test_final_ack_is_recoverable_and_carries_the_acked_message_id() -> None:
    data = wire.build_packet(final_ack())
    flags = int.from_bytes(data[60:64], "little")
    assert flags == 0x00200000 | (7 << 10) | (1 << 5)  # MP, DQ=7, DM=1
    message = wire.parse_packet(data)
    assert isinstance(message, wire.UserMessage)
    assert message.user.destination_qm == wire.NULL_GUID
    assert message.properties.body[16:32] == SENDER.bytes_le
    assert message.properties.body[32:36] == (4242).to_bytes(4, "little")
    assert wire.FinalAck.from_message(message) == final_ack()


@pytest.mark.parametrize(
    "destination",
    [
        wire.ORDER_QUEUE,
        wire.DirectQueue(name="TCP:10.1.2.3\\PRIVATE$\\order_queue$"),
        wire.DirectQueue(name="tcp:10.1.2.3\\private$\\ORDER_QUEUE$"),
        wire.DirectQueue(name="TCP:2001:db8::1\\PRIVATE$\\order_queue$"),
        wire.DirectQueue(name="SPX:00000001.00a0c9123456\\PRIVATE$\\order_queue$"),
    ],
)
def test_order_queue_addresses(destination: wire.PrivateQueueId | wire.DirectQueue) -> None:
    assert wire.is_order_queue(destination)
    message = wire.parse_packet(wire.build_packet(order_ack(destination=destination)))
    assert isinstance(message, wire.UserMessage)
    assert wire.classify_packet(message) is wire.PacketKind.ORDER_ACK


def test_a_piggy_backed_session_header_does_not_change_the_kind() -> None:
    message = dataclasses.replace(
        order_ack().to_message(), session=wire.SessionHeader(ack_sequence_number=3)
    )
    parsed = wire.parse_packet(wire.build_packet(message))
    assert isinstance(parsed, wire.UserMessage)
    assert wire.classify_packet(parsed) is wire.PacketKind.ORDER_ACK
    assert wire.OrderAck.from_message(parsed) == order_ack()


def lookalike(**changes: object) -> wire.UserMessage:
    message = order_ack().to_message()
    properties = {k: v for k, v in changes.items() if k != "destination"}
    user = message.user
    if "destination" in changes:
        user = dataclasses.replace(user, destination=changes["destination"])  # type: ignore[arg-type]
    return dataclasses.replace(
        message,
        user=user,
        properties=dataclasses.replace(message.properties, **properties),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    "message",
    [
        lookalike(label="QM Ordering Ack "),
        lookalike(label=None),
        lookalike(body=bytes(35)),
        lookalike(message_class=wire.MessageClass.NORMAL),
        lookalike(message_class=0x3FFF),
        lookalike(destination=wire.PrivateQueueId(number=5)),
        lookalike(
            destination=wire.PrivateQueueId(number=4, host=wire.QueueFormatType.PRIVATE_ON_SOURCE)
        ),
        lookalike(destination=wire.DirectQueue(name="TCP:10.0.0.1\\PRIVATE$\\orders")),
        lookalike(destination=wire.PublicQueue(queue_id=SENDER)),
        lookalike(destination=None),
    ],
)
def test_lookalikes_are_ordinary_user_messages(message: wire.UserMessage) -> None:
    assert wire.classify_packet(message) is wire.PacketKind.USER_MESSAGE
    with pytest.raises(wire.RemoteProtocolError, match="expected OrderAck, got UserMessage"):
        wire.OrderAck.from_message(message)


@pytest.mark.parametrize(
    ("message_class", "kind"),
    [
        (wire.MessageClass.ORDER_ACK, wire.PacketKind.ORDER_ACK),
        (wire.MessageClass.ACK_RECEIVE, wire.PacketKind.FINAL_ACK),
        (wire.MessageClass.NACK_BAD_DST_Q, wire.PacketKind.FINAL_ACK),
        (wire.MessageClass.NACK_RECEIVE_REJECTED, wire.PacketKind.FINAL_ACK),
        (wire.MessageClass.ACK_REACH_QUEUE, wire.PacketKind.USER_MESSAGE),
    ],
)
def test_classification_by_class(message_class: int, kind: wire.PacketKind) -> None:
    assert wire.classify_packet(lookalike(message_class=message_class)) is kind


def test_final_ack_from_an_order_ack_is_refused() -> None:
    with pytest.raises(wire.RemoteProtocolError, match="expected FinalAck, got OrderAck"):
        wire.FinalAck.from_message(order_ack().to_message())


def test_classify_refuses_non_packets() -> None:
    with pytest.raises(TypeError):
        wire.classify_packet("packet")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("packet", "expected"),
    [
        (wire.SessionAck(session=wire.SessionHeader()), wire.PacketKind.SESSION_ACK),
        (
            wire.ConnectionParameters(recoverable_ack_timeout=500, ack_timeout=20000),
            wire.PacketKind.CONNECTION_PARAMETERS,
        ),
        (
            wire.EstablishConnection(client_qm=wire.NULL_GUID, timestamp=0),
            wire.PacketKind.ESTABLISH_CONNECTION,
        ),
    ],
)
def test_classify_internal_packets(packet: wire.Packet, expected: wire.PacketKind) -> None:
    assert wire.classify_packet(packet) is expected
