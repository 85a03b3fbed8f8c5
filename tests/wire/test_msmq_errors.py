"""Specific malformations and unbuildable values, and the fields their errors name."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import msmq_samples as samples
import pytest

import wire

QM = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def message(**changes: Any) -> wire.UserMessage:
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


GOOD = wire.build_packet(message())


def patched(data: bytes, offset: int, value: bytes) -> bytes:
    return data[:offset] + value + data[offset + len(value) :]


def u16(value: int) -> bytes:
    return value.to_bytes(2, "little")


def u32(value: int) -> bytes:
    return value.to_bytes(4, "little")


def refused(data: bytes) -> wire.RemoteProtocolError:
    with pytest.raises(wire.RemoteProtocolError) as info:
        wire.parse_packet(data)
    return info.value


# --- malformed bytes ------------------------------------------------------------------------------

USER_FLAGS = int.from_bytes(GOOD[60:64], "little")
# The destination name starts at 64: Count (u16), then the UTF-16 name with its NUL.
NAME_COUNT = int.from_bytes(GOOD[64:66], "little")
LABEL_AT = 64 + 2 + NAME_COUNT + (-(2 + NAME_COUNT) % 4) + 56


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        (b"", "BaseHeader", "needs 16 bytes"),
        (patched(GOOD, 0, b"\x11"), "BaseHeader.VersionNumber", "0x11"),
        (patched(GOOD, 4, b"LIOX"), "BaseHeader.Signature", "LIOX"),
        (GOOD + b"\x00", "BaseHeader.PacketSize", "1 follow it"),
        (GOOD[:-1], "BaseHeader.PacketSize", "only"),
        (patched(GOOD, 60, u32(USER_FLAGS & ~0x200000)), "UserHeader.Flags", "MP is clear"),
        (patched(GOOD, 60, u32(USER_FLAGS & ~0x1C00 | 0x0400)), "UserHeader.Flags", "DQ=1"),
        (patched(GOOD, 60, u32(USER_FLAGS | 0x2000)), "UserHeader.Flags", "AQ=1"),
        (patched(GOOD, 60, u32(USER_FLAGS | 0x8000)), "UserHeader.Flags", "AQ=4"),
        (patched(GOOD, 64, u16(NAME_COUNT + 1)), "UserHeader.DestinationQueue", "Count"),
        (patched(GOOD, 64, u16(0)), "UserHeader.DestinationQueue", "Count 0"),
        (patched(GOOD, 64, u16(4000)), "UserHeader.DestinationQueue", "remain"),
        (
            patched(GOOD, 64 + NAME_COUNT, b"A\x00"),
            "UserHeader.DestinationQueue",
            "not NUL-terminated",
        ),
        (patched(GOOD, 66, b"\x00\x00"), "UserHeader.DestinationQueue", "NUL inside"),
        (
            patched(GOOD, LABEL_AT - 56 + 1, b"\xfb"),
            "MessagePropertiesHeader.LabelLength",
            "251",
        ),
        (
            patched(GOOD, LABEL_AT + 10, b"!\x00"),
            "MessagePropertiesHeader.Label",
            "not NUL-terminated",
        ),
        (
            patched(GOOD, LABEL_AT - 56 + 32, u32(1000)),
            "MessagePropertiesHeader.MessageSize",
            "1000 bytes",
        ),
        (
            patched(GOOD, LABEL_AT - 56 + 52, u32(0xFFFFFFFF)),
            "MessagePropertiesHeader.ExtensionSize",
            "4294967295",
        ),
    ],
)
def test_malformed_user_messages(data: bytes, field: str, reason: str) -> None:
    error = refused(data)
    assert error.field == field
    assert reason in error.message


SESSION_ACK = wire.build_packet(wire.SessionAck(session=wire.SessionHeader()))
PARAMETERS = wire.build_packet(wire.ConnectionParameters(recoverable_ack_timeout=1, ack_timeout=2))


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        (patched(SESSION_ACK, 18, u16(0x0004)), "InternalHeader.Flags", "PT=4"),
        (patched(SESSION_ACK, 18, u16(0x0000)), "InternalHeader.Flags", "PT=0"),
        (patched(SESSION_ACK, 18, u16(0x0011)), "InternalHeader.Flags", "CS"),
        (patched(SESSION_ACK, 2, u16(0x000B)), "BaseHeader.Flags", "SH is clear"),
        (patched(SESSION_ACK, 2, u16(0x003B)), "BaseHeader.Flags", "DH"),
        (patched(PARAMETERS, 2, u16(0x001B)), "BaseHeader.Flags", "SH is set"),
        (patched(SESSION_ACK, 18, u16(0x0002)), "BaseHeader.PacketSize", "572"),
        (patched(SESSION_ACK, 8, u32(32))[:32], "BaseHeader.PacketSize", "SessionAck is 36"),
    ],
)
def test_malformed_internal_packets(data: bytes, field: str, reason: str) -> None:
    error = refused(data)
    assert error.field == field
    assert reason in error.message


def test_malformed_optional_headers() -> None:
    with_debug = wire.build_packet(message(debug=wire.DebugHeader()))
    at = len(with_debug) - 4
    error = refused(patched(with_debug, at, u16(2)))
    assert (error.field, "QT=2" in error.message) == ("DebugHeader.Flags", True)

    with_soap = wire.build_packet(message(soap=wire.SoapHeader(header="h", body="b")))
    at = len(with_soap) - 24
    assert with_soap[at : at + 2] == u16(0x0320)
    assert refused(patched(with_soap, at, u16(0x0321))).field == "SoapHeader.HeaderSectionID"
    assert refused(patched(with_soap, at + 4, u32(9))).field == "SoapHeader.HeaderDataLength"

    mqf = wire.MultiQueueFormatHeader()
    with_mqf = wire.build_packet(message(multi_queue=mqf))
    at = len(with_mqf) - (12 * 3 + 8)
    assert refused(patched(with_mqf, at, u32(11))).field == (
        "MultiQueueFormatHeader.Destination.HeaderSize"
    )
    assert refused(patched(with_mqf, at + 4, u16(0xC8))).field == (
        "MultiQueueFormatHeader.Destination.HeaderID"
    )
    assert refused(patched(with_mqf, len(with_mqf) - 8, u16(0x15F))).field == (
        "MultiQueueFormatHeader.Signature.ID"
    )


def test_format_name_list_errors_surface_when_decoded() -> None:
    bad = wire.MqfAddressHeader(element_count=1, format_names=b"\x09\x00\x00\x00")
    with pytest.raises(wire.RemoteProtocolError, match="unknown FormatType 0x0009"):
        bad.elements()
    with pytest.raises(wire.RemoteProtocolError, match="missing"):
        wire.MqfAddressHeader(element_count=2, format_names=b"").elements()
    with pytest.raises(wire.RemoteProtocolError, match="NUL-terminated"):
        wire.MqfAddressHeader(element_count=1, format_names=b"\x03\x00A\x00").elements()


# --- values that cannot be built ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (message(base=wire.BaseHeader(priority=8)), "BaseHeader.priority"),
        (message(base=wire.BaseHeader(flags=wire.BaseFlags.SESSION)), "BaseHeader.flags"),
        (message(base=wire.BaseHeader(reserved=256)), "BaseHeader"),
        (message(user_flags=wire.UserFlags.TRANSACTION), "UserHeader.flags"),
        (message(user_hop_count=32), "UserHeader.hop_count"),
        (message(user_delivery=4), "UserHeader.delivery"),
        (message(user_sent_time=2**32), "UserHeader"),
        (message(user_source_qm="not a guid"), "UserHeader.source_qm"),
        (message(user_destination="q"), "UserHeader.destination"),
        (
            message(user_destination=wire.PrivateQueue(qm=QM, number=1)),
            "UserHeader.destination",
        ),
        (
            message(
                user_destination=wire.PrivateQueueId(
                    number=1, host=wire.QueueFormatType.PRIVATE_ON_SOURCE
                )
            ),
            "UserHeader.destination",
        ),
        (
            message(
                user_admin=wire.PrivateQueueId(
                    number=1, host=wire.QueueFormatType.PRIVATE_ON_ADMIN_HOST
                )
            ),
            "UserHeader.admin",
        ),
        (
            message(user_admin=wire.PrivateQueueId(number=1, host=wire.QueueFormatType.PUBLIC)),
            "UserHeader.admin",
        ),
        (message(user_destination=wire.DirectQueue(name="a\x00b")), "UserHeader.destination"),
        (
            message(user_destination=wire.DirectQueue(name="ab", padding=b"\x01")),
            "UserHeader.destination.padding",
        ),
        (message(user_destination=wire.DirectQueue(name="x" * 40000)), "UserHeader.destination"),
        (message(props_label="x" * 250), "MessagePropertiesHeader.label"),
        (message(props_label="a\x00"), "MessagePropertiesHeader.label"),
        (message(props_correlation_id=b"short"), "MessagePropertiesHeader.correlation_id"),
        (message(props_padding=b"\x01\x02\x03"), "MessagePropertiesHeader.padding"),
        (message(props_body="text"), "MessagePropertiesHeader.body"),
        (message(props_body=bytes(wire.MAX_PACKET_SIZE)), "UserMessage"),
        (
            message(
                transaction=wire.TransactionHeader(
                    transaction_id=0x100000,
                    sequence_id=wire.TxSequenceId(ordinal=1, timestamp=1),
                    sequence_number=1,
                    previous_sequence_number=0,
                )
            ),
            "TransactionHeader.transaction_id",
        ),
        (
            message(security=wire.SecurityHeader(sender_id=b"x", padding=b"\x01")),
            "SecurityHeader.padding",
        ),
        (message(debug=wire.DebugHeader(flags=1)), "DebugHeader.flags"),
        (message(soap=wire.SoapHeader(body="\x00")), "SoapHeader.body"),
        (
            wire.SessionAck(
                internal=wire.InternalHeader(flags=wire.InternalFlags.CONNECTION_REFUSED),
                session=wire.SessionHeader(),
            ),
            "InternalHeader.flags",
        ),
        (wire.SessionAck(session=wire.SessionHeader(window_size=-1)), "SessionHeader"),
        (
            wire.EstablishConnection(client_qm=QM, timestamp=0, padding=b"\x5a"),
            "EstablishConnection.padding",
        ),
        (
            samples.final_ack(message_class=wire.MessageClass.NACK_BAD_DST_Q - 0x4001),
            "FinalAck.message_class",
        ),
        (samples.order_ack(reserved=b""), "OrderAck.reserved"),
    ],
)
def test_unbuildable_values(value: Any, field: str) -> None:
    with pytest.raises(wire.LocalProtocolError) as info:
        wire.build_packet(value)
    assert info.value.field == field
    assert str(info.value).startswith(field)


def test_build_refuses_what_is_not_a_packet() -> None:
    with pytest.raises(wire.LocalProtocolError, match="not a packet value: str"):
        wire.build_packet("hello")  # type: ignore[arg-type]


def test_errors_share_one_base() -> None:
    assert issubclass(wire.RemoteProtocolError, wire.ProtocolError)
    assert issubclass(wire.LocalProtocolError, wire.ProtocolError)
    with pytest.raises(TypeError):
        wire.ProtocolError("abstract")
