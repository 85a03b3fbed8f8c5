"""The source's side of confirmations: FinalAcks that arrive, and the sessions that carry them.

Theory of operation
-------------------
This queue manager is the source of a transactional message that asked for
confirmation; its destination sends a FinalAck when the message leaves its
queue (or is refused there). The receiver finds the FinalAck is about one
of our messages (``qmgr.protocol.FinalAckArrived``; one about another
queue manager's message is passed on along its return path, as OrderAcks
are). :class:`FinalAckArrivals` asks the core for the unit that settles the
message's copy (``qmgr.core.confirmation.Confirmations.settle``: of a send
to several queue managers, the copy of the outgoing queue the FinalAck's
TxSequenceID names, its timestamp being the queue's, so that a FinalAck sent
twice settles its own destination's copy once and never another's; and only
if it comes from the queue manager whose OrderAck covered the copy, which
the copy keeps (``OutgoingQueue.acknowledged_by``, taken with the OrderAck,
written when the forget of the acknowledged entries marks it delivered):
another peer cannot make it up, ``final_ack_refused``), and
stores it in the connection's next write, as one operation that does nothing if the copy is
gone by then (its deadline may settle it first). The FinalAck counts in our
SessionAck only once that write is persisted: the destination forgets its
FinalAck on that SessionAck. A FinalAck about a copy already settled (a
repeat) stores nothing, and counts once the writes before it are persisted.

A FinalAck can only come back on a session between the two queue managers,
and a session that carries nothing closes after ``peers.idle_timeout``: a
message received at its destination after that would see its FinalAck wait
for the next message either way, and its copy here reach its deadline
unconfirmed. So while copies of messages sent through an outgoing queue
await their FinalAcks before a deadline, the :class:`ConfirmationWatch` keeps
the queue's link wanting a session (``OutgoingQueue.awaiting_confirmation``, part of its
``has_work``): the link connects, and after an idle close connects again
(``peers.retry_initial`` later), so that the destination's courier always
has a session to send on within a few seconds. The watch reads the store's
count of copies with a deadline by destination
(``storage.Store.awaited_confirmations``: one entry per destination that has
any) every :data:`WATCH_SECONDS`; the queue's removal when idle waits for the
copies too (``storage.RemoveEmptyOutgoing`` refuses). The deadline bounds
the wait: the expiry settles a copy whose FinalAck did not come, and the
count with it. A copy without a deadline keeps no session: nothing can report
it unconfirmed, and its FinalAck comes with the next session between the
two. A route through a router keeps the session to the router up, and the
router keeps its own session to the destination the same way: a relayed
message whose source awaits its FinalAck before a deadline
(``qmgr.core.arrivals.Arrival.confirm_by``) marks the router's outgoing queue
until that deadline (:meth:`ConfirmationWatch.relayed`; kept in the store
too, as the setting ``relayed-until:<hash of the queue's name>`` written with
the relayed message when it moves the deadline later, taken back at the next
start, :meth:`ConfirmationWatch.restore`, and cleared once it has passed).
At the destination, the FinalAck finds its way back through the router's
next session even after the first one closed or either end restarted: the
receiver remembers which router the source's messages came through
(``qmgr.protocol.return_paths``, stored with the stream's state).

Sending our own FinalAcks (we are the destination) is the courier's work
(``qmgr.server.workers.final_ack_courier``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Final

import structlog
import trio

import storage
import wire
from qmgr.core.errors import ShuttingDown
from qmgr.protocol import Role

from ..committer import Committer
from ..signals import touched_queues
from .connection import PeerConnection
from .outgoing_queue import OutgoingQueue
from .parts import PeeringParts

__all__ = ["RELAYED_UNTIL", "WATCH_SECONDS", "ConfirmationWatch", "FinalAckArrivals"]

#: How often the store's count of copies awaiting confirmation is looked at.
WATCH_SECONDS: Final = 1.0
#: Store setting prefix of the deadline until which a router keeps an outgoing
#: queue's session for the relayed messages awaiting FinalAcks:
#: ``relayed-until:<hash of the queue's name>``, the deadline as text.
RELAYED_UNTIL: Final = "relayed-until:"
#: A deadline is written again only when it moves later by more than this.
RELAYED_UNTIL_STEP: Final = 1.0


class FinalAckArrivals:
    """Settles the copies that arriving FinalAcks are about (see the module docstring).

    Args:
        parts: the core's confirmations, the store (read, to find which queues
            a settlement touched), the signals (to wake their readers), the
            wall clock.
        by_stamp: the outgoing queues by sequence timestamp (the live mapping):
            a FinalAck repeats its message's TxSequenceID, whose timestamp names
            the outgoing queue, and so the copy, it is about.
    """

    def __init__(self, parts: PeeringParts, by_stamp: Mapping[int, OutgoingQueue]) -> None:
        self._parts = parts
        self._by_stamp = by_stamp
        #: FinalAcks that settled a copy since the start.
        self.settled = 0
        #: FinalAcks refused since the start: they came from another queue
        #: manager than the one whose OrderAck covered the copy they name.
        self.refused = 0

    def arrived(
        self, connection: PeerConnection, ack: wire.FinalAck, recoverable: int | None
    ) -> None:
        """A FinalAck about one of our messages arrived on ``connection``."""
        # The outgoing queue it went through (unknown if that queue is gone, or
        # its sequence was renewed since); else a session we opened knows the
        # destination's address, one it opened does not.
        queue = self._by_stamp.get(ack.sequence_id.timestamp)
        endpoint = connection.peer if connection.role is Role.INITIATOR else ""
        parts = self._parts
        unit = parts.confirmations.settle(
            ack.acked_message_id,
            ack.message_class,
            wall=parts.wall(),
            destination=None if queue is None else queue.name,
            endpoint=endpoint,
            sender=ack.source_qm,
        )
        if unit is None and parts.confirmations.refused(
            ack.acked_message_id,
            ack.source_qm,
            destination=None if queue is None else queue.name,
        ):
            self.refused += 1
            connection.log.warning(
                "final_ack_refused",
                message_id=wire.format_message_id(ack.acked_source_qm, ack.acked_message_id),
                from_qm=str(ack.source_qm),
                reason="an OrderAck of another queue manager covered the message's copy",
            )
        if unit is None:
            # Settled already (a repeat, or its deadline came first). It still
            # counts only after what arrived before it is stored.
            connection.persister.store((), lambda _: connection.acknowledge(recoverable))
            return
        # If the deadline settles the copy first, this does nothing.
        op = storage.Attempt(storage.Together(unit.ops), storage.Together(()))

        def persisted(results: list[storage.Result]) -> None:
            self.settled += 1
            connection.acknowledge(recoverable)
            # The copy may have gone to a system queue: let its readers look.
            parts.signals.notify(touched_queues(parts.store, unit.ops))

        connection.persister.store((op,), persisted)


class ConfirmationWatch:
    """Marks the outgoing queues whose copies await FinalAcks (see the module docstring).

    Args:
        store: the store, for its count of copies by destination.
        queues: every outgoing queue, by queue id (the live mapping).
        log: where a count the store cannot read is reported.
        wall: unix time now, for the deadlines of relayed messages.
    """

    def __init__(
        self,
        store: storage.Store,
        queues: Mapping[int, OutgoingQueue],
        log: structlog.typing.FilteringBoundLogger,
        *,
        wall: Callable[[], float],
        committer: Committer | None = None,
    ) -> None:
        self._store = store
        self._queues = queues
        self._log = log
        self._wall = wall
        self._committer = committer
        self._marked: set[OutgoingQueue] = set()
        self._failing = False
        #: The latest deadline of the relayed messages awaiting FinalAcks through
        #: each outgoing queue, by queue id (one entry per outgoing queue at most,
        #: dropped when its deadline passes).
        self._relayed: dict[int, float] = {}
        #: By setting key (one per outgoing queue name): the deadline a persisted
        #: write keeps in the store, and the highest asked to be written; and the
        #: key of each queue in ``_relayed``. Each entry goes when its deadline
        #: passes.
        self._written: dict[str, float] = {}
        self._highest: dict[str, float] = {}
        self._keys: dict[int, str] = {}
        #: Settings of deadlines passed, to clear (by key).
        self._to_clear: set[str] = set()

    def relayed(self, queue_id: int, until: float, name: str) -> None:
        """A relayed message in the outgoing queue ``queue_id`` (named ``name``)
        awaits its FinalAck until ``until`` (unix seconds), and the write that
        stored it is persisted, with the setting :meth:`relayed_setting` gave:
        the queue keeps a session until then (from the next look)."""
        if until > self._relayed.get(queue_id, 0.0):
            self._relayed[queue_id] = until
        key = _relayed_key(name)
        self._keys[queue_id] = key
        self._written[key] = max(self._written.get(key, 0.0), until)

    def relayed_setting(self, name: str, until: float) -> storage.Operation | None:
        """The operation that keeps, with a relayed message bound for the outgoing
        queue ``name``, the latest deadline until which a FinalAck is awaited
        through it, for after a restart; None when a persisted write holds one
        late enough already. (Until one is persisted, every message asks: a
        write that failed leaves the next to write it.)"""
        key = _relayed_key(name)
        highest = max(until, self._highest.get(key, 0.0))
        self._highest[key] = highest
        if highest <= self._written.get(key, 0.0) + RELAYED_UNTIL_STEP:
            return None
        return storage.SetSetting(key, repr(highest))

    def restore(self, queues: Iterable[OutgoingQueue]) -> None:
        """At start, with the outgoing queues loaded: take back the deadlines the
        store kept for them (:meth:`relayed_setting`); those passed, or of queues
        no longer there, are cleared by the next look."""
        wall = self._wall()
        kept = dict(self._store.settings(RELAYED_UNTIL))
        for queue in queues:
            key = _relayed_key(queue.name)
            text = kept.get(key)
            try:
                until = float(text) if text is not None else 0.0
            except ValueError:
                until = 0.0
            if until > wall:
                self.relayed(queue.queue_id, until, queue.name)
                self._highest[key] = until
                del kept[key]
        self._to_clear.update(kept)

    def _passed(self, key: str, wall: float) -> bool:
        """Whether the deadline of the setting ``key`` has passed: none written
        or asked for (a write in flight may carry one) is later than ``wall``."""
        return self._written.get(key, 0.0) <= wall and self._highest.get(key, 0.0) <= wall

    def look(self) -> None:
        """Mark the queues whose copies (or relayed messages) await FinalAcks now
        (and wake their links), and unmark the others."""
        marked: set[OutgoingQueue] = set()
        wall = self._wall()
        relayed = self._relayed
        for queue_id, until in list(relayed.items()):
            queue = self._queues.get(queue_id)
            if until <= wall:
                del relayed[queue_id]
                key = self._keys.pop(queue_id, None)
                if key is not None and self._passed(key, wall):
                    self._to_clear.add(key)
            elif queue is not None:
                marked.add(queue)
        for table in (self._written, self._highest):
            for key in [key for key, until in table.items() if until <= wall]:
                del table[key]
                if self._passed(key, wall):  # a write asked for later may have failed
                    self._to_clear.add(key)
        store = self._store
        for name in store.awaited_confirmations():
            record = store.get_queue(name)
            queue = None if record is None else self._queues.get(record.queue_id)
            if queue is not None:
                marked.add(queue)
        for queue in self._marked - marked:
            queue.awaiting_confirmation = False
        for queue in marked - self._marked:
            queue.awaiting_confirmation = True
            queue.wake()
        self._marked = marked

    async def run(self) -> None:
        """Look every :data:`WATCH_SECONDS` until cancelled. A store that cannot
        say (a corrupt count) is logged once and leaves the marks as they were;
        the next looks try again."""
        while True:
            try:
                self.look()
            except storage.StoreError as exc:
                if not self._failing:
                    self._log.error("confirmation_watch_failed", error=str(exc))
                self._failing = True
            else:
                self._failing = False
            try:
                await self._clear()
            except ShuttingDown:
                return
            await trio.sleep(WATCH_SECONDS)

    async def _clear(self) -> None:
        """Clear the settings of the relayed deadlines that passed (tried again at
        the next look if the write fails). Only a key whose deadline has passed
        *now* goes in: a later one asked for since is written after this clear.

        Raises:
            ShuttingDown: the committer has stopped.
        """
        if not self._to_clear or self._committer is None:
            return
        wall = self._wall()
        keys = sorted(key for key in self._to_clear if self._passed(key, wall))
        self._to_clear.clear()
        if not keys:
            return
        unit = storage.Unit(tuple(storage.ClearSetting(key) for key in keys))
        try:
            outcome = await self._committer.submit(unit)
        except storage.StoreError as exc:
            error: Exception | None = exc
        else:
            error = outcome.error
        if error is not None:
            self._to_clear.update(keys)
            self._log.warning("relayed_deadlines_not_cleared", error=str(error))


def _relayed_key(name: str) -> str:
    """The setting of an outgoing queue's relayed deadline: its name hashed (a
    name may be longer than a key may be)."""
    return RELAYED_UNTIL + hashlib.sha256(name.encode()).hexdigest()[:32]
