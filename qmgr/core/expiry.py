"""Messages whose time to be received has passed: found by deadline, removed with a NACK.

Theory of operation
-------------------
A message with a time to be received is stored with its deadline (its send
time plus that many seconds, by the sender's clock as MSMQ does), and the
store indexes it in ``expiry`` (``storage.ops.expiry``). :class:`Expiry` walks
that index in deadline order, one bounded page per :meth:`Expiry.step`,
from where the last page ended, and for each due message decides:

* still in its queue and free: it is *held* (so no receive takes it while
  its removal is on its way to the disk) and removed by a unit of its own,
  with the reports of NACK_RECEIVE_TIMEOUT (``outcomes``): an
  acknowledgment if asked, a dead-letter copy if the sender is here and
  asked for one. The message is not journaled: it was not received;
* held by a transaction: left to it. If the transaction commits, the
  message was received; if it aborts, the message is free again and the
  next pass removes it. The caller looks again after :data:`RETRY_SECONDS`
  while such messages remain;
* in a queue being purged or deleted, or gone: left to the erase steps,
  which drop its index entry with the message;
* a copy awaiting confirmation (queue id 0, ``storage.ops.confirmations``):
  settled by ``Confirmations.expired`` (a dead-letter copy with the class that
  says why); an entry whose copy was settled meanwhile is dropped.

A pass ends when a page comes back short; the next begins at the oldest due
entry again. Nothing is read at start-up and no step visits a message that
is not due, so neither restarts nor steps grow with the number of timed
messages. Entries of outgoing queues (a time to reach the queue at the
source) are handed to the peering layer (``ExpiryStep.outgoing``), which
alone knows whether they were sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import storage
from storage import (
    CONFIRMATION_QUEUE_ID,
    DueMessage,
    ForgetExpiry,
    QueueKind,
    RemoveMessage,
    Store,
    Unit,
    UnitOutcome,
    confirmation_of_lookup,
)
from wire import MessageClass, MessageProperties, ProtocolError

from .confirmation import Confirmations
from .holds import Holds
from .outcomes import Outcomes

__all__ = ["RETRY_SECONDS", "Expiry", "ExpiryStep"]

#: How often to look again while due messages are held by transactions.
RETRY_SECONDS: Final = 1.0
#: Past every key of the same deadline in the index.
_LAST_QUEUE: Final = 0xFFFFFFFF
_LAST_LOOKUP: Final = 0xFFFFFFFFFFFFFFFE


@dataclass(slots=True)
class ExpiryStep:
    """What one step found."""

    #: One unit per expired message: its removal and its reports.
    units: list[Unit] = field(default_factory=list)
    #: ``(queue_id, lookup_id)`` of each unit's message, in the same order
    #: (None for a unit that settles a copy awaiting confirmation, or drops
    #: index entries whose messages are gone).
    messages: list[tuple[int, int] | None] = field(default_factory=list)
    #: Due messages held by transactions (looked at again later).
    held: int = 0
    #: Due entries of outgoing queues (a time to reach the queue at the source),
    #: for the peering layer to give up if they were never sent.
    outgoing: list[DueMessage] = field(default_factory=list)
    #: True if the index has more due entries past this page.
    more: bool = False


class Expiry:
    """Finds expired messages in ``store`` (read only; the caller writes), holds
    them in ``holds`` while their removal is written, reports their fate through
    ``outcomes`` and settles copies past their deadline through ``confirmations``."""

    __slots__ = ("_after", "_confirmations", "_holds", "_outcomes", "_store")

    def __init__(
        self, store: Store, holds: Holds, outcomes: Outcomes, confirmations: Confirmations
    ) -> None:
        self._store = store
        self._holds = holds
        self._outcomes = outcomes
        self._confirmations = confirmations
        self._after: DueMessage | None = None

    def step(self, wall: float, limit: int) -> ExpiryStep:
        """Up to ``limit`` due index entries at ``wall`` (unix seconds), from
        where the last step ended; the units that expire the free ones."""
        store = self._store
        holds = self._holds
        due = store.due_messages(before=wall, limit=limit, after=self._after)
        step = ExpiryStep(more=len(due) == limit)
        self._after = due[-1] if step.more else None
        stale: list[DueMessage] = []
        for entry in due:
            if entry.queue_id == CONFIRMATION_QUEUE_ID:
                copy = store.confirmation(*confirmation_of_lookup(entry.lookup_id))
                if copy is None or copy.deadline is None:
                    stale.append(entry)  # settled in the meantime
                    continue
                step.units.append(self._confirmations.expired(copy, wall=wall))
                step.messages.append(None)
                continue
            queue = store.get_queue_by_id(entry.queue_id)
            if queue is None or entry.lookup_id < queue.purged_below:
                continue
            if queue.kind is QueueKind.OUTGOING:
                step.outgoing.append(entry)
                continue
            if holds.is_held(entry.queue_id, entry.lookup_id):
                step.held += 1
                continue
            record = store.read_message(entry.queue_id, entry.lookup_id)
            if record is None:
                continue
            try:
                message = MessageProperties.from_bytes(storage.message_payload(record))
            except ProtocolError:
                # Not a message this queue manager can read: it stays, unexpired.
                stale.append(entry)
                continue
            # Held, so that no receive takes it while its removal is written.
            band = 0 if queue.transactional else 7 - storage.message_header(record)[0]
            holds.hold(entry.queue_id, entry.lookup_id, band)
            reports = self._outcomes.reports(
                message,
                MessageClass.NACK_RECEIVE_TIMEOUT,
                wall=wall,
                note=storage.message_note(record),
            )
            removal = RemoveMessage(entry.queue_id, entry.lookup_id)
            step.units.append(Unit((removal, *reports)))
            step.messages.append((entry.queue_id, entry.lookup_id))
        if stale:
            step.units.append(Unit((ForgetExpiry(tuple(stale)),)))
            step.messages.append(None)
        return step

    def done(
        self, message: tuple[int, int] | None, outcome: UnitOutcome | BaseException
    ) -> set[int]:
        """A unit of :meth:`step` was written (or failed): returns the queues to wake.
        ``message`` is the unit's entry in ``ExpiryStep.messages``."""
        written = isinstance(outcome, UnitOutcome) and outcome.error is None
        woken: set[int] = set()
        if written:
            assert isinstance(outcome, UnitOutcome)
            woken = {
                result.queue_id
                for result in outcome.results
                if isinstance(result, storage.Appended)
            }
        if message is None:
            return woken
        if written:
            self._holds.forget(*message)
            return woken
        return self._holds.release([message])

    def next_deadline(self, wall: float) -> float | None:
        """The earliest deadline after ``wall`` in the index, or None."""
        after = DueMessage(wall, _LAST_QUEUE, _LAST_LOOKUP)
        upcoming = self._store.due_messages(before=float("inf"), limit=1, after=after)
        return upcoming[0].deadline if upcoming else None
