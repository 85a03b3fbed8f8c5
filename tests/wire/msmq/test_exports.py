"""The public surface of the MSMQ packet codec: ``wire.msmq.__all__``, all of it
re-exported by ``wire``."""

from __future__ import annotations

import wire
import wire.msmq
from wire.msmq import convert

MSMQ_NAMES = {
    # functions and the decoder
    "parse_packet",
    "build_packet",
    "FrameDecoder",
    "classify_packet",
    "is_order_queue",
    "parse_ping",
    "build_ping",
    # MessageProperties <-> UserMessage
    "message_to_packet",
    "packet_to_message",
    "queue_text",
    "received_message",
    "scrubbed",
    "direct_queue",
    "with_message_class",
    "message_class_patch",
    # packets
    "Packet",
    "EstablishConnection",
    "ConnectionParameters",
    "SessionAck",
    "UserMessage",
    "OrderAck",
    "FinalAck",
    "PacketKind",
    "Ping",
    # headers
    "BaseHeader",
    "InternalHeader",
    "UserHeader",
    "TransactionHeader",
    "TxSequenceId",
    "SecurityHeader",
    "MessagePropertiesHeader",
    "DebugHeader",
    "SoapHeader",
    "MultiQueueFormatHeader",
    "MqfAddressHeader",
    "MqfSignatureHeader",
    "SessionHeader",
    # queues
    "QueueAddress",
    "ResponseQueue",
    "FormatNameElement",
    "PrivateQueueId",
    "PublicQueue",
    "PrivateQueue",
    "DirectQueue",
    "DistributionList",
    "SameAsAdminQueue",
    "SAME_AS_ADMIN",
    "ORDER_QUEUE",
    # constants
    "INFINITE",
    "MAX_HOPS",
    "MAX_PACKET_SIZE",
    "NULL_GUID",
    "ORDER_ACK_LABEL",
    "AckFlags",
    "BaseFlags",
    "DeliveryMode",
    "EncryptionAlgorithm",
    "HashAlgorithm",
    "InternalFlags",
    "MessageClass",
    "OperatingSystemFlags",
    "PacketType",
    "PingFlags",
    "PrivacyLevel",
    "QueueFormatType",
    "SecurityFlags",
    "TransactionFlags",
    "UserFlags",
    "VarType",
}


def test_msmq_exports_exactly_these_names() -> None:
    assert set(wire.msmq.__all__) == MSMQ_NAMES
    assert len(wire.msmq.__all__) == len(MSMQ_NAMES)


def test_every_name_resolves() -> None:
    for name in MSMQ_NAMES:
        assert getattr(wire, name) is not None
    assert wire.MAX_PACKET_SIZE == 0x400000


def test_wire_re_exports_every_name() -> None:
    assert set(wire.__all__) >= MSMQ_NAMES
    for name in MSMQ_NAMES:
        assert getattr(wire, name) is getattr(wire.msmq, name)


def test_exported_from_wire() -> None:
    for name in convert.__all__:
        assert getattr(wire, name) is getattr(convert, name)
