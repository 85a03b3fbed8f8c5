"""The link to one next hop: connect when there is work, back off when it fails.

Theory of operation
-------------------
Every outgoing queue whose messages go through the same next hop (the
destination queue manager itself, or the router ``[routes]`` names) shares
one :class:`Link`, and so one TCP session. The link's task sleeps while
none of its queues has work; then it connects (``peers.connect_timeout``),
runs a :class:`~qmgr.server.peering.connection.PeerConnection` as initiator
(over mutual TLS when it is on: ``tls.peer_handshake``) until the
connection ends, and tells every queue that what it sent and saw
unacknowledged must be sent again. A failed attempt, or a session that
never opened, waits ``peers.retry_initial`` seconds, doubling up to
``peers.retry_max``; a session that opened resets the delay.

A link also says how reachable its hop is (:meth:`Link.hop_state`): since
when every attempt has failed, and whether a session is open; a route with
several next hops moves its queues between links on that (see
:mod:`qmgr.core.routes`). Queues that use a later hop while this one is down
are its *standby* queues: their work keeps the link trying, so that they come
back as soon as it answers.

A link's queues are a :class:`LinkQueues`: the connection asks them for
packets in turn, and only those that may have something to send are asked.
A queue is marked so by its wake-up (new entries, a resend timer, a forget
that settled, a resume, a route change) and when a session opens; one that
has nothing is passed over until its next wake-up. A send through a hop
with thousands of idle queues so looks at one queue, not at all of them.

A hop may turn out to be this queue manager itself: a hairpin NAT, a port
map or a DNS name of this host that is not in ``server.aliases``. The link
finds out when the peer shows this queue manager's own certificate (mutual
TLS) or announces its GUID; it logs ``peer_session_reaches_itself`` and from
then on, while its queues have work, carries them over a session with itself in
the process: a socket pair, with the acceptor's side run beside the
initiator's. The messages are delivered here under the same exactly-once
rules as over any session, with no network in between.
"""

from __future__ import annotations

import socket
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Final

import trio

from qmgr.core.routes import HopState, endpoint_text
from qmgr.protocol import Role

from ..tls import TlsFailed
from .close_reasons import PEER_CLOSED, unopened
from .connection import ConnectionContext, PacketToSend, PeerConnection
from .dial import CannotConnect, open_hop, secure, shows_own_certificate
from .outgoing_queue import OutgoingQueue

__all__ = ["Link", "LinkQueues"]

#: Failures after which the delay stops doubling (it reached ``peers.retry_max``
#: long before: 2**64 times the smallest ``peers.retry_initial``).
_MAX_DOUBLINGS: Final = 64


class LinkQueues:
    """The outgoing queues one link carries, and which of them may have a packet.

    Iterating, ``len`` and ``in`` see every queue it carries. :meth:`next_packet`
    asks the marked queues in turn (one that gives a packet goes to the back);
    a queue with nothing to send is unmarked until :meth:`mark` or
    :meth:`all_may_send` marks it again.
    """

    def __init__(self) -> None:
        self._queues: dict[OutgoingQueue, None] = {}
        self._marked: OrderedDict[OutgoingQueue, None] = OrderedDict()

    def __iter__(self) -> Iterator[OutgoingQueue]:
        return iter(tuple(self._queues))

    def __len__(self) -> int:
        return len(self._queues)

    def __contains__(self, queue: object) -> bool:
        return queue in self._queues

    def add(self, queue: OutgoingQueue) -> None:
        """Carry ``queue`` from now on (marked)."""
        self._queues[queue] = None
        self._marked[queue] = None

    def remove(self, queue: OutgoingQueue) -> None:
        """Stop carrying ``queue`` (no error if it is not carried)."""
        self._queues.pop(queue, None)
        self._marked.pop(queue, None)

    def mark(self, queue: OutgoingQueue) -> None:
        """``queue`` may have something to send (ignored if it is not carried)."""
        if queue in self._queues:
            self._marked[queue] = None

    def all_may_send(self) -> None:
        """Every queue may have something to send (a session opened)."""
        self._marked = OrderedDict.fromkeys(self._queues)

    def next_packet(self, now: float) -> PacketToSend | None:
        """The next packet of a marked queue, in turn, or None if none has one."""
        marked = self._marked
        # Each marked queue is asked once at most: one marked again while it is
        # asked (its packet could not be built, say) waits for the next call.
        for _ in range(len(marked)):
            if not marked:
                break
            queue, _ = marked.popitem(last=False)
            built = queue.next_packet(now)
            if built is not None:
                marked[queue] = None
                return built
        return None


