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
* the **forgetter** (:mod:`.forgets`) writes the done entries'
  ``storage.ForgetOutgoing`` in the background, with their delivery
  reports, and hands the store's sequence state back to the machine (which
  may have rolled);
* the **timers** task runs the sequences' resend timers (Transactional Ack
  Wait): a queue whose sequence may have armed its timer, or moved it
  earlier, says so (:meth:`OutgoingQueues.wake_timers`), and the task keeps
  one deadline per queue in a heap, looking again at a queue's sequence
  only when its deadline passes;
* the **cleanup** task removes a queue that has been empty, with nothing in
  flight, for ``peers.outgoing_cleanup_after`` seconds (MSMQ's
  CleanupInterval): looking every quarter of that, it notes since when each
  queue is so and removes those quiet long enough in one write
  (``storage.RemoveEmptyOutgoing``, which keeps a queue the batch appends
  to, or a pause). The next message to that destination creates the queue
  again, and it takes over the old one's sequence timestamp with the next
  ordinal (``storage.ops.retired``), so that the receiver sees the same
  stream go on: every entry of the old sequence was acknowledged, so the
  receiver has nothing more to expect of it. A link left with no queue, no
  session, and no queue's route listing its hop is stopped and forgotten too;
* the **failover** task keeps each queue whose route lists several next hops
  on the one :func:`qmgr.core.routes.choose_hop` picks from its links'
  reachability. A move takes the queue off the old link (what it sent there
  unacknowledged goes again through the new one: exactly-once holds, the
  sequence belongs to this queue manager and the destination, and a copy
  that arrives twice is a duplicate the destination discards) and leaves it
  on the earlier hops' links as standby.

It knows nothing of arrivals: the incoming side passes it the OrderAcks for
us, and the hub routes session acknowledgments here.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import uuid
from collections.abc import Iterable
from typing import Final

import trio

import storage
import wire
from qmgr.core.errors import InvalidName, QueueNotFound
from qmgr.core.names import DEFAULT_PEER_PORT, parse_format_name, parse_one_queue
from qmgr.core.outgoing import RemoteDestination
from qmgr.core.routes import (
    RouteError,
    choose_hop,
    endpoint_text,
    failover_deadline,
    split_host_port,
)
from wire import client as cf

from .connection import ConnectionContext
from .forgets import Forgetter
from .link import Link
from .outgoing_queue import OutgoingQueue, read_sent_marks
from .parts import PeeringParts

__all__ = ["CLEANUP_LOOKS", "OutgoingQueues"]

