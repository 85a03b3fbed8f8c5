"""A message's fate on this queue manager, found by its id (``qmgr trace``).

Theory of operation
-------------------
Nothing is recorded for tracing: the trace is *searched* in what the queue
manager keeps anyway, so it costs nothing until someone asks. For a message
id, :class:`Tracer` looks at:

* every stored message whose id is that id: in an application queue
  (waiting), a journal queue (received, with journaling), a dead-letter
  queue (with the class that says why), the system journal (confirmed), an
  outgoing queue (still on its way: the entry, the queue manager to ask
  next) - and every acknowledgment whose correlation id is that id, in the
  queue where it waits;
* the outgoing entries relaying it (on a router): such an entry holds the
  whole MSMQ packet as it arrived, so it is recognised by the source GUID
  and message id of its UserHeader, then confirmed by parsing the packet;
* for one of our messages, its copies awaiting confirmation (delivered or
  not, the last class reported, the deadline);
* for a message from another queue manager, the FinalAck waiting to go back
  to its source (the class of its fate here).

The store's scan (:meth:`Tracer.select`, ``Store.scan_messages``) reads every
stored message's first bytes without copying them, and parses a packet
only for a relayed entry whose source GUID and message id are the ones
looked for; it is a rare operator request, and the daemon runs it in steps.
This module only decides what to look for and what the records mean.

What is known of an outgoing entry is that it is in its outgoing queue, so
not acknowledged yet (by the next hop or, for exactly-once delivery, by the
destination). Whether it is waiting to be sent or was sent and awaits that
acknowledgment (the ``waiting`` and ``unacked`` counts of ``qmgr outgoing
list``) is known to the peering layer only, so the finding says neither.
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import storage
import wire
from storage import QueueKind, QueueRecord, Store
from wire import MessageProperties, quoted

from . import names
from .errors import InvalidArgument
from .final_acks import decode_final_ack
from .outgoing import EntryOrigin, RemoteDestination, decode_entry, endpoint_of

__all__ = ["MAX_FINDINGS", "Finding", "Tracer", "parse_message_id"]

#: Most stored messages one trace reports.
MAX_FINDINGS: Final = 1000
# Offsets in an encoded message (wire/message_layout.py): its id (GUID + ordinal,
# little-endian), the flags byte (bit 1: a correlation id), the correlation id.
_ID = slice(0, 20)
_FLAGS: Final = 28
_CORRELATION = slice(48, 68)
_HAS_CORRELATION: Final = 0x02
_ORDINAL = struct.Struct("<I")
# Offsets in an outgoing entry (qmgr.core.outgoing): the message or the packet
# follows its two bytes. In a LOCAL entry, the message's id; in a RELAYED entry,
# the packet's UserHeader after its 16-byte BaseHeader ([MS-MQMQ] 2.2.19.2): the
# source queue manager's GUID (in packet form, wire order) at 16 and the
# message id (u32 little-endian) at 56.
_ENTRY = 2
_ENTRY_ID = slice(_ENTRY, _ENTRY + 20)
_PACKET_SOURCE = slice(_ENTRY + 16, _ENTRY + 32)
_PACKET_MESSAGE_ID = slice(_ENTRY + 56, _ENTRY + 60)
_LOCAL: Final = int(EntryOrigin.LOCAL)
_RELAYED: Final = int(EntryOrigin.RELAYED)
#: FinalAcks about one message a trace shows: ours and those kept for other destinations.
_FINAL_ACKS_SHOWN: Final = 64


def parse_message_id(text: str) -> tuple[uuid.UUID, int]:
    """``(source GUID, ordinal)`` of a message id ``{guid}\\ordinal``.

    Raises:
        InvalidArgument: it is not a message id.
    """
    try:
        return wire.parse_message_id(text)
    except ValueError as exc:
        msg = f"{quoted(text)} is {exc}"
        raise InvalidArgument(msg) from None


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the queue manager knows about the message."""

    #: ``queue``, ``subqueue``, ``journal``, ``dead-letter``, ``system-journal``, ``outgoing``,
    #: ``relaying``, ``awaiting-confirmation``, ``final-ack``, ``acknowledgment``.
    kind: str
    #: Where: a queue's name, or a destination.
    place: str
    #: Unix seconds: when it got there (0 if unknown).
    time: float
    #: The class it carries there (0: a normal message).
    message_class: int
    #: What else is known, for people.
    detail: str
    #: For a message on its way: the queue manager to ask next, ``host:port``.
    next_hop: str = ""


