"""The HTTP listener's accepting side: room, TLS, and Hypercorn's protocol per connection.

Theory of operation
-------------------
The daemon serves the HTTP listener in its own nursery, like the client
and peer ports: ``trio.serve_listeners`` hands each accepted connection to
:meth:`HttpPort.handle_connection`, which

1. **makes room**: at ``http.max_connections`` the connection idle the
   longest (no request being answered: between requests, or still sending
   its first) is closed for the newcomer; if every connection is answering a
   request, the newcomer is closed at once (``http_connection_refused``).
   Connections that never finish a request therefore cannot keep a scraper
   out: each lasts at most ``http.request_timeout`` per read and is the
   first to go when room is needed;
2. **shakes hands** (``tls.http``), within ``http.request_timeout``, and
   keeps the common name of the client certificate the client showed, if
   any, on the connection (``app.HttpConnection``), where the application
   finds it; a name that could pass for a peer, a group or ``everyone`` is
   refused, as on the client port;
3. **runs Hypercorn's protocol** on the stream: its HTTP/1.1 server
   (``h11``; HTTP/2 only as ``h2c`` over plain TCP, which Hypercorn always
   offers), with its own bounds: ``http.keep_alive_timeout`` for an idle
   keep-alive connection, ``http.request_timeout`` for each read,
   16 KiB for a request's head, a few HTTP/2 streams at once.

Why this and not ``hypercorn.trio.serve``: that function binds and accepts
by itself, with no bound on connections and no way to know the client's
certificate. Here the daemon binds the socket at start-up with the other
listeners (before the store opens) and accepts as it does on its other
ports; Hypercorn's ``TCPServer`` serves one accepted stream, whatever its
transport. The version of Hypercorn is pinned to the range this was
written against (``pyproject.toml``).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import ssl
from collections.abc import Awaitable, Callable
from typing import Final, cast

import structlog
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.events import Closed, Event, RawData
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ASGIFramework, ConnectionState
from hypercorn.utils import wrap_app

from qmgr.config import Config
from qmgr.core.permissions import user_name_problem

from ..admission import Admission, AdmissionLimits
from ..tls import TlsFailed, common_name, handshake
from .app import CONNECTION, HttpApp, HttpConnection

__all__ = ["HEAD_LIMIT", "HttpPort", "hypercorn_config"]

#: Bytes of a request's line and headers (Hypercorn's ``h11_max_incomplete_size``).
HEAD_LIMIT: Final = 16 * 1024
#: HTTP/2 streams one connection may have open at once.
_H2_STREAMS: Final = 8


class _TCPServer(TCPServer):
    """Hypercorn's server of one connection, which lets the connection go as soon
    as the client has closed it: Hypercorn's own keeps its keep-alive timer
    running after the end of the client's data, and so holds a closed
    connection open (``CLOSE-WAIT``) until ``http.keep_alive_timeout``."""

    async def _read_data(self) -> None:
        await super()._read_data()
        await self.idle_task.stop()

    async def protocol_send(self, event: Event) -> None:
        """Hypercorn's, with a deadline on each write: its write is shielded from
        cancellation, so a client that never reads would otherwise hold the
        connection (and the daemon's shutdown) for ever."""
        if not isinstance(event, RawData):
            await super().protocol_send(event)
            return
        async with self.send_lock:
            try:
                with trio.CancelScope(shield=True):
                    with trio.move_on_after(self.config.read_timeout or math.inf) as write:
                        await self.stream.send_all(event.data)
                broken = write.cancelled_caught
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                broken = True
            if broken:
                await self.protocol.handle(Closed())
                # The whole connection goes (not only this answer), or every
                # request it has pipelined would wait out its own deadline.
                await trio.aclose_forcefully(self.stream)


def hypercorn_config(config: Config) -> HypercornConfig:
    """Hypercorn's settings for the HTTP listener (see the module docstring)."""
    settings = HypercornConfig()
    settings.keep_alive_timeout = config.http_keep_alive_timeout
    settings.read_timeout = math.ceil(config.http_request_timeout)
    settings.h11_max_incomplete_size = HEAD_LIMIT
    settings.h2_max_concurrent_streams = _H2_STREAMS
    settings.h2_max_header_list_size = HEAD_LIMIT
    settings.include_server_header = False
    settings.errorlog = None  # the application logs what matters, with structlog
    settings.accesslog = None
    return settings


class HttpPort:
    """Serves HTTP connections (see the module docstring)."""

    def __init__(
        self,
        config: Config,
        app: HttpApp,
        tls: ssl.SSLContext | None,
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        self._config = config
        self._tls = tls
        self._log = log.bind(component="http")
        self._settings = hypercorn_config(config)
        self._app = wrap_app(cast(ASGIFramework, app), self._settings.wsgi_max_body_size, "asgi")
        self._context = WorkerContext(None)
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
        self._tally = app.authorization.tally
        # The application counts and logs a refused token; the address is slowed here.
        app.on_failure = lambda peer: self._failures.failed(_address_of(peer), trio.current_time())
        self._ids = itertools.count(1)
        #: Tasks that run as long as the listener serves (the console's sampler).
        self.tasks: list[Callable[[], Awaitable[None]]] = []

    async def serve(self, listeners: list[trio.SocketListener]) -> None:
        """Serve ``listeners``, with :attr:`tasks` beside them, until cancelled."""
        async with trio.open_nursery() as nursery:
            for task in self.tasks:
                nursery.start_soon(task)
            await trio.serve_listeners(self.handle_connection, listeners)

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
                delay = self._failures.delay(_address_of(connection.peer), trio.current_time())
                if delay:
                    await trio.sleep(delay)  # failures from this address: slowed down
                served = await self._secure(stream, connection, log)
                if served is not None:
                    state = ConnectionState({CONNECTION: connection})
                    # Hypercorn's annotation says SSLStream; it serves plain streams too.
                    stream_ = cast(trio.SSLStream[trio.SocketStream], served)
                    server = _TCPServer(self._app, self._settings, self._context, state, stream_)
                    try:
                        await server.run()
                    except Exception as exc:  # one connection never takes the daemon down
                        log.warning("http_connection_failed", reason=f"{type(exc).__name__}: {exc}")
        finally:
            del self.connections[connection.conn_id]
            with trio.CancelScope(shield=True):
                await stream.aclose()
            log.debug("http_connection_closed")

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
                self._failed(_address_of(connection.peer))
            return None
        name = common_name(secure)
        problem = None if name is None else user_name_problem(name)
        if problem is not None:
            reason = f"the client certificate's common name {problem}"
            log.warning("http_tls_refused", reason=reason)
            self._failed(_address_of(connection.peer))
            return None
        connection.certificate_name = name
        connection.tls = True
        return secure

    def _failed(self, address: str) -> None:
        """A TLS handshake or client certificate from ``address`` was refused."""
        self._failures.failed(address, trio.current_time())
        self._tally.authentication_failures += 1

    def _make_room(self) -> str | None:
        """None if a new connection may be served (closing an idle one if need
        be); else why it is refused."""
        limit = self._config.http_max_connections
        if len(self.connections) < limit:
            return None
        idle = [c for c in self.connections.values() if not c.active and not c.scope.cancel_called]
        if idle:
            oldest = min(idle, key=lambda connection: connection.idle_since)
            self._log.info(
                "http_connection_evicted",
                http=oldest.conn_id,
                peer=oldest.peer,
                reason=f"idle, closed to make room: at most {limit} HTTP connections "
                "(http.max_connections)",
            )
            oldest.scope.cancel()
            return None
        return f"at most {limit} HTTP connections (http.max_connections), all answering requests"


def _address_of(peer: str) -> str:
    """The address part of ``host:port`` or ``[v6]:port``."""
    return peer.rpartition(":")[0].strip("[]") or peer


def _peer_name(stream: trio.SocketStream) -> str:
    with contextlib.suppress(OSError):
        host, port = stream.socket.getpeername()[:2]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return "unknown"