#: The cleanup task looks this many times per ``peers.outgoing_cleanup_after``:
#: a queue is removed between that long and a quarter more after it went quiet.
CLEANUP_LOOKS: Final = 4


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
        #: Resend deadlines, soonest first: ``(deadline, order, queue)``; an entry
        #: whose order is not the queue's in ``_armed`` was replaced by an earlier one.
        self._deadlines: list[tuple[float, int, OutgoingQueue]] = []
        self._armed: dict[OutgoingQueue, tuple[float, int]] = {}
        self._arming = itertools.count()
        self._failover_wake = trio.Event()
        #: Queues whose route lists several next hops.
        self._alternating: set[OutgoingQueue] = set()
        #: Writes the removal of the entries that are done.
        self.forgetter = Forgetter(parts, self.holds, self._drop)
        self._nursery: trio.Nursery | None = None
        marks = read_sent_marks(parts.store)
        #: The last run's marks were read: the first write must clear them.
        self.marks_read = marks is not None
        for record in parts.store.list_queues():
            if record.kind is storage.QueueKind.OUTGOING:
                mark = None if marks is None else marks.get(record.queue_id)
                self._add(record, at_start=True, sent_mark=mark)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the links, the forgetter and the timers until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for link in self.links.values():
                nursery.start_soon(link.run)
            await nursery.start(self.forgetter.run)
            nursery.start_soon(self._timers)
            nursery.start_soon(self._failover)
            nursery.start_soon(self._cleanup)
            task_status.started()

    # ------------------------------------------------------------------ queues

    def _add(
        self, record: storage.QueueRecord, *, at_start: bool = False, sent_mark: int | None = None
    ) -> OutgoingQueue | None:
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
        if at_start and parts.identity.is_local(*destination.endpoint):
            # An address that has become this queue manager's since (server.aliases).
            parts.log.warning(
                "outgoing_queue_names_this_queue_manager", queue=record.name, messages=record.depth
            )
        hops = parts.config.routes.hops(destination.endpoint)
        queue = OutgoingQueue(
            parts, self, record, destination, state, hops, at_start=at_start, sent_mark=sent_mark
        )
        self.queues[record.queue_id] = queue
        self.by_stamp[state.sequence_timestamp] = queue
        link = self._link(queue.hop)
        link.queues.add(queue)
        queue.link = link
        if len(hops) > 1:
            self._alternating.add(queue)
            self._wake_failover()
        return queue

    def _link(self, hop: tuple[str, int]) -> Link:
        link = self.links.get(hop)
        if link is None:
            link = self.links[hop] = Link(
                self.context, hop, self.parts.wall, changed=self._wake_failover
            )
            if self._nursery is not None:
                self._nursery.start_soon(link.run)
        return link

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

    def holds(self, queue: OutgoingQueue) -> bool:
        """Whether ``queue`` is still one of the outgoing queues."""
        return self.queues.get(queue.queue_id) is queue

    def _drop(self, queue: OutgoingQueue) -> None:
        self.queues.pop(queue.queue_id, None)
        self._armed.pop(queue, None)  # its heap entry is passed over when it comes due
        if self.by_stamp.get(queue.sequence_timestamp) is queue:
            # (A queue of its name created since took its timestamp over.)
            del self.by_stamp[queue.sequence_timestamp]
        self._alternating.discard(queue)
        link = self.links.get(queue.hop)
        if link is not None:
            link.queues.remove(queue)
        for hop in queue.hops:
            if (standby := self.links.get(hop)) is not None:
                standby.standby.discard(queue)

    # ------------------------------------------------------------------ failover

    def _wake_failover(self) -> None:
        self._failover_wake.set()

    async def _failover(self) -> None:
        after = self.parts.config.peer_route_failover_after
        while True:
            self._failover_wake = trio.Event()
            now = trio.current_time()
            deadline = math.inf
            for queue in list(self._alternating):
                states = [self._link(hop).hop_state() for hop in queue.hops]
                index = choose_hop(queue.hop_index, states, now, after)
                if index != queue.hop_index:
                    self._move(queue, index)
                    states = [self._link(hop).hop_state() for hop in queue.hops]
                due = failover_deadline(states, after)
                if due is not None and due > now:
                    deadline = min(deadline, due)
            with trio.move_on_at(deadline):
                await self._failover_wake.wait()

    def _move(self, queue: OutgoingQueue, index: int) -> None:
        """Carry ``queue`` through its next hop number ``index`` from now on."""
        old = self._link(queue.hop)
        old.queues.remove(queue)
        # What went out through the old hop and is not acknowledged goes again.
        queue.machine.connection_lost()
        self.parts.log.warning(
            "outgoing_route_changed",
            queue=queue.destination.display_name,
            from_hop=endpoint_text(*queue.hop),
            to_hop=endpoint_text(*queue.hops[index]),
            reason=(
                "an earlier next hop answers again"
                if index < queue.hop_index
                else f"{old.name} unreachable: {old.last_error or 'no session'}"
            ),
        )
        queue.hop_index = index
        new = self._link(queue.hop)
        new.queues.add(queue)
        queue.link = new
        queue.standby_links = []
        for position, hop in enumerate(queue.hops):
            link = self._link(hop)
            if position < index:
                link.standby.add(queue)
                queue.standby_links.append(link)
                link.wake(queue)  # its work keeps the earlier hop's link trying
            else:
                link.standby.discard(queue)
        new.wake(queue)

    # ------------------------------------------------------------------ acknowledgments

    def session_acked(self, queue: OutgoingQueue, lookup_id: int) -> None:
        """The peer acknowledged a transmission of ``queue`` at session level (a
        recoverable one once it stored it)."""
        ids = queue.machine.session_acked(lookup_id, persisted=True)
        if ids:
            self.forget(queue, ids)

    def order_ack_arrived(self, ack: wire.OrderAck, came_from: uuid.UUID | None) -> None:
        """An OrderAck for one of our sequences arrived on a session of ``came_from``.

        It is taken only from the queue manager at the queue's next hop (the
        destination, or the router that passed it back): the sequence's number is
        easy to guess, and another peer must not make this queue manager forget
        messages the destination never confirmed. One from elsewhere is refused
        (logged); the messages go again and are acknowledged by the hop.
        """
        queue = self.by_stamp.get(ack.sequence_id.timestamp)
        if queue is None:
            self.parts.log.debug("order_ack_unknown_sequence", sequence=str(ack.sequence_id))
            return
        hop = None if queue.link is None else queue.link.hop_qm()
        if came_from is None or came_from != hop:
            self.parts.log.warning(
                "order_ack_refused",
                queue=queue.name,
                sequence=str(ack.sequence_id),
                number=ack.sequence_number,
                from_qm=str(came_from),
                hop_qm=str(hop),
                reason="it came from a queue manager other than the queue's next hop",
            )
            return
        ids = queue.machine.order_ack(ack.sequence_id, ack.sequence_number, trio.current_time())
        if ids is None:
            self.parts.log.warning(
                "order_ack_refused",
                queue=queue.name,
                sequence=str(ack.sequence_id),
                number=ack.sequence_number,
                sent=queue.machine.sent_number,
                from_qm=str(ack.source_qm),
                reason="it acknowledges numbers that were never sent",
                advice="if this data directory was put back from a backup, "
                "stop the queue manager and run qmgr restored",
            )
            return
        queue.last_order_ack = self.parts.wall()
        self.wake_timers(queue)  # progress restarts the resend timer
        if ids:
            for lookup_id in ids:
                queue.acknowledged_by[lookup_id] = ack.source_qm
            self.forget(queue, ids)

    # ------------------------------------------------------------------ forgetting

    def forget(self, queue: OutgoingQueue, lookup_ids: Iterable[int]) -> None:
        """Remove acknowledged entries from an outgoing queue (the forgetter's)."""
        self.forgetter.forget(queue, lookup_ids)

    def give_up(self, queue: OutgoingQueue, lookup_id: int, reason: wire.MessageClass) -> None:
        """Remove an entry of ``queue`` that can never be sent (the forgetter's)."""
        self.forgetter.give_up(queue, lookup_id, reason)

    async def forget_waiting(self, queue: OutgoingQueue) -> None:
        """Write now what ``queue`` has waiting to be forgotten (the forgetter's)."""
        await self.forgetter.forget_waiting(queue)

    # ------------------------------------------------------------------ timers

    def wake_timers(self, queue: OutgoingQueue) -> None:
        """The sequence of ``queue`` may have armed its resend timer, or moved it
        earlier. (One that moved later is found when the earlier deadline passes.)"""
        deadline = queue.machine.next_deadline()
        if deadline is None:
            return
        armed = self._armed.get(queue)
        if armed is not None and armed[0] <= deadline:
            return
        order = next(self._arming)
        self._armed[queue] = (deadline, order)
        heapq.heappush(self._deadlines, (deadline, order, queue))
        if self._deadlines[0][1] == order:
            self._timer_wake.set()

    async def _timers(self) -> None:
        deadlines = self._deadlines
        while True:
            self._timer_wake = trio.Event()
            with trio.move_on_at(deadlines[0][0] if deadlines else math.inf):
                await self._timer_wake.wait()
            now = trio.current_time()
            while deadlines and deadlines[0][0] <= now:
                _, order, queue = heapq.heappop(deadlines)
                armed = self._armed.get(queue)
                if armed is None or armed[1] != order:
                    continue  # replaced by an earlier deadline
                del self._armed[queue]
                if not self.holds(queue):
                    continue  # no longer an outgoing queue
                deadline = queue.machine.next_deadline()
                if deadline is None:
                    continue
                if deadline > now:
                    self.wake_timers(queue)
                    continue
                unacknowledged = queue.machine.unacknowledged  # the timer sends them again
                queue.machine.timer(now)
                self.parts.log.info(
                    "order_ack_wait_expired",
                    queue=queue.destination.display_name,
                    resend_index=queue.machine.resend_index,
                    unacknowledged=unacknowledged,
                )
                queue.wake()

    # ------------------------------------------------------------------ cleanup

    async def _cleanup(self) -> None:
        after = self.parts.config.peer_outgoing_cleanup_after
        if after <= 0:
            return
        while True:
            await trio.sleep(after / CLEANUP_LOOKS)
            now = trio.current_time()
            quiet: list[OutgoingQueue] = []
            for queue in self.queues.values():
                if not queue.removable():
                    queue.quiet_since = None
                elif queue.quiet_since is None:
                    queue.quiet_since = now
                elif now - queue.quiet_since >= after:
                    quiet.append(queue)
            if quiet:
                await self._remove(quiet, now)
            self._remove_unused_links()

    def _remove_unused_links(self) -> None:
        """Stop and forget the links no queue uses (a queue's route keeps every hop
        it lists: their reachability chooses the hop)."""
        listed = {hop for queue in self._alternating for hop in queue.hops}
        for hop, link in list(self.links.items()):
            if hop not in listed and link.unused():
                link.cancel_scope.cancel()
                del self.links[hop]
                link.log.debug("peer_link_removed")

    async def _remove(self, queues: list[OutgoingQueue], now: float) -> None:
        """Remove these empty queues, each on its own (one write for all)."""
        parts = self.parts
        ops = tuple(storage.RemoveEmptyOutgoing(queue.queue_id) for queue in queues)
        try:
            outcome = await parts.committer.submit(storage.Unit(ops, atomic=False))
        except Exception as exc:
            parts.log.warning("outgoing_cleanup_failed", queues=len(queues), error=str(exc))
            return
        for queue, result in zip(queues, outcome.results, strict=True):
            ours = self.holds(queue)
            if isinstance(result, storage.QueueDeleted) and ours:
                self._drop(queue)
                parts.log.info(
                    "outgoing_queue_removed",
                    queue=queue.destination.display_name,
                    quiet_seconds=round(now - (queue.quiet_since or now), 1),
                )
            elif _missing(result) and ours:
                self._drop(queue)  # gone from the store already
            else:
                # Traffic came meanwhile (or a pause): it must be quiet for a
                # whole period again.
                queue.quiet_since = None

    # ------------------------------------------------------------------ control and status

    def infos(self) -> tuple[cf.OutgoingInfo, ...]:
        """Every outgoing queue, by destination."""
        queues = sorted(self.queues.values(), key=lambda queue: queue.name)
        return tuple(queue.info() for queue in queues)

    def next_hops(self) -> dict[int, str]:
        """The next hop (``host:port``) of each outgoing queue, by queue id."""
        return {queue.queue_id: endpoint_text(*queue.hop) for queue in self.queues.values()}

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
        if parsed.elements[0].distribution_list:
            msg = f"{wire.quoted(destination)} is a distribution list: name one of its targets"
            raise InvalidName(msg)
        if parsed.is_multiple or parsed.elements[0].is_local:
            msg = f"{wire.quoted(destination)} is not a queue on another queue manager"
            raise InvalidName(msg)
        name = RemoteDestination.from_address(parsed.elements[0]).outgoing_name
        for queue in self.queues.values():
            if queue.name == name:
                return queue
        msg = f"there is no outgoing queue for {wire.quoted(destination)}"
        raise QueueNotFound(msg)

    # ------------------------------------------------------------------ routing

    def routing(self, destination: str) -> cf.RoutingInfo:
        """How this queue manager routes, and (``destination`` not empty: a format
        name or ``HOST[:PORT]``) which next hop that destination takes.

        Raises:
            InvalidName: ``destination`` is neither.
        """
        config = self.parts.config
        info = cf.RoutingInfo(
            router=config.peer_router,
            failover_after=config.peer_route_failover_after,
            aliases=tuple(endpoint_text(host, port) for host, port in config.aliases),
            routes=tuple(
                cf.RouteEntry(key=route.key, hops=tuple(route.hops_text()))
                for route in config.routes
            ),
            destination="",
            local=False,
            entry="",
            hops=(),
        )
        if not destination.strip():
            return info
        endpoint, local = self._endpoint(destination)
        if local:
            return dataclasses.replace(info, destination=endpoint_text(*endpoint), local=True)
        route = config.routes.match(endpoint)
        hops = config.routes.hops(endpoint)
        queues = [q for q in self.queues.values() if q.destination.endpoint == endpoint]
        in_use = queues[0].hop if queues else hops[0]
        now, wall = trio.current_time(), self.parts.wall()
        described = []
        for hop in hops:
            link = self.links.get(hop)
            state, error, down = "unused", "", None
            if link is not None:
                state, _, error = link.describe()
                down = link.hop_state().down_since
            described.append(
                cf.HopInfo(
                    hop=endpoint_text(*hop),
                    state=state,
                    in_use=hop == in_use,
                    down_since=0.0 if down is None else wall - (now - down),
                    last_error=error,
                )
            )
        return dataclasses.replace(
            info,
            destination=endpoint_text(*endpoint),
            entry="" if route is None else route.key,
            hops=tuple(described),
        )

    def _endpoint(self, destination: str) -> tuple[tuple[str, int], bool]:
        text = destination.strip()
        identity = self.parts.identity
        if "\\" in text or "=" in text:
            element = parse_one_queue(
                destination,
                identity,
                several=" names several queues: ask about one",
                listed=" is a distribution list: ask about one of its targets",
            )
            if element.is_local:
                return ("." if element.host is None else element.host, identity.peer_port), True
            return RemoteDestination.from_address(element).endpoint, False
        try:
            host, port = split_host_port(text)
        except RouteError as exc:
            msg = f"{wire.quoted(destination)}: not a format name or HOST[:PORT] ({exc})"
            raise InvalidName(msg) from None
        endpoint = (host, DEFAULT_PEER_PORT if port is None else port)
        return endpoint, identity.is_local(host, port)


def _missing(result: storage.Result) -> bool:
    """Whether a removal failed because the queue was no longer in the store."""
    return isinstance(result, storage.Failed) and isinstance(result.error, storage.QueueMissing)