class Tracer:
    """Finds a message's traces in ``store`` (read only)."""

    __slots__ = ("_guid", "_store")

    def __init__(self, store: Store) -> None:
        self._store = store
        self._guid = store.qm_guid

    @staticmethod
    def key(source_qm: uuid.UUID, ordinal: int) -> bytes:
        """The 20 bytes a message's id (and its acknowledgments' correlation id) is."""
        return source_qm.bytes + _ORDINAL.pack(ordinal)

    def queues(self) -> list[tuple[int, int]]:
        """What to scan: every queue, from its first visible message."""
        return [
            (record.queue_id, max(record.purged_below, 1)) for record in self._store.list_queues()
        ]

    @staticmethod
    def select(key: bytes) -> _Select:
        """The test a scan applies to each stored record."""
        return _Select(key)

    def findings(
        self,
        source_qm: uuid.UUID,
        ordinal: int,
        scanned: list[tuple[int, int, bytes]],
        hops: dict[int, str],
        *,
        visible: Callable[[QueueRecord], bool] | None = None,
    ) -> list[Finding]:
        """What the scan found, with the copies awaiting confirmation and the
        FinalAck to send. ``hops``: the next hop of each outgoing queue by id.
        With ``visible``, only what is in the queues it accepts (the copies and
        FinalAcks, which belong to the queue manager as a whole, are left out)."""
        found: list[Finding] = []
        key = self.key(source_qm, ordinal)
        for queue_id, lookup_id, record in scanned:
            queue = self._store.get_queue_by_id(queue_id)
            if queue is not None and (visible is None or visible(queue)):
                found.append(self._finding(queue, lookup_id, record, key, hops))
        if visible is not None:
            return found
        if source_qm == self._guid:
            for copy in self._store.confirmations(ordinal):
                state = "delivered" if copy.delivered else "not delivered yet"
                deadline = (
                    "no deadline" if copy.deadline is None else f"until {_utc(copy.deadline)}"
                )
                found.append(
                    Finding(
                        "awaiting-confirmation",
                        _destination(copy.destination),
                        0.0,
                        copy.last_class,
                        f"copy kept for the confirmation process: {state}, {deadline}",
                        endpoint_of(copy.destination) if copy.delivered else "",
                    )
                )
        else:
            # Ours (one for each stream the message came in), and those a router
            # keeps for other destinations.
            waiting = self._store.final_acks(
                source_qm=source_qm.bytes, ordinal=ordinal, limit=_FINAL_ACKS_SHOWN
            )
            for pending in waiting:
                sender = storage.final_ack_sender(pending.key)
                detail = (
                    "FinalAck waiting to go back to the source queue manager"
                    if sender is None
                    else f"FinalAck of {uuid.UUID(bytes=sender)} kept to pass on to the source"
                )
                found.append(
                    Finding(
                        "final-ack", str(source_qm), 0.0, decode_final_ack(pending.value)[0], detail
                    )
                )
        return found

    def _finding(
        self, queue: QueueRecord, lookup_id: int, record: bytes, key: bytes, hops: dict[int, str]
    ) -> Finding:
        arrived = storage.message_arrived_time(record)
        payload = storage.message_payload(record)
        name = queue.display_name
        if queue.kind is QueueKind.OUTGOING:
            return _outgoing_finding(queue, lookup_id, arrived, payload, hops)
        message = MessageProperties.from_bytes(payload)
        if bytes(payload[_ID]) != key:
            about = "acknowledgment" if message.message_class else "correlated message"
            return Finding(
                "acknowledgment" if message.message_class else "correlated",
                name,
                message.sent_time,
                message.message_class,
                f"{about} {message.message_id} in {name}",
            )
        kind = {
            QueueKind.NORMAL: "queue",
            QueueKind.SUBQUEUE: "subqueue",
            QueueKind.JOURNAL: "journal",
            QueueKind.DEADLETTER: "dead-letter",
            QueueKind.DEADXACT: "dead-letter",
            QueueKind.SYSTEM_JOURNAL: "system-journal",
        }.get(queue.kind, "queue")
        detail = {
            "queue": f"waiting to be received; lookup id {lookup_id}",
            "subqueue": f"moved to a subqueue, waiting there; lookup id {lookup_id}",
            "journal": f"received (journal copy); lookup id {lookup_id}",
            "dead-letter": f"dead-lettered; lookup id {lookup_id}",
            "system-journal": "confirmed delivered or received (source journal)",
        }[kind]
        if queue.name in (names.DEADXACT, names.DEADLETTER, names.SYSTEM_JOURNAL):
            name = queue.name
        return Finding(kind, name, arrived, message.message_class, detail)


