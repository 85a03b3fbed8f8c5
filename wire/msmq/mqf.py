"""The FormatNameList of an MQFAddressHeader ([MS-MQMQ] §2.2.18.1.4, §2.2.20.2).

Each element is a u16 FormatType followed by a name whose start is aligned:

* 1, public: the queue GUID, unaligned;
* 2, private: the host QM GUID on a 4-byte boundary, then the u32 queue number;
* 3, direct: a NUL-terminated UTF-16LE name on a 2-byte boundary, no count;
* 6, distribution list: the list GUID on a 4-byte boundary.

Boundaries are relative to the start of the list, which sits 12 bytes into a
4-aligned header, so they are also boundaries in the packet. The list ends
with at most 3 bytes of padding. The packet codec carries the list opaque;
these functions are the typed view of it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from ..protocol_errors import LocalProtocolError, RemoteProtocolError
from .constants import MqfFormatType
from .fixed import GUID_U32, U16
from .queues import (
    DirectQueue,
    DistributionList,
    FormatNameElement,
    PrivateQueue,
    PublicQueue,
)
from .text import decode_utf16z, encode_utf16z

_FIELD = "MQFAddressHeader.FormatNameList"


def decode_format_names(data: bytes, count: int) -> tuple[FormatNameElement, ...]:
    """Decode ``count`` elements from ``data``.

    Raises:
        RemoteProtocolError: an element is truncated or of an unknown type, or
            more than 3 bytes follow the last element.
    """
    end = len(data)
    pos = 0
    elements: list[FormatNameElement] = []
    for index in range(count):
        if pos + 2 > end:
            msg = f"element {index} of {count} is missing"
            raise RemoteProtocolError(msg, field=_FIELD)
        (format_type,) = U16.unpack_from(data, pos)
        pos += 2
        if format_type == MqfFormatType.PUBLIC:
            _need(pos, 16, end, index)
            elements.append(PublicQueue(queue_id=uuid.UUID(bytes_le=data[pos : pos + 16])))
            pos += 16
        elif format_type == MqfFormatType.PRIVATE:
            pos += -pos % 4
            _need(pos, 20, end, index)
            guid, number = GUID_U32.unpack_from(data, pos)
            elements.append(PrivateQueue(qm=uuid.UUID(bytes_le=guid), number=number))
            pos += 20
        elif format_type == MqfFormatType.DIRECT:
            pos += pos & 1
            stop = _find_wchar_nul(data, pos, end)
            if stop < 0:
                msg = f"direct name of element {index} is not NUL-terminated"
                raise RemoteProtocolError(msg, field=_FIELD)
            name = decode_utf16z(data[pos : stop + 2], _FIELD)
            elements.append(DirectQueue(name=name))
            pos = stop + 2
        elif format_type == MqfFormatType.DISTRIBUTION_LIST:
            pos += -pos % 4
            _need(pos, 16, end, index)
            elements.append(DistributionList(list_id=uuid.UUID(bytes_le=data[pos : pos + 16])))
            pos += 16
        else:
            msg = f"element {index} has unknown FormatType {format_type:#06x}"
            raise RemoteProtocolError(msg, field=_FIELD)
    if end - pos > 3:
        msg = f"{end - pos} bytes follow the last element"
        raise RemoteProtocolError(msg, field=_FIELD)
    return tuple(elements)


def encode_format_names(elements: Iterable[object]) -> bytes:
    """Encode ``elements`` with zero alignment bytes, padded to a multiple of 4.

    Raises:
        LocalProtocolError: an element is not a format name element or cannot be encoded.
    """
    out = bytearray()
    for element in elements:
        if isinstance(element, PublicQueue):
            out += U16.pack(MqfFormatType.PUBLIC) + element.queue_id.bytes_le
        elif isinstance(element, PrivateQueue):
            out += U16.pack(MqfFormatType.PRIVATE)
            out += bytes(-len(out) % 4)
            out += _guid_u32(element)
        elif isinstance(element, DirectQueue):
            out += U16.pack(MqfFormatType.DIRECT)
            out += encode_utf16z(element.name, _FIELD)
        elif isinstance(element, DistributionList):
            out += U16.pack(MqfFormatType.DISTRIBUTION_LIST)
            out += bytes(-len(out) % 4)
            out += element.list_id.bytes_le
        else:
            msg = f"not a format name element: {element!r:.60}"
            raise LocalProtocolError(msg, field=_FIELD)
    out += bytes(-len(out) % 4)
    return bytes(out)


def _guid_u32(element: PrivateQueue) -> bytes:
    if not 0 <= element.number <= 0xFFFFFFFF:
        msg = f"private queue number {element.number} does not fit in 32 bits"
        raise LocalProtocolError(msg, field=_FIELD)
    return GUID_U32.pack(element.qm.bytes_le, element.number)


def _need(pos: int, size: int, end: int, index: int) -> None:
    if pos + size > end:
        msg = f"element {index} is truncated"
        raise RemoteProtocolError(msg, field=_FIELD)


def _find_wchar_nul(data: bytes, start: int, end: int) -> int:
    """The offset of the first NUL WCHAR at an even distance from ``start``, or -1."""
    pos = start
    while True:
        hit = data.find(b"\x00\x00", pos, end)
        if hit < 0:
            return -1
        if (hit - start) & 1 == 0:
            return hit
        pos = hit + 1
