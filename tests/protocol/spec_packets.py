"""Packets of a transactional session written byte by byte from the spec's rules.

The [MS-MQQB] example has no transactional message, SessionAck bitmap,
OrderAck or FinalAck; these builders write them with ``struct`` straight
from the layouts of [MS-MQMQ] §2.2.19-§2.2.20 and [MS-MQQB] §2.2.4-§2.2.6
(reference §3-§10), without qmgr's ``wire`` builders, so that what qmgr
sends can be compared with them and what they make can be fed to qmgr as a
Windows queue manager would send it. Bytes the spec leaves free take the
values Windows is seen to use (garbage in the BaseHeader's Reserved byte and
in an OrderAck's reserved body bytes), and :func:`blank_free` hides those a
comparison must not look at.
"""

from __future__ import annotations

import struct
import uuid

ORDER_ACK_LABEL = "QM Ordering Ack"
#: UserHeader.Flags bits (reference §4).
DM_RECOVERABLE = 0x0000_0020
DQ_PRIVATE_ON_DESTINATION = 3 << 10
DQ_DIRECT = 7 << 10
SECURITY_PRESENT = 0x0008_0000
TH = 0x0010_0000
MP = 0x0020_0000
HH = 0x1000_0000
#: BaseHeader.Flags bits.
BASE_IN = 0x0008
BASE_SH = 0x0010
#: TransactionHeader.Flags bits.
FIRST = 0x4
LAST = 0x8


def base_header(flags: int, size: int, *, reserved: int = 0, ttrq: int = 0xFFFFFFFF) -> bytes:
    return struct.pack("<BBH4sII", 0x10, reserved, flags, b"LIOR", size, ttrq)


def session_header(
    *,
    ack: int,
    base: int = 0,
    bitmap: int = 0,
    sent: int = 0,
    recoverable_sent: int = 0,
    window: int = 64,
) -> bytes:
    """SessionHeader ([MS-MQMQ] §2.2.20.4), 16 bytes."""
    return struct.pack("<HHIHHHH", ack, base, bitmap, sent, recoverable_sent, window, 0)


def session_ack(*, reserved: int = 0xCD, **header: int) -> bytes:
    """SessionAck ([MS-MQQB] §2.2.6): PR=3 | IN | SH, PacketSize 36 (header included);
    ``header``: the fields of :func:`session_header` (``ack`` and any of the others)."""
    return (
        base_header(0x0003 | BASE_IN | BASE_SH, 36, reserved=reserved)
        + b"\0\0\1\0"
        + session_header(**header)
    )


def _direct_name(name: str) -> bytes:
    raw = (name + "\0").encode("utf-16-le")
    field = struct.pack("<H", len(raw)) + raw
    return field + b"\0" * (-len(field) % 4)


def _properties(
    *,
    label: str | None,
    body: bytes,
    message_class: int = 0,
    body_type: int = 0x1011,
    extension: bytes = b"",
) -> bytes:
    """MessagePropertiesHeader ([MS-MQMQ] §2.2.19.3), padded to a multiple of 4;
    ExtensionData and the body follow the label unaligned."""
    wide = b"" if label is None else (label + "\0").encode("utf-16-le")
    fixed = struct.pack(
        "<BBH20sIIIIIIII",
        0,
        len(wide) // 2,
        message_class,
        bytes(20),
        body_type,
        0,
        len(body),
        len(body),
        0,
        0,
        0,
        len(extension),
    )
    header = fixed + wide + extension + body
    return header + b"\0" * (-len(header) % 4)


def _user_header(
    *,
    source: uuid.UUID,
    destination_qm: uuid.UUID,
    sent_time: int,
    message_id: int,
    flags: int,
) -> bytes:
    return (
        source.bytes_le
        + destination_qm.bytes_le
        + struct.pack("<IIII", 0xFFFFFFFF, sent_time, message_id, flags)
    )


def transactional_message(
    *,
    source: uuid.UUID,
    queue: str,
    message_id: int,
    sequence: tuple[int, int],
    number: int,
    previous: int,
    body: bytes,
    tx_flags: int = 0,
    sent_time: int = 1_700_000_000,
    base_flags: int = 0,
    extra_user_flags: int = 0,
    security: bytes = b"",
    extension: bytes = b"",
    soap: bytes = b"",
    trailer: bytes = b"",
    session: bytes = b"",
    reserved: int = 0,
) -> bytes:
    """A transactional UserMessage to the direct name ``queue``: PR=0, DM=1, TH, MP.

    ``sequence`` is the TxSequenceID as (Ordinal, Timestamp). Optional parts, in
    wire order: ``security`` (a SecurityHeader: sets SH), ``extension`` (the
    MessagePropertiesHeader's ExtensionData), ``soap`` (a SoapHeader: sets HH),
    ``trailer`` (bytes up to PacketSize after the known headers, as the
    [MS-MQRR] stored form appends), ``session`` (a piggy-backed SessionHeader:
    sets BaseHeader SH and follows PacketSize). ``base_flags`` adds
    BaseHeader flags (reserved bits a Windows capture sets).
    """
    flags = DM_RECOVERABLE | DQ_DIRECT | TH | MP | extra_user_flags
    if security:
        flags |= SECURITY_PRESENT
    if soap:
        flags |= HH
    parts = (
        _user_header(
            source=source,
            destination_qm=uuid.UUID(int=0),
            sent_time=sent_time,
            message_id=message_id,
            flags=flags,
        )
        + _direct_name(queue)
        + struct.pack("<IIIII", tx_flags, *sequence, number, previous)
        + security
        + _properties(label=None, body=body, extension=extension)
        + soap
        + trailer
    )
    base = base_flags | (BASE_SH if session else 0)
    header = base_header(base, 16 + len(parts), reserved=reserved, ttrq=345_600)
    return header + parts + session


