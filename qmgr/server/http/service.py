"""What the HTTP listener serves its connections with: the application, run by Hypercorn.

Theory of operation
-------------------
This module and what it imports (Hypercorn with h11 and h2, Starlette,
``prometheus_client``, the SDK's shapes: some 9 MB of resident memory) are
loaded at the listener's first connection (``port``), on a worker thread,
so that a queue manager nobody scrapes or browses does not carry them.

:func:`http_service` assembles what a connection is served with: the
collector and its registry (with the process collector), the ASGI
application (``app``) with its JSON API when it is given the operations,
and the console, whose rates come from the history the listener has kept
since start-up (``sources.sample_rates``). :class:`HypercornService` runs
Hypercorn's protocol on each stream the port accepted and secured: its
HTTP/1.1 server (``h11``; HTTP/2 only as ``h2c`` over plain TCP, which
Hypercorn always offers), with its own bounds: ``http.keep_alive_timeout``
for an idle keep-alive connection, ``http.request_timeout`` for each read,
16 KiB for a request's head (``request_checks.HEAD_LIMIT``: Hypercorn bounds a head that
is still arriving, the application one that arrived whole), a few HTTP/2
streams at once.

Why not ``hypercorn.trio.serve``: that function binds and accepts by
itself, with no bound on connections and no way to know the client's
certificate. Here the daemon binds the socket at start-up with the other
listeners (before the store opens) and accepts as it does on its other
ports; Hypercorn's ``TCPServer`` serves one accepted stream, whatever its
transport. The version of Hypercorn is pinned to the range this was
written against (``pyproject.toml``).
"""

from __future__ import annotations

import math
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
from prometheus_client import CollectorRegistry, ProcessCollector

from qmgr.config import Config

from ..client.authorization import Authorization
from ..client.operations import Operations
from .app import HttpApp
from .console import console
from .exposition import Exposition
from .metrics import QueueManagerCollector
from .port import CONNECTION, HttpConnection
from .rates import RateHistory
from .request_checks import HEAD_LIMIT
from .sources import MetricsSources

__all__ = ["WRITE_PIECE", "HypercornService", "http_service", "hypercorn_config"]

#: Bytes of an answer written at a time, each piece noted as progress
#: (``HttpConnection.writing_since``).
WRITE_PIECE: Final = 64 * 1024

#: HTTP/2 streams one connection may have open at once.
_H2_STREAMS: Final = 8


def host_names(config: Config) -> frozenset[str]:
    """The host names a browser may use for the listener without TLS:
    ``http.allowed_hosts``, the queue manager's name and the listener's host."""
    names = {*config.http_allowed_hosts, config.name.lower()}
    if config.http_listen is not None:
        names.add(config.http_listen.host.lower().strip("[]"))
    return frozenset(names)


def http_service(
    config: Config,
    *,
    sources: MetricsSources,
    authorization: Authorization,
    stopping: Callable[[], bool],
    log: structlog.typing.FilteringBoundLogger,
    operations: Operations | None = None,
    history: RateHistory | None = None,
) -> HypercornService:
    """The application with its metrics, and (given the operations) its JSON API
    and its console, whose rates are those of ``history``."""
    collector = QueueManagerCollector(sources)
    registry = CollectorRegistry()
    registry.register(collector)
    ProcessCollector(registry=registry)
    app = HttpApp(
        authorization=authorization,
        exposition=Exposition(registry, collector),
        stopping=stopping,
        log=log.bind(component="http"),
        operations=operations,
        host_names=host_names(config),
    )
    service = HypercornService(config, app)
    if operations is not None:
        site = console(
            host=app,
            operations=operations,
            sources=sources,
            idle_timeout=config.http_session_timeout,
            lifetime=config.http_session_lifetime,
            history=history,
        )
        app.serve_console(site.starlette_routes())
        service.tasks.append(site.expire_sessions)
    return service


class HypercornService:
    """Serves each accepted stream with Hypercorn's protocol and ``app`` (the
    listener's :class:`~.port.HttpService`)."""

    def __init__(self, config: Config, app: HttpApp) -> None:
        self.app = app
        self._settings = hypercorn_config(config)
        self._asgi = wrap_app(cast(ASGIFramework, app), self._settings.wsgi_max_body_size, "asgi")
        self._context = WorkerContext(None)
        #: Tasks to run for as long as the listener serves (the console's expiry of sessions).
        self.tasks: list[Callable[[], Awaitable[None]]] = []

    @property
    def on_failure(self) -> Callable[[str], None]:
        """Called with the ``host:port`` of a connection whose credential was not accepted."""
        return self.app.on_failure

    @on_failure.setter
    def on_failure(self, callback: Callable[[str], None]) -> None:
        self.app.on_failure = callback

    async def serve(self, stream: trio.abc.Stream, connection: HttpConnection) -> None:
        """Serve requests on ``stream`` until either side closes it."""
        state = ConnectionState({CONNECTION: connection})
        # Hypercorn's annotation says SSLStream; it serves plain streams too.
        stream_ = cast(trio.SSLStream[trio.SocketStream], stream)
        server = _TCPServer(self._asgi, self._settings, self._context, state, stream_)
        server.connection = connection
        await server.run()


class _TCPServer(TCPServer):
    """Hypercorn's server of one connection, which lets the connection go as soon
    as the client has closed it: Hypercorn's own keeps its keep-alive timer
    running after the end of the client's data, and so holds a closed
    connection open (``CLOSE-WAIT``) until ``http.keep_alive_timeout``."""

    #: The port's record of the connection: each write says on it that it is
    #: under way, and can be abandoned through it (``HttpConnection.close``).
    connection: HttpConnection | None = None

    async def _read_data(self) -> None:
        await super()._read_data()
        await self.idle_task.stop()

    async def protocol_send(self, event: Event) -> None:
        """Hypercorn's, with a deadline on each write: its write is shielded from
        cancellation, so a client that never reads would otherwise hold the
        connection (and the daemon's shutdown) for ever. While the write is
        under way the connection says so (``HttpConnection.writing_since``),
        and the port may abandon it to make room for a newcomer."""
        if not isinstance(event, RawData):
            await super().protocol_send(event)
            return
        connection = self.connection
        async with self.send_lock:
            try:
                with trio.CancelScope(shield=True):
                    with trio.move_on_after(self.config.read_timeout or math.inf) as write:
                        if connection is not None:
                            if connection.scope.cancel_called:
                                write.cancel()  # closed for a newcomer: nothing more is sent
                            connection.writing_since = trio.current_time()
                            connection.write_scope = write
                        try:
                            # In pieces, each noted as progress: a client that
                            # reads its answer steadily is not taken for one
                            # that leaves it unread.
                            data = memoryview(event.data)
                            for start in range(0, len(data), WRITE_PIECE):
                                await self.stream.send_all(data[start : start + WRITE_PIECE])
                                if connection is not None:
                                    connection.writing_since = trio.current_time()
                        finally:
                            if connection is not None:
                                connection.writing_since = None
                                connection.write_scope = None
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
