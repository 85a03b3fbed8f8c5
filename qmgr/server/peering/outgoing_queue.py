"""One outgoing queue as the peering layer drives it.

Theory of operation
-------------------
The store keeps the entries (``storage.QueueKind.OUTGOING``) and the
sequence state (``storage.OutgoingState``); an :class:`OutgoingQueue` keeps
the :class:`~qmgr.protocol.OutgoingSequence` that numbers and tracks them,
and the payloads of the entries it has loaded, within a byte budget
(:mod:`.payloads`: past it, a payload is read from the store when it is
needed). It loads entries in lookup-id order, a chunk of at most
:data:`FILL_CHUNK` entries and :data:`FILL_BYTES` bytes (or one entry) at a
time, when fewer than :data:`FILL_LOW` wait to be sent and fewer than
:data:`MAX_LOADED` are loaded. Every entry waiting to be sent is loaded up to
:data:`FILL_LOW` (the outgoing expiry gives up only loaded entries that were
never sent), whatever the size of their messages: a backlog of millions, or of large messages,
costs neither memory nor start-up time. Entries leave memory when the store
has forgotten them.

A transmission is built when the session's window lets it go: a local
message becomes a UserMessage (with the TransactionHeader the sequence
gives it), a relayed one goes out as the packet that arrived.

What every queue needs of the daemon comes in the peering adapter's
:class:`~.parts.PeeringParts`; of the outgoing side that holds it, only
two calls (a :class:`QueueOwner`: forget entries, wake the resend timers);
the link that carries it is a :class:`Carrier` to it.

What an earlier run may have sent. An entry that was perhaps sent cannot be
given up when its time to reach the queue passes (the receiver may have it).
At an orderly stop the daemon writes, for every queue, the highest lookup id
that may have gone out (the setting :data:`SENT_MARKS`); the next start
reads it and clears it in its first write, before any link runs, so that an
entry above its queue's mark counts as never sent. After a crash there are
no marks, and every entry stored at start counts as perhaps sent.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Protocol

import trio

import storage
import wire
from qmgr.core.confirmation import wants_confirmation
from qmgr.core.errors import InvalidName
from qmgr.core.names import SYSTEM_QUEUES, parse_format_name
from qmgr.core.outcomes import JOURNAL_JOURNAL, wants_report
from qmgr.core.outgoing import EntryOrigin, RemoteDestination, decode_entry
from qmgr.core.routes import endpoint_text
from qmgr.protocol import EntryKind, OutgoingSequence
from wire import client as cf

from .aliases import reached_back
from .connection import PacketToSend
from .parts import PeeringParts
from .payloads import LoadedPayloads, Payload

__all__ = [
    "FILL_BYTES",
    "FILL_CHUNK",
    "FILL_LOW",
    "MAX_LOADED",
    "SENT_MARKS",
    "Carrier",
    "EntryTag",
    "OutgoingQueue",
    "QueueOwner",
    "clear_sent_marks",
    "read_sent_marks",
    "sent_marks",
]

#: Store setting of the last orderly stop: JSON ``{queue id: highest lookup id
#: that may have gone out}``; removed once the next start has read it.
SENT_MARKS: Final = "outgoing-sent-marks"

#: Entries loaded from the store at a time.
FILL_CHUNK: Final = 1024
#: Bytes of entries read from the store at a time (at least one entry).
FILL_BYTES: Final = 1 << 20
#: Load more when fewer than this many loaded entries wait to be sent.
FILL_LOW: Final = 512
#: Most entries loaded at once (sent and waiting for an acknowledgment included).
MAX_LOADED: Final = 65536


class QueueOwner(Protocol):
    """What an outgoing queue asks of the outgoing side that holds it."""

    def forget(self, queue: OutgoingQueue, lookup_ids: Iterable[int]) -> None:
        """Remove acknowledged entries of ``queue`` from the store (in the background)."""
        ...

    def give_up(self, queue: OutgoingQueue, lookup_id: int, reason: wire.MessageClass) -> None:
        """Remove an entry of ``queue`` that can never be sent, reporting ``reason``."""
        ...

    async def forget_waiting(self, queue: OutgoingQueue) -> None:
        """Write now the forget of the entries of ``queue`` waiting to be forgotten."""
        ...

    def wake_timers(self, queue: OutgoingQueue) -> None:
        """The sequence of ``queue`` may have armed its resend timer."""
        ...


@dataclass(frozen=True, slots=True)
class EntryTag:
    """The session tag of a transmission of an outgoing entry."""

    queue: OutgoingQueue
    lookup_id: int


class Carrier(Protocol):
    """The link that carries an outgoing queue, as the queue sees it."""

    def wake(self, queue: OutgoingQueue | None = None) -> None:
        """``queue`` (None: any of its queues) may have something to send."""
        ...

    def describe(self) -> tuple[str, float | None, str]:
        """State, the next attempt's unix time (while waiting) and the last error."""
        ...

    def hop_qm(self) -> uuid.UUID | None:
        """The GUID of the queue manager at the hop (None: no session has opened yet)."""
        ...


