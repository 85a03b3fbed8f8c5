"""The HTTP listener's accepting side: room, TLS, and the service loaded at the first connection.

Theory of operation
-------------------
The daemon serves the HTTP listener in its own nursery, like the client
and peer ports: ``trio.serve_listeners`` hands each accepted connection to
:meth:`HttpPort.handle_connection`, which

1. **makes room**: at ``http.max_connections`` the connection idle the
   longest (no request being answered: between requests, or still sending
   a request's head or body) is closed for the newcomer; when none is idle,
   the connection whose answer has waited the longest for its client to
   read it (a write under way, :attr:`HttpConnection.writing_since`) is
   closed instead, its write abandoned; only if every connection is working
   on a request (the application running, not waiting for its reader) is
   the newcomer closed at once (``http_connection_refused``). Connections
   that never finish a request therefore cannot keep a scraper out: each
   lasts at most ``http.request_timeout`` per read and is the first to go
   when room is needed (nothing has been done for a request whose body has
   not all come); nor can connections that do not read their answers (a
   pipeline of requests read a trickle at a time, a large page never read):
   the daemon has done their work, and only their reader keeps them. An
   answer is written in pieces, each noted as progress, and only one that
   has made none for :data:`UNREAD_SECONDS` makes room: a client reading its
   answer as it comes (a large page over a slow link) is not closed for a
   newcomer, and of those that do not read, the longest waiting goes first;
2. **shakes hands** (``tls.http``), within ``http.request_timeout``, and
   keeps the common name of the client certificate the client showed, if
   any, on the connection (:class:`HttpConnection`), where the application
   finds it; a name that could pass for a peer, a group or ``everyone`` is
   refused, as on the client port;
3. **hands the stream to the service** (:class:`HttpService`: the
   application run by Hypercorn, ``service``), which serves its requests.

The service and its libraries are not imported until a connection needs
them: the first one that gets past the handshake **loads** it (``load``,
given by the daemon: the imports on a worker thread, so that the event
loop keeps serving the other ports meanwhile; ``http_loaded`` in the log),
and connections that arrive while it loads wait for it. A load that fails
is logged (``http_load_failed``), closes that connection, and is tried
again by the next. The tasks the service brings (the console's expiry of
its sessions) start then, beside the listener's own (:attr:`HttpPort.tasks`,
which run from start-up).
"""

from __future__ import annotations

import contextlib
import itertools
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

import structlog
import trio

from qmgr.config import Config
from qmgr.core.permissions import user_name_problem
from qmgr.core.routes import socket_address_text

from ..admission import Admission, AdmissionLimits
from ..client.authorization import AccessTally
from ..tls import TlsFailed, common_name, handshake

__all__ = [
    "CONNECTION",
    "UNREAD_SECONDS",
    "HttpConnection",
    "HttpPort",
    "HttpService",
    "address_of",
]

#: The key of the connection (:class:`HttpConnection`) in an ASGI scope's ``state``.
CONNECTION: Final = "qmgr.connection"
#: A connection whose answer has made no progress for this long (its client
#: does not read it) may be closed to make room for a newcomer.
UNREAD_SECONDS: Final = 1.0


@dataclass(slots=True, eq=False)
class HttpConnection:
    """One connection of the HTTP listener, as the port and the application share it."""

    conn_id: int
    #: ``host:port`` of the other end.
    peer: str
    #: When it was accepted (trio's clock).
    opened_at: float
    #: The common name of the client certificate it showed, if any.
    certificate_name: str | None = None
    #: Requests being answered on it now (not counting one that waits for its body).
    active: int = 0
    #: Close it once the request being answered is (a credential was refused).
    close_after: bool = False
    #: When it last finished a request (trio's clock).
    idle_since: float = 0.0
    #: Whether it is under TLS.
    tls: bool = False
    #: Cancelling it closes the connection (eviction: :meth:`close`).
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    #: When the write of an answer that is under way last made progress (the
    #: kernel took a piece of it; trio's clock), None while none is: a client
    #: that leaves its answer unread for :data:`UNREAD_SECONDS` may be closed
    #: to make room (``HttpPort``), one that reads it steadily is not.
    writing_since: float | None = None
    #: The scope of the write under way, if any: the write is shielded from
    #: the connection's own cancellation (an answer is never cut by the end
    #: of its request), so :meth:`close` cancels it too.
    write_scope: trio.CancelScope | None = None

    def close(self) -> None:
        """Close the connection, abandoning the write of an answer under way."""
        self.scope.cancel()
        if self.write_scope is not None:
            self.write_scope.cancel()


