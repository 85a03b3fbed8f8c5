"""The public surface of the MSMQ packet codec, as importable from ``wire``."""

from __future__ import annotations

import re
from pathlib import Path

import wire

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
    "direct_queue",
    "with_message_class",
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


def test_msmq_block_exports_exactly_these_names() -> None:
    source = (Path(wire.__file__)).read_text()
    block = source.split("# --- MSMQ packets (begin) ---")[1].split("# --- MSMQ packets (end) ---")[
        0
    ]
    exported = set(re.findall(r"^from \._msmq_\w+ import (\w+) as \1$", block, re.MULTILINE))
    assert exported == MSMQ_NAMES
    assert len(block.strip().splitlines()) == len(MSMQ_NAMES)


def test_every_name_resolves() -> None:
    for name in MSMQ_NAMES:
        assert getattr(wire, name) is not None
    assert wire.MAX_PACKET_SIZE == 0x400000
