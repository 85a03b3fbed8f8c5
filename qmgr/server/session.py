"""One client connection: bytes in, frames, replies out, and the connection's bounds.

Theory of operation
-------------------
A session reads from its ``trio.abc.Stream``, feeds a ``ClientFrameDecoder``
and hands each frame to its request handler (``requests``). The first frame
must be ``Hello``. Replies are gathered in an outbox and written with one
``send_all`` once every frame of the current read has been handled, so a
client that pipelines a hundred sends and a commit costs one write each way.
A handler that must wait (a commit, a receive outside a transaction, queue
administration) is awaited before the next frame is read: a connection's
requests stay in order, and a client that outruns the disk is held back by
TCP. A receive that finds its queue empty waits in a task of its own, so
the requests behind it are still served.

Bounds. Every read waits under one deadline, the earliest that applies:

* ``hello_timeout`` from the connection's start until it has said Hello
  and, when clients must authenticate, authenticated (a certificate or a
  token): a connection that never authenticates holds its slot for no
  longer than that (see ``admission``);
* ``frame_timeout`` from the moment a frame has begun until it is whole (a
  slow sender cannot hold a connection slot with a trickle of bytes);
* ``idle_timeout`` while the connection has no open transaction and no
  waiting receive.

A frame larger than one read reserves its declared size in the daemon-wide
budget for frames in progress before its body is buffered; when the budget
is spent the connection is refused the frame. Open transactions and waiting
receives are bounded per connection. Every refusal is an ``ErrorReply``
that says which limit was reached; one that ends the connection has request
id 0 and is written before the connection closes.

Errors. Malformed bytes get ``ErrorReply(BAD_REQUEST)`` and the connection
is closed: after a framing error nothing that follows can be trusted. A
request that fails gets its error and the session goes on; if the request
belonged to a transaction, the transaction is doomed (it can only abort),
because the client may already have pipelined its commit. When the
connection ends for any reason, every transaction it opened is aborted.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any, Final

import structlog
import trio

from qmgr import __version__
from qmgr.core.errors import (
    AccessDenied,
    InternalError,
    LimitExceeded,
    QueueManagerError,
    ShuttingDown,
)
from wire import RemoteProtocolError
from wire import client as cf

from .replies import error_frame
from .requests import RequestHandlers
from .services import Services

__all__ = ["ClientSession"]

#: Bytes asked of the stream per read; frames larger than this reserve memory first.
RECEIVE_CHUNK: Final = 256 * 1024
#: What a client that has not authenticated is told when it must.
_AUTHENTICATE_FIRST: Final = (
    "authenticate first: this queue manager requires a client certificate or a token"
)
#: How long the error reply that ends a connection may take to write.
FAREWELL_TIMEOUT: Final = 2.0
#: Replies held for one connection before they are written, whatever is still to handle.
OUTBOX_FLUSH_BYTES: Final = 1 << 20

Handler = Callable[[int, Any], Awaitable[None] | None]


class ClientSession(RequestHandlers):
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
        super().__init__(services)
        self.stream = stream
        self.conn_id = conn_id
        self.peer = peer
        #: Who the client authenticated as (its certificate's common name), or None.
        self.principal = principal
        log = structlog.get_logger("qmgr.session").bind(conn=conn_id, peer=peer)
        self.log = log if principal is None else log.bind(principal=principal)
        authorization = services.authorization
        if authorization is not None and principal is not None:
            self._principal = authorization.principal(principal, groups)
        self._decoder = cf.ClientFrameDecoder()
        self._outbox: list[bytes] = []
        #: Bytes of the replies in ``_outbox`` (errors aside: they are small).
        self._outbox_bytes = 0
        self._send_lock = trio.Lock()
        self._greeted = False
        #: Greeted and, if clients must authenticate, authenticated.
        self._admitted = False
        self._on_authenticated = on_authenticated
        #: The protocol version agreed in the Hello.
        self._version = 0
        self._closing = False
        self._reserved = 0
        #: When the connection arrived (before its TLS handshake, if it had one).
        self._opened_at = trio.current_time() if opened_at is None else opened_at
        self._last_read = self._opened_at
        self._frame_started: float | None = None
        self._cancel = trio.CancelScope()
        self._close_reason: str | None = None
        self._handlers: dict[type[Any], Handler] = self.request_handlers()
        self._note_read = services.committer.note_read
        self._forget_activity = services.committer.forget_source

    # ------------------------------------------------------------------ state

    @property
    def idle_since(self) -> float | None:
        """When the connection last received bytes, if it is idle (no transaction,
        no waiting receive) and greeted; else None."""
        if not self._greeted or self._transactions or self._waiting:
            return None
        return self._last_read

    def close_soon(self, reason: str) -> None:
        """End the connection: tell the client why, then close (used to evict it)."""
        self._close_reason = reason
        self._cancel.cancel()

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Serve the connection; returns when it is closed by either side."""
        self.log.info("connection_opened")
        reason = "closed by client"
        try:
            with self._cancel:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    try:
                        reason = await self._serve()
                    finally:
                        self._closing = True
                        nursery.cancel_scope.cancel()
            if self._close_reason is not None:
                reason = self._close_reason
                await self._farewell(LimitExceeded(reason))
        except* (trio.BrokenResourceError, trio.ClosedResourceError):
            reason = "connection lost"
        finally:
            self.services.committer.forget_source(self.conn_id)
            self._abort_all("client disconnected")
            if self._reserved:
                self.services.frames.release(self._reserved)
                self._reserved = 0
            with trio.CancelScope(shield=True):
                await self.stream.aclose()
            self.log.info("connection_closed", reason=reason)

    async def _serve(self) -> str:
        with trio.CancelScope() as deadline_scope:
            reason = await self._serve_until(deadline_scope)
        if deadline_scope.cancelled_caught:
            reason = self._deadline_reason()
            self.log.warning("connection_deadline", reason=reason)
            await self._farewell(LimitExceeded(reason))
        return reason

    async def _serve_until(self, deadline_scope: trio.CancelScope) -> str:
        """The read loop; each read waits under ``deadline_scope``, whose deadline is
        lifted while the frames read are handled."""
        decoder = self._decoder
        stream = self.stream
        while True:
            deadline_scope.deadline = self._deadline()
            data = await stream.receive_some(RECEIVE_CHUNK)
            deadline_scope.deadline = math.inf
            if not data:
                return "closed by client"
            now = trio.current_time()
            self._last_read = now
            decoder.receive_data(data)
            completed = False
            while True:
                try:
                    frame = self._next_frame()
                except RemoteProtocolError as exc:
                    self.log.warning("bad_frame", error=str(exc))
                    error = cf.ErrorReply(code=cf.ErrorCode.BAD_REQUEST, message=str(exc))
                    self._outbox.append(cf.encode_frame(0, error))
                    await self._flush()
                    return f"malformed frame: {exc}"
                except LimitExceeded as exc:
                    self.log.warning("frame_refused", reason=exc.message)
                    await self._farewell(exc)
                    return exc.message
                if frame is None:
                    break
                completed = True
                if not await self._handle(frame.request_id, frame.value):
                    await self._flush()
                    return "protocol violation"
                if self._outbox_bytes > OUTBOX_FLUSH_BYTES:
                    # Many small requests can ask for large replies (peeks of
                    # big messages): write them before handling more, so that
                    # a client that does not read holds back only itself.
                    await self._flush()
            if not decoder.in_frame:
                self._frame_started = None
            elif completed or self._frame_started is None:
                self._frame_started = now
            # Tell the committer whether to expect this connection's next commit
            # soon: not while it waits for a message.
            if self._waiting:
                self._forget_activity(self.conn_id)
            else:
                self._note_read(self.conn_id, now)
            await self._flush()

    def _deadline(self) -> float:
        """When the next read must have come (see the module docstring)."""
        limits = self.services.limits
        if not self._admitted:
            return self._opened_at + limits.hello_timeout
        if self._frame_started is not None:
            return self._frame_started + limits.frame_timeout
        if not self._transactions and not self._waiting:
            return self._last_read + limits.idle_timeout
        return math.inf

    def _deadline_reason(self) -> str:
        limits = self.services.limits
        if not self._greeted:
            return f"no Hello within {limits.hello_timeout:g} s"
        if not self._admitted:
            return f"not authenticated within {limits.hello_timeout:g} s of connecting"
        if self._frame_started is not None:
            return f"a frame did not arrive whole within {limits.frame_timeout:g} s"
        return f"closing a connection idle for {limits.idle_timeout:g} s"

    def _next_frame(self) -> cf.Frame | None:
        decoder = self._decoder
        header = decoder.next_header()
        if header is None:
            return None
        length = header[0]
        if length > RECEIVE_CHUNK and not self._reserved:
            budget = self.services.frames
            if not budget.try_reserve(length):
                raise LimitExceeded(budget.refusal(length))
            self._reserved = length
        frame = decoder.next_frame()
        if frame is not None and self._reserved:
            self.services.frames.release(self._reserved)
            self._reserved = 0
        return frame

    async def _farewell(self, error: QueueManagerError) -> None:
        """Write an error about the connection itself (request id 0) before closing."""
        self._outbox.append(error_frame(0, error))
        with trio.move_on_after(FAREWELL_TIMEOUT) as scope:
            scope.shield = True
            await self._flush()

    async def _handle(self, request_id: int, value: cf.FrameValue) -> bool:
        """Handle one frame; False means the connection must close."""
        if not self._greeted:
            return self._hello(request_id, value)
        if type(value) is cf.Authenticate and self._version >= cf.SECURITY_VERSION:
            return self._authenticate(request_id, value)
        handler = self._handlers.get(type(value))
        needed = _version_needed(type(value))
        too_new = self._version < needed
        if handler is None or too_new:
            message = f"{type(value).__name__} is not a request a client may send now"
            if too_new:
                message += (
                    f" (it needs protocol version {needed}; "
                    f"this connection agreed on {self._version})"
                )
            error = cf.ErrorReply(code=cf.ErrorCode.BAD_REQUEST, message=message)
            self._outbox.append(cf.encode_frame(request_id, error))
            return False
        if self.services.stopping:
            self._failed(request_id, value, ShuttingDown("the queue manager is shutting down"))
            return True
        authorization = self.services.authorization
        if authorization is not None and authorization.enabled:
            if self._principal is None:
                first = _AUTHENTICATE_FIRST
                self.log.warning("access_denied", request=type(value).__name__, reason=first)
                self._deny(request_id, first)
                return False
            why = authorization.denial(self._principal, value)
            if why is not None:
                self.log.warning("access_denied", request=type(value).__name__, reason=why)
                self._failed(request_id, value, AccessDenied(why))
                return True
        try:
            pending = handler(request_id, value)
            if pending is not None:
                await pending
        except QueueManagerError as exc:
            self._failed(request_id, value, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.Cancelled):
            raise
        except Exception as exc:
            self.log.exception("request_failed", request=type(value).__name__)
            self._failed(request_id, value, InternalError(f"internal error: {type(exc).__name__}"))
        return True

    def _authenticate(self, request_id: int, value: cf.Authenticate) -> bool:
        """Authenticate with a token; a token not accepted ends the connection."""
        authorization = self.services.authorization
        name = None if authorization is None else authorization.authenticate(value.token)
        if name is None or authorization is None:
            self.services.authentication_failed(self.peer)
            self.log.warning("authentication_failed", method="token")
            self._deny(request_id, "the token is not accepted")
            return False
        if self.principal is not None and self.principal != name:
            self._deny(request_id, f"this connection is authenticated as {self.principal!r}")
            return False
        self.principal = name
        self._principal = authorization.principal(name)
        self.log = self.log.bind(principal=name)
        self.log.info("client_authenticated", method="token")
        self.reply(request_id, cf.Ok())
        self._check_admitted()
        return True

    def _check_admitted(self) -> None:
        """Once greeted and, if clients must authenticate, authenticated, the
        connection is no longer bound by the Hello deadline, and the daemon
        counts it as authenticated (``admission``)."""
        if self._admitted or not self._greeted:
            return
        authorization = self.services.authorization
        if authorization is not None and authorization.enabled and self._principal is None:
            return
        self._admitted = True
        if self._on_authenticated is not None:
            self._on_authenticated()

    def _deny(self, request_id: int, message: str) -> None:
        error = cf.ErrorReply(code=cf.ErrorCode.ACCESS_DENIED, message=message)
        self._outbox.append(cf.encode_frame(request_id, error))

    def _hello(self, request_id: int, value: cf.FrameValue) -> bool:
        if not isinstance(value, cf.Hello):
            message = f"the first frame must be Hello, not {type(value).__name__}"
            error = cf.ErrorReply(code=cf.ErrorCode.BAD_REQUEST, message=message)
            self._outbox.append(cf.encode_frame(request_id, error))
            return False
        version = min(value.max_version, cf.PROTOCOL_VERSION)
        if version < max(value.min_version, cf.MIN_PROTOCOL_VERSION):
            message = (
                f"client speaks versions {value.min_version}..{value.max_version}; "
                f"this queue manager speaks {cf.MIN_PROTOCOL_VERSION}..{cf.PROTOCOL_VERSION}"
            )
            error = cf.ErrorReply(code=cf.ErrorCode.UNSUPPORTED_VERSION, message=message)
            self._outbox.append(cf.encode_frame(request_id, error))
            return False
        self._greeted = True
        self._version = version
        if value.client_name:
            self.log = self.log.bind(client=value.client_name)
        services = self.services
        reply = cf.HelloOk(
            version=version,
            server_version=__version__,
            qm_name=services.qm_name,
            qm_guid=services.qm_guid,
        )
        self._outbox.append(cf.encode_frame(request_id, reply))
        self._check_admitted()
        return True

    # ------------------------------------------------------------------ replies

    def reply(self, request_id: int, value: cf.ServerReply) -> None:
        """Queue a reply; it goes out with the next flush."""
        frame = cf.encode_frame(request_id, value)
        self._outbox.append(frame)
        self._outbox_bytes += len(frame)

    def reply_bytes(self, frame: bytes) -> None:
        """Queue a reply frame that is already encoded."""
        self._outbox.append(frame)
        self._outbox_bytes += len(frame)

    def reply_error(self, request_id: int, error: QueueManagerError) -> None:
        """Queue an error reply."""
        self._outbox.append(error_frame(request_id, error))

    async def flush(self) -> None:
        """Write every queued reply, in order."""
        await self._flush()

    async def _flush(self) -> None:
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
            data = b"".join(self._outbox)
            self._outbox.clear()
            self._outbox_bytes = 0
            await self.stream.send_all(data)
        finally:
            lock.release()

    # ------------------------------------------------------------------ the end

    def _abort_all(self, reason: str) -> None:
        for tx in list(self._transactions.values()):
            self.end_transaction(tx, reason)
        self._transactions.clear()
        self._aborted.clear()


def _version_needed(request: type[object]) -> int:
    """The protocol version a connection needs for a request of this class."""
    if request in cf.SECURITY_REQUESTS:
        return cf.SECURITY_VERSION
    if request in cf.POISON_REQUESTS:
        return cf.POISON_VERSION
    if request in cf.OUTCOMES_REQUESTS:
        return cf.OUTCOMES_VERSION
    if request in cf.TWO_PHASE_REQUESTS:
        return cf.TWO_PHASE_VERSION
    return cf.MIN_PROTOCOL_VERSION