class OutgoingQueue:
    """An outgoing queue's sequence, loaded entries and controls."""

    def __init__(
        self,
        parts: PeeringParts,
        owner: QueueOwner,
        record: storage.QueueRecord,
        destination: RemoteDestination,
        state: storage.OutgoingState,
        hops: tuple[tuple[str, int], ...],
        *,
        at_start: bool = False,
        sent_mark: int | None = None,
    ) -> None:
        """``at_start``: found in the store when the daemon started, with
        ``sent_mark`` the highest lookup id the last run may have sent, if it
        stopped in order (:func:`read_sent_marks`)."""
        self.parts = parts
        self.owner = owner
        #: Entries below this lookup id were in the store when the daemon started
        #: and an earlier run may have sent them.
        self.sent_before_start_below = 0
        if at_start:
            below = record.next_lookup_id
            if sent_mark is not None:
                below = min(below, sent_mark + 1)
            self.sent_before_start_below = below
        self.queue_id = record.queue_id
        self.name = record.name
        self.destination = destination
        #: Its next hops in order of preference (``[routes]``; the destination
        #: itself without a route), and the one in use.
        self.hops = hops
        self.hop_index = 0
        self.sequence_timestamp = state.sequence_timestamp
        self.machine = OutgoingSequence(
            sequence_id=wire.TxSequenceId(
                ordinal=state.sequence_ordinal, timestamp=state.sequence_timestamp
            ),
            base=state.base,
            resend_intervals=parts.config.peer_resend_intervals,
            sent_before=self.sent_before_start_below,
        )
        self.paused = state.paused
        #: Copies of messages sent through it await their FinalAcks before a
        #: deadline (the store's count, looked at every second:
        #: ``final_acks.ConfirmationWatch``): its link keeps a session up for them.
        self.awaiting_confirmation = False
        #: The loaded entries, with the payloads kept in memory.
        self.payloads = LoadedPayloads()
        self.loaded_through = 0
        self.to_forget: list[int] = []
        #: Entries that cannot be delivered, with why (a message class): their
        #: forget writes the reports of a message given up, not of one delivered.
        self.undeliverable: dict[int, wire.MessageClass] = {}
        #: A purge is being written: forgets wait for it (see ``OutgoingQueues``).
        self.purging = False
        # Purges of the queue, one at a time (``purging`` stays set through each).
        self._purge_lock = trio.Lock()
        self.last_order_ack: float | None = None
        #: The queue manager whose OrderAck covered each entry waiting to be
        #: forgotten, by lookup id: the copies awaiting confirmation of those
        #: entries keep its GUID, and only its FinalAck settles them.
        self.acknowledged_by: dict[int, uuid.UUID] = {}
        #: Since when (``trio.current_time()``) the queue has been seen empty and
        #: without traffic, for its removal (None: not seen so, or traffic since).
        self.quiet_since: float | None = None
        #: The link to its next hop.
        self.link: Carrier | None = None
        #: The links of earlier next hops of its route, while it uses a later one:
        #: its new work wakes them too, so that they try their hop again.
        self.standby_links: list[Carrier] = []
        self._direct = wire.DirectQueue(name=destination.direct_name)
        self.fill()

    @property
    def hop(self) -> tuple[str, int]:
        """The next hop in use."""
        return self.hops[self.hop_index]

    # ------------------------------------------------------------------ entries

    def fill(self) -> None:
        """Load the next entries from the store if few wait to be sent."""
        store = self.parts.store
        record = store.get_queue_by_id(self.queue_id)
        if record is None:
            return
        newest = record.next_lookup_id - 1
        machine = self.machine
        while (
            newest > self.loaded_through
            and machine.waiting < FILL_LOW
            and len(self.payloads) < MAX_LOADED
        ):
            rows = store.read_range(
                self.queue_id, after=self.loaded_through, limit=FILL_CHUNK, max_bytes=FILL_BYTES
            )
            if not rows:
                self.loaded_through = newest
                break
            for lookup_id, data in rows:
                payload = storage.message_payload(data)
                machine.add(lookup_id, _kind(payload))
                self.payloads.add(lookup_id, payload, reports=_reports(payload) is not None)
            self.loaded_through = rows[-1][0]
            self.quiet_since = None

    @property
    def stored(self) -> int:
        """Entries in the store."""
        record = self.parts.store.get_queue_by_id(self.queue_id)
        return 0 if record is None else record.depth

    def has_work(self) -> bool:
        """Whether the next hop is needed: entries to send, or to see acknowledged,
        or FinalAcks to come back (a session carries them)."""
        return not self.paused and (
            len(self.machine) > 0 or self.stored > 0 or self.awaiting_confirmation
        )

    def removable(self) -> bool:
        """Whether the queue may be removed now: nothing to send, see acknowledged,
        forget or report, here or in the store, no FinalAck to come back through
        it, and neither paused nor being purged
        (the store checks again as it removes it: ``storage.RemoveEmptyOutgoing``)."""
        return not (
            self.paused
            or self.awaiting_confirmation
            or self.purging
            or len(self.machine)
            or self.payloads
            or self.to_forget
            or self.undeliverable
            or self.stored
        )

    def wake(self) -> None:
        """Tell the link there may be something to send (and the standby links
        that it may be worth trying their hop again)."""
        if self.link is not None:
            self.link.wake(self)
        for standby in self.standby_links:
            standby.wake(self)

    def next_packet(self, now: float) -> PacketToSend | None:
        """The next packet to send, built: ``(bytes, recoverable, tag)``, or None."""
        if self.paused:
            return None
        machine = self.machine
        if machine.waiting < FILL_LOW:
            self.fill()
        while True:
            transmission = machine.next_transmission(now)
            if transmission is None:
                return None
            payload = self.payloads.get(transmission.lookup_id, self._read)
            if payload is None:  # forgotten or purged meanwhile
                continue
            entry = decode_entry(payload)
            if entry.origin is EntryOrigin.RELAYED:
                data = bytes(entry.data)
            else:
                try:
                    data = self._build(entry.data, transmission.header)
                except wire.ProtocolError as exc:
                    # Its packet cannot be built (too large for one): it can never
                    # leave. Dead-lettered here with NACK_MESSAGE_TOO_LARGE, and
                    # reported to its admin queue, as a message given up.
                    self.parts.log.warning(
                        "outgoing_message_unsendable",
                        queue=self.name,
                        lookup_id=transmission.lookup_id,
                        error=str(exc),
                    )
                    self.owner.give_up(
                        self, transmission.lookup_id, wire.MessageClass.NACK_MESSAGE_TOO_LARGE
                    )
                    continue
            kind = transmission.kind
            if kind is EntryKind.TRANSACTIONAL:
                self.owner.wake_timers(self)  # the resend timer may start now
            recoverable = kind is not EntryKind.EXPRESS
            return data, recoverable, EntryTag(self, transmission.lookup_id)

    def _build(self, data: memoryview, header: wire.TransactionHeader | None) -> bytes:
        message = wire.MessageProperties.from_bytes(data)
        if header is not None and wants_confirmation(message):
            # FA: the destination sends a FinalAck when the message leaves its queue.
            header = dataclasses.replace(
                header, flags=header.flags | wire.TransactionFlags.FINAL_ACK
            )
        packet = wire.message_to_packet(
            message,
            destination=self._direct,
            admin=self._wire_queue(message.admin_queue),
            response=self._wire_queue(message.response_queue),
            transaction=header,
        )
        return wire.build_packet(packet)

    def _wire_queue(self, text: str) -> wire.QueueAddress | None:
        """A reply queue as the destination can use it: a direct name."""
        if not text:
            return None
        try:
            element = parse_format_name(text, self.parts.identity).elements[0]
        except InvalidName:
            return wire.direct_queue(text)
        if not element.is_local or _names_a_host(text):
            # A direct name that names a host is kept as the sender wrote it.
            return wire.direct_queue(text)
        # A local name: how the destination reaches us back.
        path = element.queue if element.queue in SYSTEM_QUEUES else f"private$\\{element.queue}"
        return wire.DirectQueue(name=f"{reached_back(self.parts.config)}\\{path}")

    def forget_reports(self, ids: tuple[int, ...]) -> list[storage.Operation]:
        """What the forget of the entries ``ids`` also writes: the reports of
        those given up (:attr:`undeliverable`), and of the others, acknowledged,
        :meth:`delivery_reports`."""
        undeliverable = self.undeliverable
        if not undeliverable:
            return self.delivery_reports(ids)
        ops: list[storage.Operation] = []
        delivered: list[int] = []
        for lookup_id in ids:
            reason = undeliverable.get(lookup_id)
            if reason is None:
                delivered.append(lookup_id)
            else:
                ops.extend(self.give_up_reports(lookup_id, reason) or ())
        ops.extend(self.delivery_reports(tuple(delivered)))
        return ops

    def give_up_reports(
        self, lookup_id: int, reason: wire.MessageClass
    ) -> list[storage.Operation] | None:
        """What giving up the entry ``lookup_id`` for ``reason`` writes besides
        forgetting it (``Confirmations.given_up``: the negative acknowledgment
        to its admin queue if asked, its dead-letter copy, and the settling of
        its copy awaiting confirmation). None for an entry gone, or a relayed
        transactional one (its source reports it)."""
        if lookup_id in self.payloads:
            payload = self.payloads.get(lookup_id, self._read)
        else:  # not loaded (yet): an entry past its time to reach the queue
            payload = self._read(lookup_id)
        if payload is None:
            return None
        return self.parts.confirmations.given_up(payload, self.name, reason, wall=time.time())

    def delivery_reports(self, ids: tuple[int, ...]) -> list[storage.Operation]:
        """What the forget of the acknowledged entries ``ids`` also writes: copies
        awaiting confirmation learn their message was delivered, and a plain
        message with MQMSG_JOURNAL is copied to the system journal."""
        reported = self._reported(ids)
        if not reported:
            return []
        parts = self.parts
        ops: list[storage.Operation] = [
            parts.outcomes.system_journal(message)
            for _, message in reported
            if not message.transactional
        ]
        # One mark by each queue manager whose OrderAcks covered them (one,
        # but for an address moved while a forget waited).
        by_sender: dict[uuid.UUID | None, list[tuple[wire.MessageProperties, str]]] = {}
        for lookup_id, message in reported:
            sender = self.acknowledged_by.get(lookup_id)
            by_sender.setdefault(sender, []).append((message, self.name))
        for sender, messages in by_sender.items():
            delivered = parts.confirmations.delivered(messages, by=sender)
            if delivered is not None:
                ops.append(delivered)
        return ops

    def _reported(self, ids: tuple[int, ...]) -> list[tuple[int, wire.MessageProperties]]:
        """Our own messages among the loaded entries ``ids`` whose delivery is
        reported, by lookup id: transactional ones that asked for confirmation,
        others with MQMSG_JOURNAL."""
        found: list[tuple[int, wire.MessageProperties]] = []
        for lookup_id in ids:
            payload = self.payloads.reporting(lookup_id, self._read)
            message = None if payload is None else _reports(payload)
            if message is not None:
                found.append((lookup_id, message))
        return found

    def _read(self, lookup_id: int) -> Payload | None:
        """An entry's payload read from the store (None: gone)."""
        record = self.parts.store.read_message(self.queue_id, lookup_id)
        return None if record is None else storage.message_payload(record)

    def forgotten(self, ids: tuple[int, ...], state: storage.OutgoingState) -> None:
        """The store forgot these entries; ``state`` is the sequence afterwards."""
        for lookup_id in ids:
            self.payloads.discard(lookup_id)
            self.undeliverable.pop(lookup_id, None)
            self.acknowledged_by.pop(lookup_id, None)
        self.machine.forgotten(
            ids,
            wire.TxSequenceId(ordinal=state.sequence_ordinal, timestamp=state.sequence_timestamp),
            state.base,
        )
        self.quiet_since = None
        self.fill()
        self.wake()

    # ------------------------------------------------------------------ controls

    async def set_paused(self, paused: bool) -> None:
        """Pause or resume sending (kept across restarts)."""
        unit = storage.Unit((storage.SetOutgoingPaused(self.queue_id, paused),))
        outcome = await self.parts.committer.submit(unit)
        if outcome.error is not None:
            raise outcome.error
        self.paused = paused
        self.quiet_since = None
        # The request's handler logs outgoing_paused / outgoing_resumed, with the principal.
        self.wake()

    async def purge(self) -> int:
        """Remove every entry; later messages' sequence numbers bridge the hole.

        Entries already acknowledged (or given up) and not yet forgotten are
        forgotten first, with their reports (their delivery is not purged).
        Entries appended after the purge's write stay, even when they were
        loaded while it was written: they are sent, in order, after the hole."""
        async with self._purge_lock:
            return await self._purge()

    async def _purge(self) -> int:
        unit = storage.Unit((storage.PurgeQueue(self.queue_id),))
        self.purging = True
        try:
            # What was acknowledged is forgotten first, with its delivery reports:
            # the forgetter leaves a queue being purged alone.
            await self.owner.forget_waiting(self)
            outcome = await self.parts.committer.submit(unit)
            result = outcome.results[0]
            if not isinstance(result, storage.QueuePurged):
                raise outcome.error or RuntimeError("purge failed")
            record = self.parts.store.get_queue_by_id(self.queue_id)
            # The store's mark: what is below it was purged (by this purge, or
            # one written since), what is at or above it was appended later.
            below = self.loaded_through + 1 if record is None else record.purged_below
            gone = tuple(lookup_id for lookup_id in self.payloads if lookup_id < below)
            for lookup_id in gone:
                self.payloads.discard(lookup_id)
                self.undeliverable.pop(lookup_id, None)
                self.acknowledged_by.pop(lookup_id, None)
            self.to_forget = [lookup_id for lookup_id in self.to_forget if lookup_id >= below]
            self.machine.removed(gone)
            self.loaded_through = max(self.loaded_through, below - 1)
        finally:
            self.purging = False
            self.owner.forget(self, ())
        self.parts.signals.notify(())
        self.wake()
        return result.messages

    def info(self) -> cf.OutgoingInfo:
        """The queue for status and ``qmgr outgoing list``."""
        machine = self.machine
        link = self.link
        state, next_attempt, error = ("idle", None, "") if link is None else link.describe()
        if self.paused:
            state = "paused"
        elif state == "idle" and self.has_work():
            state = "connecting"  # just woken (a resume, a first message): not yet running
        unloaded = max(0, self.stored - len(machine))
        # Entries not loaded yet that the run before a restart may have sent: above
        # what is loaded, below the mark of what that run sent (ids are dense but
        # for what was forgotten, so this may count a few too many).
        maybe_sent = min(unloaded, max(0, self.sent_before_start_below - 1 - self.loaded_through))
        sequence = machine.sequence_id
        return cf.OutgoingInfo(
            destination=self.destination.display_name,
            next_hop=endpoint_text(*self.hop),
            state=state,
            next_attempt=next_attempt,
            waiting=machine.never_sent_waiting + unloaded - maybe_sent,
            unacknowledged=machine.unacknowledged + maybe_sent,
            sequence_timestamp=sequence.timestamp,
            sequence_ordinal=sequence.ordinal,
            next_number=machine.next_number,
            last_order_ack=self.last_order_ack,
            last_error=error,
        )