class Link:
    """Delivery to one next hop ``(host, port)``.

    Args:
        context: what its connections need (and the ``peers`` settings: connect
            timeout, retry delays).
        hop: the next hop.
        wall: unix time (the next attempt's, for status).
        changed: called when the hop's reachability changes (:meth:`hop_state`).
    """

    def __init__(
        self,
        context: ConnectionContext,
        hop: tuple[str, int],
        wall: Callable[[], float],
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.context = context
        self.wall = wall
        self.hop = hop
        self._changed = changed
        #: The queues it carries.
        self.queues = LinkQueues()
        #: Queues that prefer this hop but use a later one while it is down.
        self.standby: set[OutgoingQueue] = set()
        #: ``trio.current_time()`` of the first failed attempt since the last
        #: session that opened (None: it answered last, or was not tried).
        self.down_since: float | None = None
        self.connection: PeerConnection | None = None
        #: The GUID the hop's queue manager gave in the last session that opened
        #: (None: none has): whose OrderAcks the queues of this link take.
        self.peer_qm: uuid.UUID | None = None
        self.state = "idle"
        self.next_attempt: float | None = None
        self.failures = 0
        self.last_error = ""
        self._wake = trio.Event()
        #: The hop turned out to be this queue manager (a hairpin NAT, a port map or
        #: another name of this host): its queues go through an in-process session
        #: until they have nothing left to send.
        self.itself = False
        self._other_end: PeerConnection | None = None
        self.name = endpoint_text(*hop)
        self.log = context.parts.log.bind(peer=self.name)
        #: Cancelled when the link is removed (no queue uses its hop any more).
        self.cancel_scope = trio.CancelScope()

    def wake(self, queue: OutgoingQueue | None = None) -> None:
        """``queue`` (None: any of its queues) may have work."""
        if queue is None:
            self.queues.all_may_send()
        else:
            self.queues.mark(queue)
        self._wake.set()
        if self.connection is not None:
            self.connection.wake()

    def has_work(self) -> bool:
        """Whether any of its queues, or of its standby queues, needs the connection."""
        return any(queue.has_work() for queue in self.queues) or any(
            queue.has_work() for queue in self.standby
        )

    def hop_state(self) -> HopState:
        """How reachable the hop is."""
        connection = self.connection
        up = connection is not None and connection.opened.is_set()
        return HopState(down_since=None if up else self.down_since, up=up)

    def hop_qm(self) -> uuid.UUID | None:
        """The GUID of the queue manager at this hop: the open session's, else the
        last one's (None: no session has opened yet)."""
        connection = self.connection
        if connection is not None and connection.remote_qm is not None:
            return connection.remote_qm
        return self.peer_qm

    def describe(self) -> tuple[str, float | None, str]:
        """State, the next attempt's unix time (while waiting) and the last error."""
        connection = self.connection
        if connection is not None:
            state = "connected" if connection.opened.is_set() else "connecting"
            return state, None, self.last_error
        return self.state, self.next_attempt, self.last_error

    def unused(self) -> bool:
        """Whether nothing needs the link: no queue, no standby queue, no connection,
        and not connecting."""
        return (
            not self.queues
            and not self.standby
            and self.connection is None
            and self.state in ("idle", "waiting")
        )

    async def run(self) -> None:
        """Deliver until cancelled (or :attr:`cancel_scope` is)."""
        try:
            with self.cancel_scope:
                await self._run()
        finally:
            self.context.dialing.leave(self)

    async def _run(self) -> None:
        while True:
            if not self.has_work():
                # Nothing to send: what was learnt of the hop goes stale. The next
                # traffic tries the network afresh (a hop found to be this queue
                # manager, or long unreachable, is found out again).
                self.itself = False
                if self.down_since is not None:
                    self.down_since = None
                    self._changed()
            while not self.has_work():
                self.state = "idle"
                self._wake = trio.Event()
                await self._wake.wait()
            self.state = "connecting"
            self.next_attempt = None
            connection = await (self._itself() if self.itself else self._connect())
            if connection is None:
                continue
            self.connection = connection
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._watch_opening, connection)
                    if self.itself:
                        nursery.start_soon(self._answer_itself)
                    await connection.run()
                    nursery.cancel_scope.cancel()
            finally:
                if connection.remote_qm is not None:
                    self.peer_qm = connection.remote_qm
                self.connection = None
                self._other_end = None
                for queue in self.queues:
                    queue.machine.connection_lost()
                self._changed()
            if connection.reached_itself:
                self._found_itself(connection.close_reason)
                continue
            if (
                connection.opened.is_set()
                and connection.session.unacked
                and not connection.acknowledged.is_set()
            ):
                # It opened a session and then took nothing it was sent: as good as
                # unreachable (a route fails over from it like from a refused one).
                await self._back_off(connection.close_reason or "the session took nothing")
                continue
            if connection.session.silent_since is not None and connection.acknowledged.is_set():
                # It worked, then stopped answering (it stopped reading, or the
                # network drops everything): retried at once, as after a session
                # that worked, but unreachable from now on until a session opens
                # and is acknowledged again, so that a route fails over from it
                # after peers.route_failover_after (a stopped process's kernel
                # still takes connections: their handshakes would only time out).
                self.failures = 0
                await self._back_off(connection.close_reason)
                continue
            if connection.opened.is_set():
                # The session worked (its end is logged as peer_session_closed):
                # reconnect after the shortest delay if there is still work.
                self.failures = 0
                # An idle close, ours or the peer's, is a normal end; anything else
                # is why it broke, shown until a session works again.
                normal = connection.session.closed_idle or connection.close_reason == PEER_CLOSED
                self.last_error = "" if normal else connection.close_reason
                if not self.has_work():
                    continue
                await self._back_off(self.last_error, failed=False)
                continue
            await self._back_off(connection.close_reason or "the session ended")

    async def _connect(self) -> PeerConnection | None:
        """A connection to the hop over TCP (and TLS), or None after a failure."""
        config = self.context.parts.config
        host, port = self.hop
        context = self.context
        limit = config.peer_max_connections
        now = trio.current_time()
        opened, every = context.opened_here(), config.peer_retry_initial
        if not context.dialing.may_open(self, opened=opened, limit=limit, now=now, every=every):
            # Not the hop's fault: it waits its turn for a session that ends,
            # looking every peers.retry_initial (no failure counted, no back-off).
            reason = (
                f"this queue manager has {limit} sessions open to peers already "
                "(peers.max_connections): waiting for one to end"
            )
            if self.last_error != reason:
                self.log.warning(
                    "peer_sessions_limit", limit=limit, waiting=len(context.dialing.waiting)
                )
            self.last_error = reason
            self.state = "waiting"
            self.next_attempt = self.wall() + config.peer_retry_initial
            await trio.sleep(config.peer_retry_initial)
            self.next_attempt = None
            return None
        context.dialing.count += 1
        try:
            secured = await self._open(host, port)
        finally:
            context.dialing.count -= 1
        if isinstance(secured, str):
            await self._back_off(secured)
            return None
        session_stream, identity = secured
        if shows_own_certificate(session_stream, self.context):
            # Only this queue manager holds its key: the hop is this queue manager.
            with trio.CancelScope(shield=True):
                await session_stream.aclose()
            self._found_itself("the peer showed this queue manager's own certificate")
            return None
        return PeerConnection(
            self.context,
            session_stream,
            role=Role.INITIATOR,
            peer=self.name,
            queues=self.queues,
            identity=identity,
        )

    async def _open(self, host: str, port: int) -> tuple[trio.abc.Stream, str | None] | str:
        """The hop's stream, through TLS where peers use it, with the identity its
        certificate shows; or why it could not be had."""
        config = self.context.parts.config
        try:
            stream = await open_hop(host, port, within=config.peer_connect_timeout)
        except CannotConnect as exc:
            return f"cannot connect: {exc}"
        try:
            return await secure(stream, self.context, server_side=False)
        except TlsFailed as exc:
            with trio.CancelScope(shield=True):
                await stream.aclose()
            return unopened(str(exc), closed=exc.closed)

    async def _itself(self) -> PeerConnection:
        """A session with this queue manager, in the process: its initiator (the
        acceptor runs beside it, :meth:`_answer_itself`)."""
        left, right = socket.socketpair()
        ours = trio.SocketStream(trio.socket.from_stdlib_socket(left))
        theirs = trio.SocketStream(trio.socket.from_stdlib_socket(right))
        await trio.lowlevel.checkpoint()
        self._other_end = PeerConnection(
            self.context,
            theirs,
            role=Role.ACCEPTOR,
            peer=f"{self.name} (this queue manager)",
            # Its rights are this queue manager's as a peer (``peer:<own identity>``
            # under mutual TLS), as if the session through the network had been taken.
            identity=self.context.tls.own_identity,
            itself=True,
        )
        return PeerConnection(
            self.context, ours, role=Role.INITIATOR, peer=self.name, queues=self.queues, itself=True
        )

    async def _answer_itself(self) -> None:
        assert self._other_end is not None
        await self._other_end.run()

    def _found_itself(self, reason: str) -> None:
        """The hop is this queue manager: from now on its queues are delivered here."""
        self.itself = True
        self.failures = 0
        self.last_error = ""
        self.down_since = None
        self.log.warning(
            "peer_session_reaches_itself",
            reason=reason,
            advice=f"list {self.name} in server.aliases, so that sends to it are local",
        )

    async def _watch_opening(self, connection: PeerConnection) -> None:
        await connection.opened.wait()
        self._changed()  # it answers: an earlier hop than a queue's may take it back
        await connection.acknowledged.wait()
        # It takes what it is sent: whatever failed before is over.
        self.last_error = ""
        if self.down_since is not None:
            self.down_since = None
            self._changed()

    async def _back_off(self, reason: str, *, failed: bool = True) -> None:
        """Wait before the next attempt; a failure (``failed``) marks the hop
        down from now, unless it is already."""
        config = self.context.parts.config
        if failed and self.down_since is None:
            self.down_since = trio.current_time()
            self._changed()
        # The exponent stops growing long before the maximum is passed: a hop
        # down for days fails thousands of times, and 2**1024 is no float.
        doubling = 2.0 ** min(self.failures, _MAX_DOUBLINGS)
        delay = min(config.peer_retry_max, config.peer_retry_initial * doubling)
        self.failures += 1
        self.last_error = reason
        self.state = "waiting"
        self.next_attempt = self.wall() + delay
        if failed:
            self.log.warning("peer_connect_failed", reason=reason, retry_in=round(delay, 3))
        await trio.sleep(delay)
        self.next_attempt = None