def security_header(sender_id: bytes, *, flags: int = 0x0001) -> bytes:
    """SecurityHeader ([MS-MQMQ] §2.2.20.6) carrying only a SecurityID (a SID, as
    Windows sends the user's with ST=1 even when AI is clear), padded to 4."""
    fixed = struct.pack("<HHHHII", flags, len(sender_id), 0, 0, 0, 0)
    return fixed + sender_id + b"\0" * (-len(sender_id) % 4)


def soap_header(header: str, body: str) -> bytes:
    """SoapHeader ([MS-MQMQ] §2.2.20.7): the two sections, each a WCHAR count with
    its NUL, padded to 4 at the end."""
    out = b""
    for section_id, text in ((0x0320, header), (0x0384, body)):
        wide = (text + "\0").encode("utf-16-le")
        out += struct.pack("<HHI", section_id, 0, len(wide) // 2) + wide
    return out + b"\0" * (-len(out) % 4)


def _ack(
    *,
    source: uuid.UUID,
    destination_qm: uuid.UUID,
    message_id: int,
    sent_time: int,
    message_class: int,
    recoverable: bool,
    body: bytes,
) -> bytes:
    """An OrderAck or FinalAck: a UserMessage with BaseHeader.Flags all clear, to
    private queue 4 (``order_queue$``) of ``destination_qm``, labelled "QM Ordering Ack"."""
    flags = DQ_PRIVATE_ON_DESTINATION | MP | (DM_RECOVERABLE if recoverable else 0)
    parts = (
        _user_header(
            source=source,
            destination_qm=destination_qm,
            sent_time=sent_time,
            message_id=message_id,
            flags=flags,
        )
        + struct.pack("<I", 4)
        + _properties(label=ORDER_ACK_LABEL, body=body, message_class=message_class, body_type=0)
    )
    return base_header(0x0000, 16 + len(parts)) + parts


def order_ack(
    *,
    source: uuid.UUID,
    destination_qm: uuid.UUID,
    sequence: tuple[int, int],
    number: int,
    message_id: int = 1,
    sent_time: int = 1_700_000_000,
    reserved: bytes = bytes(20),
) -> bytes:
    """OrderAck ([MS-MQQB] §2.2.4): express, class 0x00FF, body {sequence, number, number-1,
    20 reserved bytes}."""
    body = struct.pack("<IIII", *sequence, number, max(0, number - 1)) + reserved
    return _ack(
        source=source,
        destination_qm=destination_qm,
        message_id=message_id,
        sent_time=sent_time,
        message_class=0x00FF,
        recoverable=False,
        body=body,
    )


def final_ack(
    *,
    source: uuid.UUID,
    destination_qm: uuid.UUID,
    sequence: tuple[int, int],
    number: int,
    previous: int,
    acked_message_id: int,
    message_class: int = 0x4000,
    message_id: int = 2,
    sent_time: int = 1_700_000_000,
) -> bytes:
    """FinalAck ([MS-MQQB] §2.2.5): recoverable, class 0x4000 (ACK_RECEIVE) or a NACK,
    body {sequence, number, previous, SourceGUID, MessageID} of the message acked;
    the acked message's source is the ack's destination."""
    body = struct.pack("<IIII", *sequence, number, previous) + destination_qm.bytes_le
    body += struct.pack("<I", acked_message_id)
    return _ack(
        source=source,
        destination_qm=destination_qm,
        message_id=message_id,
        sent_time=sent_time,
        message_class=message_class,
        recoverable=True,
        body=body,
    )


def blank_free(data: bytes) -> bytes:
    """A user packet without what its sender chooses freely: the BaseHeader's Reserved
    byte and TimeToReachQueue, the UserHeader's TimeToBeReceived, SentTime and
    MessageID (the packet's own ordinal)."""
    return data[:1] + b"\0" + data[2:12] + bytes(4) + data[16:48] + bytes(12) + data[60:]


def piggy_back(data: bytes, header: bytes) -> bytes:
    """The user packet ``data`` carrying the SessionHeader ``header``: BaseHeader SH
    set, the 16 bytes after PacketSize, which does not count them ([MS-MQMQ]
    §2.2.19.1)."""
    flags = int.from_bytes(data[2:4], "little") | BASE_SH
    return data[:2] + flags.to_bytes(2, "little") + data[4:] + header
