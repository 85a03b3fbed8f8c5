"""One client connection: bytes in, requests run, replies out, under the connection's deadlines.

Theory of operation
-------------------
A session is the trio adapter of the sans-IO machine
``qmgr.protocol.client_connection.ClientConnection``, which decides what the
bytes mean: frames and their bounds, the Hello, who the client is, which
requests it may make now, when the connection must be closed, and how
replies are framed. The session only moves bytes, waits under the deadline
the machine computes, runs requests and keeps the state of their work in
its :class:`~.request_context.RequestContext` (open transactions, waiting receives,
the nursery they wait in).

It reads from its ``trio.abc.Stream``, feeds the machine and acts on each
event. A request is authorized (``Authorization.denial``, with the need its
entry in the request table declares) and run by its handler (``handlers``).
Replies gather in the machine's outbox and are written with one
``send_all`` once every frame of the current read has been handled (sooner
if they pass ``flush_bytes``), so a client that pipelines a hundred sends
and a commit costs one write each way. A handler that must wait (a commit,
a receive outside a transaction, queue administration) is awaited before
the next frame is run: a connection's requests stay in order, and a client
that outruns the disk is held back by TCP. A receive that finds its queue
empty waits in a task of its own, so the requests behind it are still
served.

Bounds. Every read waits under the machine's deadline (Hello and
authentication from the connection's arrival, a frame begun, idle); a
connection that misses it is told why (``ErrorReply`` with request id 0) and
closed. A frame larger than one read reserves its declared size in the
daemon-wide budget for frames in progress before its body is buffered; when
the budget is spent the connection is refused the frame and closed. Until a
connection is admitted, the machine refuses from its header alone a frame
other than a Hello or an Authenticate, or over ``MAX_UNADMITTED_BODY``, so
connections that have not shown who they are take nothing from that budget.
Open transactions and waiting receives are bounded per connection.

Errors. A protocol violation (malformed bytes, a request not allowed now, a
token refused) is answered by the machine and ends the connection. A request
that fails gets its error and the session goes on; if the request belonged
to a transaction, the transaction is doomed (it can only abort), because
the client may already have pipelined its commit. An unexpected error in a
handler is logged and answered ``INTERNAL``. When the connection ends for
any reason, every transaction it opened is aborted.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Final

import structlog
import trio

from qmgr.core.errors import InternalError, LimitExceeded, QueueManagerError, ShuttingDown
from qmgr.protocol import client_connection as cc
from qmgr.protocol import client_events as ce
from wire import client as cf

from .error_codes import error_frame
from .handlers import REQUESTS
from .request_context import RequestContext
from .services import Services

__all__ = ["FAREWELL_TIMEOUT", "RECEIVE_CHUNK", "ClientSession"]

#: Bytes asked of the stream per read; frames larger than this reserve memory first.
RECEIVE_CHUNK: Final = cc.LARGE_FRAME
#: A reply frame larger than this is a large one (a whole list; see ``ClientSession._reply``).
_LARGE_REPLY: Final = cf.HEADER_SIZE + cf.MAX_FRAME_BODY
#: A whole list of more entries than this is encoded in a worker thread.
_ENCODE_AWAY: Final = 2_000
#: Bytes a second a client reads a large reply at, at the least (beyond the
#: frame timeout), before its connection is closed.
_SLOWEST_READ: Final = 1024 * 1024


def _entries(reply: cf.ServerReply) -> int:
    """How many entries a whole-list reply holds (0 for any other reply)."""
    match reply:
        case cf.QueueList():
            return len(reply.queues)
        case cf.StatusInfo():
            return len(reply.queues) + len(reply.outgoing) + len(reply.incoming)
        case cf.OutgoingList():
            return len(reply.outgoing)
        case cf.ListInfoList():
            return sum(1 + len(found.targets) for found in reply.lists)
    return 0


#: How long the error reply that ends a connection may take to write.
FAREWELL_TIMEOUT: Final = 2.0
#: When the daemon stops, how long a connection still reads the requests its
#: client sent already, to answer each ``SHUTTING_DOWN`` (not carried out),
#: rather than leave their outcome unknown.
STOP_READ_SECONDS: Final = 0.1
#: The requests this daemon runs, with the protocol version each needs.
_VERSIONS: Final = cc.versions_needed(REQUESTS)
#: The request table as a plain dict, for the lookup of every request.
_ENTRIES: Final = dict(REQUESTS)


class ClientSession:
    """Serves one client connection until it closes; see the module docstring."""

    def __init__(
        self,
        services: Services,
        stream: trio.abc.Stream,
        *,
        conn_id: int,
        peer: str,
        principal: str | None = None,
        groups: frozenset[str] = frozenset(),
        on_authenticated: Callable[[], None] | None = None,
        opened_at: float | None = None,
    ) -> None:
        self.services = services
        self.stream = stream
        self.conn_id = conn_id
        self.peer = peer
        authorization = services.authorization
        limits = services.limits
        self.connection = cc.ClientConnection(
            cc.ConnectionSettings(
                qm_name=services.qm_name,
                qm_guid=services.qm_guid,
                server_version=services.server_version,
                requests=_VERSIONS,
                auth_required=authorization is not None and authorization.enabled,
                hello_timeout=limits.hello_timeout,
                frame_timeout=limits.frame_timeout,
                idle_timeout=limits.idle_timeout,
                large_frame=RECEIVE_CHUNK,
            ),
            opened_at=trio.current_time() if opened_at is None else opened_at,
            principal=principal,
        )
        log = structlog.get_logger("qmgr.session").bind(conn=conn_id, peer=peer)
        connection = self.connection
        #: What the request handlers work with.
        self.context = RequestContext(
            services,
            conn_id=conn_id,
            log=log if principal is None else log.bind(principal=principal),
            reply=self._reply,
            reply_list=self._reply_list,
            reply_bytes=connection.send_bytes,
            flush=self._flush,
            output_busy=self._output_busy,
            output_room=self._output_room,
            principal=(
                authorization.principal(principal, groups)
                if authorization is not None and principal is not None
                else None
            ),
        )
        #: The replies not yet written (the machine's outbox).
        self._outbox = connection.outbox
        self._on_authenticated = on_authenticated
        self._send_lock = trio.Lock()
        #: Set (and replaced) each time a write of the outbox ends.
        self._written = trio.Event()
        #: Bytes of large replies in the outbox or being written (see :meth:`_reply`).
        self._large_replies = 0
        self._cancel = trio.CancelScope()
        self._close_reason: str | None = None

    @property
    def principal(self) -> str | None:
        """Who the client authenticated as (a certificate, a local user, a token), or None."""
        return self.connection.principal

    @property
    def idle_since(self) -> float | None:
        """When the connection last received bytes, if it is idle (no transaction,
        no waiting receive), greeted and not closing; else None. A connection
        being evicted is no longer idle: each newcomer evicts one of its own."""
        if self.context.closing:
            return None
        return self.connection.idle_since(busy=self.context.busy)

    def close_soon(self, reason: str) -> None:
        """End the connection: tell the client why, then close (used to evict it)."""
        self._close_reason = reason
        self.context.closing = True
        self._cancel.cancel()

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Serve the connection; returns when it is closed by either side."""
        context = self.context
        context.log.info("connection_opened")
        reason = "closed by client"
        try:
            with self._cancel:
                async with trio.open_nursery() as nursery:
                    context.nursery = nursery
                    try:
                        reason = await self._serve()
                    finally:
                        context.closing = True
                        nursery.cancel_scope.cancel()
            if self._close_reason is not None:
                reason = self._close_reason
                await self._farewell(reason)
        except* (trio.BrokenResourceError, trio.ClosedResourceError):
            reason = "connection lost"
        finally:
            self.services.committer.closed(self.conn_id)
            if self.services.stopping:
                # The daemon ended it (a cancellation), not the client.
                if reason == "closed by client":
                    reason = cc.SHUTTING_DOWN
                context.abort_all(cc.SHUTTING_DOWN)
                if not self.connection.closed:
                    # Said to an idle client too: its next request learns why.
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await self._refuse_unread()
                        await self._farewell(cc.SHUTTING_DOWN, cf.ErrorCode.SHUTTING_DOWN)
            else:
                context.abort_all("client disconnected")
            reserved = self.connection.reserved
            if reserved:
                self.services.frames.release(reserved)
                self.connection.reserved = 0
            self._release_large_replies()
            with trio.CancelScope(shield=True):
                await self.stream.aclose()
            context.log.info("connection_closed", reason=reason)

    async def _refuse_unread(self) -> None:
        """The daemon stops: answer the requests the client sent already (those
        read and not yet run, and those that arrive within
        :data:`STOP_READ_SECONDS`) with ``SHUTTING_DOWN``, which says that they
        were not carried out (a commit among them: its transaction was aborted),
        where a closed connection would leave a commit's outcome unknown."""
        connection = self.connection
        connection.stop()
        with trio.move_on_after(STOP_READ_SECONDS) as scope:
            scope.shield = True
            while True:
                event = connection.next_event()
                if isinstance(event, ce.Refused):
                    self.context.failed(event.request_id, event.value, ShuttingDown(event.message))
                elif isinstance(event, ce.ReleaseFrame):
                    self.services.frames.release(event.length)
                elif isinstance(event, ce.NeedData):
                    data = await self.stream.receive_some(RECEIVE_CHUNK)
                    if not data:
                        return
                    connection.receive_data(data, trio.current_time())
                else:  # a frame to reserve, a violation, the end: the farewell says it
                    return

    async def _serve(self) -> str:
        with trio.CancelScope() as deadline_scope:
            reason = await self._serve_until(deadline_scope)
        if deadline_scope.cancelled_caught:
            reason = self.connection.deadline_reason()
            self.context.log.warning("connection_deadline", reason=reason)
            await self._farewell(reason)
        return reason

    async def _serve_until(self, deadline_scope: trio.CancelScope) -> str:
        """The read loop; each read waits under ``deadline_scope``, whose deadline is
        lifted while the frames read are handled."""
        connection = self.connection
        context = self.context
        services = self.services
        stream = self.stream
        next_event = connection.next_event
        note_read = services.committer.note_read
        forget_activity = services.committer.forget_source
        conn_id = self.conn_id
        request, need_data = ce.Request, ce.NeedData
        while True:
            deadline_scope.deadline = connection.deadline(busy=context.busy)
            data = await stream.receive_some(RECEIVE_CHUNK)
            deadline_scope.deadline = math.inf
            now = trio.current_time()
            connection.receive_data(data, now)
            while True:
                if services.stopping:
                    connection.stop()
                event = next_event()
                if type(event) is request:
                    await self._run(event.request_id, event.value)
                    if connection.outbox_full:
                        # Many small requests can ask for large replies (peeks of
                        # big messages): write them before handling more, so that
                        # a client that does not read holds back only itself.
                        await self._flush()
                    continue
                if type(event) is need_data:
                    break
                reason = await self._act(event)
                if reason is not None:
                    return reason
            # Tell the committer whether to expect this connection's next commit
            # soon: not while it waits for a message.
            if context.waiting:
                forget_activity(conn_id)
            else:
                note_read(conn_id, now)
            await self._flush()

    async def _act(self, event: object) -> str | None:
        """Carry out an event other than a request; the reason to close, or None."""
        connection = self.connection
        context = self.context
        if isinstance(event, ce.ReleaseFrame):
            self.services.frames.release(event.length)
        elif isinstance(event, ce.ReserveFrame):
            budget = self.services.frames
            if not budget.try_reserve(event.length):
                refusal = budget.refusal(event.length)
                context.log.warning("frame_refused", reason=refusal)
                await self._farewell(refusal)
                return refusal
            connection.frame_reserved()
        elif isinstance(event, ce.Greeted):
            context.version = event.version
            # Which clients are older (a version 8 SDK reads lists of 4 MiB at most).
            context.log = context.log.bind(protocol=event.version)
            if event.client_name:
                context.log = context.log.bind(client=event.client_name)
            if event.admitted:
                self._admitted()
        elif isinstance(event, ce.TokenOffered):
            return await self._authenticate(event)
        elif isinstance(event, ce.Refused):
            context.failed(event.request_id, event.value, ShuttingDown(event.message))
        elif isinstance(event, ce.Violation):
            return await self._violated(event)
        elif isinstance(event, ce.Closed):
            return event.reason
        return None

    async def _run(self, request_id: int, value: cf.FrameValue) -> None:
        """Authorize and run one request the machine let through."""
        context = self.context
        entry = _ENTRIES[type(value)]
        refused = context.refusal(value, entry.need)
        if refused is not None:
            context.failed(request_id, value, refused)
            return
        try:
            pending = entry.handler(context, request_id, value)
            if pending is not None:
                await pending
        except QueueManagerError as exc:
            context.failed(request_id, value, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.Cancelled):
            raise
        except Exception as exc:
            context.log.exception("request_failed", request=type(value).__name__)
            context.failed(
                request_id, value, InternalError(f"internal error: {type(exc).__name__}")
            )

    async def _authenticate(self, event: ce.TokenOffered) -> str | None:
        """Check a token; one not accepted ends the connection."""
        authorization = self.services.authorization
        name = None if authorization is None else authorization.authenticate(event.token)
        context = self.context
        if name is None:
            self.services.authentication_failed(self.peer)
            if authorization is not None:
                authorization.tally.authentication_failures += 1
            context.log.warning("authentication_failed", method="token")
        outcome = self.connection.authenticate(event.request_id, name)
        if isinstance(outcome, ce.Violation):
            return await self._violated(outcome)
        assert authorization is not None
        context.principal = authorization.principal(outcome.principal)
        context.log = context.log.bind(principal=outcome.principal)
        context.log.info("client_authenticated", method="token")
        if outcome.admitted:
            self._admitted()
        return None

    def _admitted(self) -> None:
        """Greeted and, if clients must authenticate, authenticated: the daemon
        counts the connection as authenticated (``admission``)."""
        if self._on_authenticated is not None:
            self._on_authenticated()

    async def _violated(self, violation: ce.Violation) -> str:
        """The client broke the protocol: log it, write the error, close."""
        log = self.context.log
        if violation.kind is ce.ViolationKind.MALFORMED:
            log.warning("bad_frame", error=violation.message)
        elif violation.kind is ce.ViolationKind.AUTHENTICATE_FIRST:
            if self.services.authorization is not None:
                self.services.authorization.tally.denied += 1
            log.warning("access_denied", request=violation.request, reason=violation.message)
        await self._flush()
        return violation.reason

    # ------------------------------------------------------------------ replies

    async def _farewell(
        self, reason: str, code: cf.ErrorCode = cf.ErrorCode.LIMIT_EXCEEDED
    ) -> None:
        """Write an error about the connection itself (request id 0) before closing."""
        self.connection.farewell(reason, code)
        with trio.move_on_after(FAREWELL_TIMEOUT) as scope:
            scope.shield = True
            await self._flush()

    def _reply(self, request_id: int, reply: cf.ServerReply) -> None:
        """Put a reply in the outbox. One over ``MAX_FRAME_BODY`` (a whole list of
        a large queue manager) takes room in the daemon-wide budget of large
        replies until it is written; with none left, the request is answered
        ``LIMIT_EXCEEDED``."""
        self._queue_reply(request_id, self.connection.encode_reply(request_id, reply))

    async def _reply_list(self, request_id: int, reply: cf.ServerReply) -> None:
        """:meth:`_reply` for a whole list: one of more than ``_ENCODE_AWAY``
        entries is encoded in a worker thread, so that the event loop serves
        the other connections and the peers meanwhile."""
        if _entries(reply) <= _ENCODE_AWAY:
            self._reply(request_id, reply)
            return
        frame = await trio.to_thread.run_sync(
            self.connection.encode_reply,
            request_id,
            reply,
            limiter=self.services.list_encoder,
        )
        self._queue_reply(request_id, frame)

    def _queue_reply(self, request_id: int, frame: bytes) -> None:
        size = len(frame)
        if size > _LARGE_REPLY:
            budget = self.services.replies
            if budget.try_reserve(size):
                self._large_replies += size
            else:
                refusal = budget.refusal(size)
                self.context.log.warning("reply_refused", request_id=request_id, reason=refusal)
                frame = error_frame(request_id, LimitExceeded(refusal))
        self.connection.send_bytes(frame)

    def _release_large_replies(self) -> None:
        """The large replies were written (or will never be): their room goes back."""
        if self._large_replies:
            self.services.replies.release(self._large_replies)
            self._large_replies = 0

    def _output_busy(self) -> bool:
        return self.connection.outbox_full

    async def _output_room(self) -> None:
        """Wait until the outbox holds less than it writes at once (writing it if
        nobody does)."""
        while self.connection.outbox_full:
            if self._send_lock.locked():
                await self._written.wait()
            else:
                await self._flush()

    async def _flush(self) -> None:
        """Write every queued reply, in order."""
        if not self._outbox:
            return
        lock = self._send_lock
        # An uncontended lock is taken without a pass through the scheduler.
        try:
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            if not self._outbox:
                return
            written = self._large_replies  # all are in the outbox taken now
            data = self.connection.data_to_send()
            if not written:
                await self.stream.send_all(data)
                return
            # A large reply holds room in the daemon-wide budget until written: a
            # client that does not read it loses its connection, not everyone
            # else their lists.
            within = self.services.limits.frame_timeout + len(data) / _SLOWEST_READ
            with trio.move_on_after(within) as waited:
                await self.stream.send_all(data)
            if waited.cancelled_caught:
                self.context.log.warning(
                    "reply_not_read", bytes=len(data), within_seconds=round(within, 1)
                )
                msg = "the client did not read its reply in time"
                raise trio.BrokenResourceError(msg)
            self._large_replies -= written
            self.services.replies.release(written)
        finally:
            lock.release()
            self._written.set()
            self._written = trio.Event()