def _outgoing_finding(
    queue: QueueRecord,
    lookup_id: int,
    arrived: float,
    payload: memoryview,
    hops: dict[int, str],
) -> Finding:
    """What an outgoing entry says: the message on its way, relayed or sent from here."""
    entry = decode_entry(payload)
    destination = _destination(queue.name)
    hop = hops.get(queue.queue_id, "")
    if entry.origin is EntryOrigin.RELAYED:
        detail = f"held here for relaying, not yet acknowledged; entry {lookup_id}"
        return Finding("relaying", destination, arrived, 0, detail, hop)
    detail = f"in the outgoing queue, not yet acknowledged; entry {lookup_id}"
    return Finding("outgoing", destination, arrived, 0, detail, hop)


class _Select:
    """Picks the records of the message and of its acknowledgments."""

    __slots__ = ("_correlation", "_guid", "_key", "_ordinal", "_packet_ordinal", "_packet_source")

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._guid = uuid.UUID(bytes=key[:16])
        self._ordinal = _ORDINAL.unpack_from(key, 16)[0]
        self._packet_source = self._guid.bytes_le
        self._packet_ordinal = key[16:]
        # An acknowledgment's correlation id holds the GUID in the wire's
        # [MS-DTYP] packet form (as Windows writes it), not the stored id's.
        self._correlation = self._packet_source + key[16:]

    def __call__(self, record: memoryview) -> bool:
        try:
            payload = storage.message_payload(record)
        except storage.StoreCorrupt:
            return False
        if len(payload) < 68:
            return False
        key = self._key
        # The first byte only says what an outgoing entry is: another stored
        # message begins with its id, whose first byte may be the same.
        origin = payload[0]
        if origin == _LOCAL and payload[_ENTRY_ID] == key:
            return True
        if (
            origin == _RELAYED
            and payload[_PACKET_SOURCE] == self._packet_source
            and payload[_PACKET_MESSAGE_ID] == self._packet_ordinal
            and self._relays(payload)
        ):
            return True
        if payload[_ID] == key:
            return True
        correlation = self._correlation
        return bool(payload[_FLAGS] & _HAS_CORRELATION) and payload[_CORRELATION] == correlation

    def _relays(self, payload: memoryview) -> bool:
        """Whether a RELAYED entry's packet is the message (it parses, and its
        UserHeader names the source and the message id looked for)."""
        try:
            packet = wire.parse_packet(bytes(payload[_ENTRY:]))
        except wire.RemoteProtocolError:
            return False
        return (
            isinstance(packet, wire.UserMessage)
            and packet.user.source_qm == self._guid
            and packet.user.message_id == self._ordinal
        )


def _destination(outgoing_name: str) -> str:
    try:
        return RemoteDestination.from_outgoing_name(outgoing_name).display_name
    except ValueError:
        return outgoing_name


def _utc(seconds: float) -> str:
    """Unix seconds as ISO 8601 in UTC, to the second."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
