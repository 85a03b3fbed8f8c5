"""Framing and the packets' fixed parts: specific malformations and the fields their
errors name."""

from __future__ import annotations

import pytest

import wire

from .msmq_samples import express_message as message
from .msmq_samples import patched, refused, u16, u32

GOOD = wire.build_packet(message())
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
