"""Bounds-checked reads of untrusted packet bytes: the parser's primitives.

Each read checks that what it reads ends before ``end`` (PacketSize, for the
headers of a user message) before it unpacks or slices anything, and a failed
check raises :class:`RemoteProtocolError` naming the field and saying how many
bytes were needed and how many remain. A check that passes costs one
comparison; only a failing one goes on to build the error.

GUIDs are decoded through a memo keyed by their 16 bytes: a session sees the
same few queue manager GUIDs over and over, and ``uuid.UUID`` is slow to build.
"""

from __future__ import annotations

import uuid
from typing import Any, NoReturn

from ..protocol_errors import RemoteProtocolError
from .fixed import FixedLayout
from .tables import remember

_ZEROS = (b"", b"\x00", b"\x00\x00", b"\x00\x00\x00")
_GUID_MEMO: dict[bytes, uuid.UUID] = {}


def fail(field: str, message: str) -> NoReturn:
    """Refuse the packet: ``field`` is malformed, for the reason ``message`` gives."""
    raise RemoteProtocolError(message, field=field)


def fail_past_end(field: str, size: int, remain: int) -> NoReturn:
    """Refuse a ``size`` that ``field`` declares when only ``remain`` bytes are left."""
    fail(field, f"{size} bytes, only {remain} remain before PacketSize")


def need(pos: int, size: int, end: int, field: str) -> None:
    """Check that ``size`` bytes at ``pos`` end before ``end``; refuse ``field`` otherwise."""
    if size > end - pos:
        fail(field, f"needs {size} bytes at offset {pos}, only {max(end - pos, 0)} remain")


def read_fixed(
    layout: FixedLayout, data: bytes, pos: int, end: int, field: str | None = None
) -> tuple[Any, ...]:
    """The fields of ``layout`` at ``pos``, once it is known to end before ``end``.

    An error names ``field``, by default the layout's header.
    """
    if layout.size > end - pos:
        need(pos, layout.size, end, layout.name if field is None else field)
    return layout.unpack_from(data, pos)


def read_guid(data: bytes, pos: int, end: int, field: str) -> uuid.UUID:
    """The GUID at ``pos``, once its 16 bytes are known to end before ``end``."""
    if pos + 16 > end:
        need(pos, 16, end, field)
    return decode_guid(data[pos : pos + 16])


def decode_guid(raw: bytes) -> uuid.UUID:
    """The GUID whose [MS-DTYP] packet form is the 16 bytes ``raw``."""
    value = _GUID_MEMO.get(raw)
    if value is None:
        value = remember(_GUID_MEMO, raw, uuid.UUID(bytes_le=raw))
    return value


def carried_padding(data: bytes, start: int, stop: int) -> bytes:
    """Padding bytes as a value carries them: empty when they are all zero."""
    chunk = data[start:stop]
    if len(chunk) < 4:
        return b"" if chunk == _ZEROS[len(chunk)] else chunk
    return b"" if chunk.count(0) == len(chunk) else chunk
