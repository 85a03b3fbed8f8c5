"""The sending side of the peering adapter: outgoing queues, their links, forgets and timers.

Theory of operation
-------------------
:class:`OutgoingQueues` holds one :class:`~.outgoing_queue.OutgoingQueue`
per outgoing queue in the store (found at start, and added when a commit
first appends to one: :meth:`OutgoingQueues.queues_changed`), and one
:class:`~.link.Link` per next hop: the destination itself, or the router
that ``[routes]`` names. It carries out what acknowledges our transmissions:

* a SessionAck of a transmission (:meth:`OutgoingQueues.session_acked`),
  which ends a non-transactional entry, and an OrderAck for one of our
  sequences (:meth:`OutgoingQueues.order_ack_arrived`), which ends the
  transactional entries it covers: the sequence machine says which entries
  are done;
* the **forgetter** writes the done entries' ``storage.ForgetOutgoing`` in
  the background, with their delivery reports, and hands the store's
  sequence state back to the machine (which may have rolled). A purge
  reports its removals before any later forget: forgets of a queue being
  purged wait for it;
* the **timers** task runs the sequences' resend timers (Transactional Ack
  Wait).

It knows nothing of arrivals: the incoming side passes it the OrderAcks for
us, and the hub routes session acknowledgments here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import trio

import storage
import wire
from qmgr.core.errors import InvalidName, QueueNotFound
from qmgr.core.names import parse_format_name
from qmgr.core.outgoing import RemoteDestination
from wire import client as cf

from ..backlog import Backlog
from ..signals import touched_queues
from .connection import ConnectionContext
from .link import Link
from .outgoing_queue import OutgoingQueue
from .parts import PeeringParts

__all__ = ["OutgoingQueues"]


class OutgoingQueues:
    """Every outgoing queue, the links to their next hops, and what acknowledges them.

    Args:
        parts: the daemon's parts.
        context: what the links' connections need.
    """

    def __init__(self, parts: PeeringParts, context: ConnectionContext) -> None:
        self.parts = parts
        self.context = context
        #: Outgoing queues by queue id.
        self.queues: dict[int, OutgoingQueue] = {}
        #: Outgoing queues by their sequence timestamp (which names them in an OrderAck).
        self.by_stamp: dict[int, OutgoingQueue] = {}
        #: The link to each next hop.
        self.links: dict[tuple[str, int], Link] = {}
        self._timer_wake = trio.Event()
        #: Queues with acknowledged entries to forget.
        self._forgetting: Backlog[OutgoingQueue] = Backlog()
        self._nursery: trio.Nursery | None = None
        for record in parts.store.list_queues():
            if record.kind is storage.QueueKind.OUTGOING:
                self._add(record, at_start=True)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the links, the forgetter and the timers until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for link in self.links.values():
                nursery.start_soon(link.run)
            nursery.start_soon(self._forgetter)
            nursery.start_soon(self._timers)
            task_status.started()

    # ------------------------------------------------------------------ queues

    def _add(self, record: storage.QueueRecord, *, at_start: bool = False) -> OutgoingQueue | None:
        parts = self.parts
        try:
            destination = RemoteDestination.from_outgoing_name(record.name)
        except ValueError:
            parts.log.exception("outgoing_queue_unreadable", queue=record.name)
            return None
        state = parts.store.outgoing_state(record.queue_id)
        if state is None:
            parts.log.error("outgoing_state_missing", queue=record.name)
            return None
        hop = parts.config.routes.get(destination.endpoint, destination.endpoint)
        queue = OutgoingQueue(parts, self, record, destination, state, hop, at_start=at_start)
        self.queues[record.queue_id] = queue
        self.by_stamp[state.sequence_timestamp] = queue
        link = self.links.get(hop)
        if link is None:
            link = self.links[hop] = Link(self.context, hop, parts.wall)
            if self._nursery is not None:
                self._nursery.start_soon(link.run)
        link.queues.append(queue)
        queue.link = link
        return queue

    def queues_changed(self, queue_ids: Iterable[int]) -> None:
        """Messages were appended to (or removed from) these queues (a commit)."""
        for queue_id in queue_ids:
            queue = self.queues.get(queue_id)
            if queue is None:
                record = self.parts.store.get_queue_by_id(queue_id)
                if record is None or record.kind is not storage.QueueKind.OUTGOING:
                    continue
                queue = self._add(record)
                if queue is None:
                    continue
            queue.fill()
            queue.wake()

    def _drop(self, queue: OutgoingQueue) -> None:
        self.queues.pop(queue.queue_id, None)
        self.by_stamp.pop(queue.sequence_timestamp, None)
        link = self.links.get(queue.hop)
        if link is not None and queue in link.queues:
            link.queues.remove(queue)

    # ------------------------------------------------------------------ acknowledgments

    def session_acked(self, queue: OutgoingQueue, lookup_id: int) -> None:
        """The peer acknowledged a transmission of ``queue`` at session level (a
        recoverable one once it stored it)."""
        ids = queue.machine.session_acked(lookup_id, persisted=True)
        if ids:
            self.forget(queue, ids)

    def order_ack_arrived(self, ack: wire.OrderAck) -> None:
        """An OrderAck for one of our sequences arrived."""
        queue = self.by_stamp.get(ack.sequence_id.timestamp)
        if queue is None:
            self.parts.log.debug("order_ack_unknown_sequence", sequence=str(ack.sequence_id))
            return
        ids = queue.machine.order_ack(ack.sequence_id, ack.sequence_number, trio.current_time())
        queue.last_order_ack = self.parts.wall()
        self.wake_timers()  # progress restarts the resend timer
        if ids:
            self.forget(queue, ids)

    # ------------------------------------------------------------------ forgetting

    def forget(self, queue: OutgoingQueue, lookup_ids: Iterable[int]) -> None:
        """Remove acknowledged entries from an outgoing queue (written in the background)."""
        queue.to_forget.extend(lookup_ids)
        if queue in self._forgetting:
            self._forgetting.add()
        else:
            self._forgetting.add(queue)

    async def _forgetter(self) -> None:
        while True:
            queues = await self._forgetting.take()
            async with trio.open_nursery() as nursery:
                for queue in queues:
                    if queue.purging or not queue.to_forget:
                        # A purge reports its removals before any later forget
                        # (the sequence machine needs that order); it calls
                        # forget() again when it is done.
                        continue
                    ids = tuple(queue.to_forget)
                    queue.to_forget.clear()
                    queue.machine.forget_started(ids)
                    nursery.start_soon(self._forget_one, queue, ids)

    async def _forget_one(self, queue: OutgoingQueue, ids: tuple[int, ...]) -> None:
        parts = self.parts
        forget = storage.ForgetOutgoing(queue.queue_id, ids)
        unit = storage.Unit((forget, *queue.delivery_reports(ids)))
        try:
            outcome = await parts.committer.submit(unit)
        except Exception as exc:
            parts.log.exception("outgoing_forget_failed", queue=queue.name, error=str(exc))
            queue.machine.forget_failed(ids)
            self.forget(queue, ids)
            await trio.sleep(1.0)
            return
        result = outcome.results[0]
        if isinstance(result, storage.Forgotten):
            queue.forgotten(ids, result.state)
            if len(unit.ops) > 1:
                parts.signals.notify(touched_queues(parts.store, unit.ops[1:]))
        elif isinstance(result, storage.Failed) and isinstance(result.error, storage.QueueMissing):
            self._drop(queue)
        else:
            parts.log.error("outgoing_forget_failed", queue=queue.name, error=str(outcome.error))
            queue.machine.forget_failed(ids)

    # ------------------------------------------------------------------ timers

    def wake_timers(self) -> None:
        """An outgoing sequence armed a timer."""
        self._timer_wake.set()

    async def _timers(self) -> None:
        while True:
            deadlines = [
                deadline
                for queue in self.queues.values()
                if (deadline := queue.machine.next_deadline()) is not None
            ]
            self._timer_wake = trio.Event()
            with trio.move_on_at(min(deadlines, default=math.inf)):
                await self._timer_wake.wait()
            now = trio.current_time()
            for queue in list(self.queues.values()):
                deadline = queue.machine.next_deadline()
                if deadline is not None and deadline <= now:
                    queue.machine.timer(now)
                    queue.wake()

    # ------------------------------------------------------------------ control and status

    def infos(self) -> tuple[cf.OutgoingInfo, ...]:
        """Every outgoing queue, by destination."""
        queues = sorted(self.queues.values(), key=lambda queue: queue.name)
        return tuple(queue.info() for queue in queues)

    def next_hops(self) -> dict[int, str]:
        """The next hop (``host:port``) of each outgoing queue, by queue id."""
        return {queue.queue_id: f"{queue.hop[0]}:{queue.hop[1]}" for queue in self.queues.values()}

    def find(self, destination: str) -> OutgoingQueue:
        """The outgoing queue of a destination format name (or its listed name).

        Raises:
            InvalidName, QueueNotFound
        """
        text = destination.strip()
        for queue in self.queues.values():
            if text.lower() in (queue.name, queue.destination.display_name.lower()):
                return queue
        parsed = parse_format_name(text, self.parts.identity)
        if parsed.is_multiple or parsed.elements[0].is_local:
            msg = f"{destination!r} is not a queue on another queue manager"
            raise InvalidName(msg)
        name = RemoteDestination.from_address(parsed.elements[0]).outgoing_name
        for queue in self.queues.values():
            if queue.name == name:
                return queue
        msg = f"there is no outgoing queue for {destination!r}"
        raise QueueNotFound(msg)
