"""The parser's bounds-checked reads: what they return, and how they refuse."""

from __future__ import annotations

import uuid

import pytest

import wire
from wire.msmq.fixed import SESSION
from wire.msmq.reading import carried_padding, decode_guid, need, read_fixed, read_guid

GUID = uuid.UUID("6f9619ff-8b86-d011-b42d-00c04fc964ff")


def test_reads_within_the_limit() -> None:
    data = bytes(4) + GUID.bytes_le + bytes(16)
    assert read_guid(data, 4, 20, "G") == GUID
    assert read_fixed(SESSION, data, 20, 36) == (0, 0, 0, 0, 0, 0, 0)
    need(4, 16, 20, "G")
    assert decode_guid(GUID.bytes_le) is decode_guid(GUID.bytes_le)  # memoised


@pytest.mark.parametrize(
    ("read", "field"),
    [
        (lambda data: read_guid(data, 4, 19, "Q.Guid"), "Q.Guid"),
        (lambda data: read_fixed(SESSION, data, 20, 35), "SessionHeader"),
        (lambda data: read_fixed(SESSION, data, 20, 35, "Q.Session"), "Q.Session"),
        (lambda data: need(30, 8, 36, "Q.Part"), "Q.Part"),
    ],
)
def test_reads_past_the_limit_are_refused(read: object, field: str) -> None:
    data = bytes(36)
    with pytest.raises(wire.RemoteProtocolError, match="remain") as info:
        read(data)  # type: ignore[operator]
    assert info.value.field == field


@pytest.mark.parametrize(
    ("chunk", "carried"),
    [
        (b"", b""),
        (b"\x00", b""),
        (b"\x00" * 3, b""),
        (b"\x00" * 8, b""),
        (b"\x01", b"\x01"),
        (b"\x00\x00\x00\x5a", b"\x00\x00\x00\x5a"),
    ],
)
def test_padding_is_carried_only_when_not_zero(chunk: bytes, carried: bytes) -> None:
    data = b"head" + chunk + b"tail"
    assert carried_padding(data, 4, 4 + len(chunk)) == carried