def _reports(payload: Payload) -> wire.MessageProperties | None:
    """The message of an entry whose delivery is reported (one of ours that asked
    for confirmation, transactional, or for the system journal, not), else None."""
    entry = decode_entry(payload)
    if entry.origin is not EntryOrigin.LOCAL or not wants_report(entry.data):
        return None
    message = wire.MessageProperties.from_bytes(entry.data)
    if wants_confirmation(message) or (
        not message.transactional and message.journal & JOURNAL_JOURNAL
    ):
        return message
    return None


def _kind(payload: Payload) -> EntryKind:
    entry = decode_entry(payload)
    if entry.origin is EntryOrigin.RELAYED:
        return EntryKind.RELAYED
    if entry.transactional:
        return EntryKind.TRANSACTIONAL
    return EntryKind.RECOVERABLE if entry.recoverable else EntryKind.EXPRESS


def _names_a_host(text: str) -> bool:
    """True for ``DIRECT=TCP:host...`` or ``DIRECT=OS:host...`` with a host other
    than ``.`` or ``localhost`` (which mean "this machine" wherever they are read)."""
    if text[:7].upper() != "DIRECT=":
        return False
    host = text[7:].split(":", 1)[-1].split("\\", 1)[0].rsplit(":", 1)[0].lower()
    return host not in (".", "localhost", "")