class HttpService(Protocol):
    """What serves the requests of a connection once the port has accepted and
    secured it (``service.HypercornService``)."""

    @property
    def tasks(self) -> list[Callable[[], Awaitable[None]]]:
        """Tasks to run for as long as the listener serves."""
        ...

    @property
    def on_failure(self) -> Callable[[str], None]:
        """Called with the ``host:port`` of a connection whose credential was not accepted."""
        ...

    @on_failure.setter
    def on_failure(self, callback: Callable[[str], None]) -> None: ...

    async def serve(self, stream: trio.abc.Stream, connection: HttpConnection) -> None:
        """Serve requests on ``stream`` until either side closes it."""
        ...


class HttpPort:
    """Serves HTTP connections (see the module docstring)."""

    def __init__(
        self,
        config: Config,
        *,
        load: Callable[[], Awaitable[HttpService]],
        tally: AccessTally,
        tls: ssl.SSLContext | None,
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        self._config = config
        self._load = load
        self._tls = tls
        self._log = log.bind(component="http")
        #: How long an answer must have waited for its reader before its
        #: connection may be closed to make room (:data:`UNREAD_SECONDS`).
        self.unread_after = UNREAD_SECONDS
        #: The service, once a connection has loaded it.
        self.service: HttpService | None = None
        self._loading = trio.Lock()
        self._nursery: trio.Nursery | None = None
        #: The connections being served, by id.
        self.connections: dict[int, HttpConnection] = {}
        # Recent failed handshakes and tokens by address: an address with
        # ``auth.failure_limit`` of them in a minute waits ``auth.failure_delay``
        # before each new connection is served, as on the client port.
        self._failures = Admission(
            AdmissionLimits(
                max_connections_per_address=config.http_max_connections,
                failure_limit=config.auth_failure_limit,
                failure_delay=config.auth_failure_delay,
                section="http",
            )
        )
        self._tally = tally
        self._ids = itertools.count(1)
        #: Tasks that run as long as the listener serves, from start-up (the
        #: console's rate sampler).
        self.tasks: list[Callable[[], Awaitable[None]]] = []

    async def serve(self, listeners: list[trio.SocketListener]) -> None:
        """Serve ``listeners``, with :attr:`tasks` beside them (and the service's,
        once loaded), until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for task in (*self.tasks, *(() if self.service is None else self.service.tasks)):
                nursery.start_soon(task)
            try:
                await trio.serve_listeners(self.handle_connection, listeners)
            finally:
                self._nursery = None

    async def handle_connection(self, stream: trio.SocketStream) -> None:
        """Serve one connection (the listener's handler)."""
        now = trio.current_time()
        connection = HttpConnection(
            next(self._ids), _peer_name(stream), opened_at=now, idle_since=now
        )
        log = self._log.bind(http=connection.conn_id, peer=connection.peer)
        refusal = self._make_room()
        if refusal is not None:
            log.warning("http_connection_refused", reason=refusal)
            with trio.CancelScope(shield=True):
                await stream.aclose()
            return
        self.connections[connection.conn_id] = connection
        try:
            with connection.scope:
                delay = self._failures.delay(address_of(connection.peer), trio.current_time())
                if delay:
                    await trio.sleep(delay)  # failures from this address: slowed down
                served = await self._secure(stream, connection, log)
                service = None if served is None else await self._service(log)
                if served is not None and service is not None:
                    try:
                        await service.serve(served, connection)
                    except Exception as exc:  # one connection never takes the daemon down
                        log.warning("http_connection_failed", reason=f"{type(exc).__name__}: {exc}")
        finally:
            del self.connections[connection.conn_id]
            with trio.CancelScope(shield=True):
                await stream.aclose()
            log.debug("http_connection_closed")

    async def _service(self, log: structlog.typing.FilteringBoundLogger) -> HttpService | None:
        """The service, loaded by the first connection that needs it (see the
        module docstring); None if it could not be loaded."""
        if self.service is not None:
            return self.service
        async with self._loading:
            if self.service is None:
                started = trio.current_time()
                try:
                    service = await self._load()
                except Exception as exc:
                    reason = f"{type(exc).__name__}: {exc}"
                    log.exception("http_load_failed", reason=reason)
                    return None
                # The application counts and logs a refused token; the address
                # is slowed down here.
                service.on_failure = lambda peer: self._failures.failed(
                    address_of(peer), trio.current_time()
                )
                if self._nursery is not None:
                    for task in service.tasks:
                        self._nursery.start_soon(task)
                self.service = service
                seconds = round(trio.current_time() - started, 3)
                self._log.info("http_loaded", seconds=seconds)
        return self.service

    async def _secure(
        self,
        stream: trio.SocketStream,
        connection: HttpConnection,
        log: structlog.typing.FilteringBoundLogger,
    ) -> trio.abc.Stream | None:
        """The stream to serve (after the TLS handshake, if any), or None (refused)."""
        if self._tls is None:
            return stream
        try:
            secure = await handshake(
                stream,
                self._tls,
                server_side=True,
                within=self._config.http_request_timeout,
                https_compatible=True,
            )
        except TlsFailed as exc:
            (log.debug if exc.closed else log.warning)("http_tls_refused", reason=str(exc))
            if not exc.closed:
                self._failed(address_of(connection.peer))
            return None
        name = common_name(secure)
        problem = None if name is None else user_name_problem(name)
        if problem is not None:
            reason = f"the client certificate's common name {problem}"
            log.warning("http_tls_refused", reason=reason)
            self._failed(address_of(connection.peer))
            return None
        connection.certificate_name = name
        connection.tls = True
        return secure

    def _failed(self, address: str) -> None:
        """A TLS handshake or client certificate from ``address`` was refused."""
        self._failures.failed(address, trio.current_time())
        self._tally.authentication_failures += 1

    def _make_room(self) -> str | None:
        """None if a new connection may be served (closing an idle one, or one
        whose answer waits for its reader, if need be); else why it is refused."""
        limit = self._config.http_max_connections
        if len(self.connections) < limit:
            return None
        room = f"closed to make room: at most {limit} HTTP connections (http.max_connections)"
        open_ = [c for c in self.connections.values() if not c.scope.cancel_called]
        idle = [c for c in open_ if not c.active]
        if idle:
            oldest = min(idle, key=lambda connection: connection.idle_since)
            self._evict(oldest, f"idle, {room}")
            return None
        stalled_before = trio.current_time() - self.unread_after
        unread = [
            c for c in open_ if c.writing_since is not None and c.writing_since <= stalled_before
        ]
        if unread:
            oldest = min(unread, key=lambda connection: connection.writing_since or 0.0)
            waited = trio.current_time() - (oldest.writing_since or 0.0)
            self._evict(
                oldest,
                f"its answer has waited {waited:.1f} s for the client to read more of it, {room}",
            )
            return None
        return f"at most {limit} HTTP connections (http.max_connections), all answering requests"

    def _evict(self, connection: HttpConnection, reason: str) -> None:
        """Close ``connection`` for a newcomer (``http_connection_evicted``)."""
        self._log.info(
            "http_connection_evicted", http=connection.conn_id, peer=connection.peer, reason=reason
        )
        connection.close()


def address_of(peer: str) -> str:
    """The address part of ``host:port`` or ``[v6]:port``."""
    return peer.rpartition(":")[0].strip("[]") or peer


def _peer_name(stream: trio.SocketStream) -> str:
    with contextlib.suppress(OSError):
        return socket_address_text(stream.socket.getpeername())
    return "unknown"
