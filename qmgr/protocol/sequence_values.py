"""The values the exactly-once (EOD) sequence machines share, sender and receiver.

Plain immutable values and the error for misuse; the machines are
:mod:`qmgr.protocol.outgoing` (the sender, over the entry table of
:mod:`qmgr.protocol.outgoing_table`) and :mod:`qmgr.protocol.incoming` (the
receiver's acceptance rule).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

import wire

__all__ = [
    "MAX_SEQUENCE_NUMBER",
    "RESEND_INTERVALS",
    "EntryKind",
    "SequenceError",
    "Transmission",
]

#: MSMQ's Transactional Ack Wait intervals in seconds (``SeqResend13Time``,
#: ``SeqResend46Time``, ``SeqResend79Time``, ``SeqResend10Time``; reference §15.5).
RESEND_INTERVALS: Final[tuple[float, ...]] = (30.0,) * 3 + (300.0,) * 3 + (1800.0,) * 3 + (21600.0,)

#: The largest TxSequenceNumber (a u32; the first of a sequence is 1).
MAX_SEQUENCE_NUMBER: Final = 0xFFFFFFFF


class SequenceError(ValueError):
    """An EOD sequence machine was used wrongly by its caller (never raised for a peer's input).

    Lookup ids out of order, a forget result that matches no forget, a
    sequence state that goes backwards, a persist never accepted, a malformed
    stream key. An old OrderAck is ignored, an out-of-order message rejected.
    """


class EntryKind(enum.Enum):
    """What an outgoing entry is, which decides what ends it."""

    #: A transactional message of this QM: numbered, ended by an OrderAck.
    TRANSACTIONAL = "transactional"
    #: Non-transactional, recoverable: ended by a SessionAck marking it persisted.
    RECOVERABLE = "recoverable"
    #: Non-transactional, express: ended by any SessionAck covering it.
    EXPRESS = "express"
    #: A packet passing through for another source, its TransactionHeader
    #: untouched: ended by a SessionAck marking it persisted; no EOD here.
    RELAYED = "relayed"


@dataclass(frozen=True, slots=True)
class Transmission:
    """One entry to put on the wire now.

    Attributes:
        lookup_id: the entry's lookup id in the outgoing queue.
        kind: its kind.
        header: the TransactionHeader to send it with (TRANSACTIONAL only,
            else None; a RELAYED packet keeps the header it came with).
    """

    lookup_id: int
    kind: EntryKind
    header: wire.TransactionHeader | None