def read_sent_marks(store: storage.Store) -> dict[int, int] | None:
    """The marks the last run wrote when it stopped in order (queue id -> the
    highest lookup id it may have sent), or None: none were written (a crash),
    they were read already, or another run came between.

    Every run raises the store's message-id ordinal limit when it starts, so
    marks written beside the limit they found are the last run's only while
    the limit is still that: a run of a release that does not know them (a
    rollback) may have sent what they call never sent, and then they are
    not used."""
    text = store.get_setting(SENT_MARKS)
    if not text:
        return None
    try:
        raw = json.loads(text)
        if raw["ordinal_limit"] != store.ordinal_limit:
            return None
        return {int(queue_id): int(mark) for queue_id, mark in raw["queues"].items()}
    except (ValueError, AttributeError, TypeError, KeyError):
        return None  # as after a crash: every stored entry counts as perhaps sent


def sent_marks(
    store: storage.Store, queues: Iterable[OutgoingQueue], *, ordinal_limit: int | None = None
) -> storage.SetSetting:
    """The write of every queue's mark at an orderly stop, once no link sends,
    with the ordinal limit they go with (:func:`read_sent_marks`): the store's,
    or ``ordinal_limit``, the one the same write leaves (``ReturnOrdinals``)."""
    marks = {queue.queue_id: queue.machine.transmitted_through for queue in queues}
    limit = store.ordinal_limit if ordinal_limit is None else ordinal_limit
    value = {"ordinal_limit": limit, "queues": marks}
    return storage.SetSetting(SENT_MARKS, json.dumps(value, separators=(",", ":")))


def clear_sent_marks() -> storage.ClearSetting:
    """The write that clears the marks once read, before any link runs (a crash
    later must not leave them standing for what the new run sends); it only
    frees space, so a full store takes it too."""
    return storage.ClearSetting(SENT_MARKS)
