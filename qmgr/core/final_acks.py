"""FinalAcks as the destination keeps them until its source has them.

An arriving transactional message that asks for a FinalAck keeps, in its
record's note (``storage.AppendMessage.note``), the sequence fields the
FinalAck repeats ([MS-MQQB] §2.2.5); when it leaves its queue (or is refused
at arrival), :func:`final_ack_op` records the FinalAck for its source in the
same unit, and the peering layer sends it (:func:`decode_final_ack`). A
router keeps another destination's FinalAck it cannot pass on at once in the
same way, with its sender (:func:`passed_on_final_ack_op`).
"""

from __future__ import annotations

import struct
from typing import Final

from storage import RecordFinalAck
from wire import FinalAck, MessageProperties, TransactionFlags, TransactionHeader

__all__ = [
    "MAX_KEPT_FINAL_ACKS",
    "decode_final_ack",
    "final_ack_note",
    "final_ack_op",
    "passed_on_final_ack_op",
    "wants_final_ack",
]

#: The most FinalAcks a queue manager keeps waiting for their way back: its own
#: and, at a router, other queue managers' it passes on or keeps.
MAX_KEPT_FINAL_ACKS: Final = 1_000_000

# A note: TxSequenceID (ordinal, timestamp), number, previous number.
_NOTE = struct.Struct(">IIII")
# A FinalAck record: the class, then the note's fields.
_FINAL_ACK = struct.Struct(">HIIII")
#: MQMSG_DEADLETTER | MQMSG_JOURNAL: the levels that ask for confirmation.
_CONFIRMED = 0x03
#: TransactionHeader's FA bit as a plain int (``int & IntFlag`` goes through
#: the enum's slow path, once per arriving message).
_FINAL_ACK_BIT = int(TransactionFlags.FINAL_ACK)


def wants_final_ack(message: MessageProperties, header: TransactionHeader) -> bool:
    """True if an arriving transactional message asks for a FinalAck (its header's
    FA flag, or a journal level that runs the confirmation process)."""
    return bool(header.flags & _FINAL_ACK_BIT or message.journal & _CONFIRMED)


def final_ack_note(header: TransactionHeader) -> bytes:
    """The sequence fields an arrived message keeps for its FinalAck."""
    sequence = header.sequence_id
    return _NOTE.pack(
        sequence.ordinal,
        sequence.timestamp,
        header.sequence_number,
        header.previous_sequence_number,
    )


def final_ack_op(message: MessageProperties, note: bytes, message_class: int) -> RecordFinalAck:
    """The FinalAck telling ``message``'s source it met ``message_class``."""
    sequence_ordinal, stamp, number, previous = _NOTE.unpack(note)
    fields = (message_class, sequence_ordinal, stamp, number, previous)
    return _record(message.source_qm.bytes, message.ordinal, fields)


def passed_on_final_ack_op(ack: FinalAck) -> RecordFinalAck:
    """Keep another queue manager's FinalAck (``ack.source_qm`` sent it) to pass
    on to the source of the message it is about when that source is reachable."""
    sequence = ack.sequence_id
    fields = (
        ack.message_class,
        sequence.ordinal,
        sequence.timestamp,
        ack.sequence_number,
        ack.previous_sequence_number,
    )
    return _record(
        ack.acked_source_qm.bytes, ack.acked_message_id, fields, sender=ack.source_qm.bytes
    )


def _record(
    source_qm: bytes,
    ordinal: int,
    fields: tuple[int, int, int, int, int],
    sender: bytes | None = None,
) -> RecordFinalAck:
    """A FinalAck record of ``fields`` (class, sequence ordinal and timestamp,
    number, previous), kept under its stream's timestamp."""
    return RecordFinalAck(
        source_qm, ordinal, _FINAL_ACK.pack(*fields), stamp=fields[2], sender=sender
    )


def decode_final_ack(value: bytes) -> tuple[int, int, int, int, int]:
    """``(class, sequence ordinal, sequence timestamp, number, previous)`` of a FinalAck record."""
    return _FINAL_ACK.unpack(value)
