"""Helpers of the HTTP listener's tests: a small HTTP/1.1 client over trio (h11),
the listener served on loopback in the test's nursery, and the application over
a queue manager's operations called without sockets.

Tests import them with ``from http_kit import ...``.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import h11
import structlog
import trio
from prometheus_client import CollectorRegistry

from qmgr.config import Config, load_config
from qmgr.server.client.authorization import Authorization
from qmgr.server.client.operations import Operations
from qmgr.server.http import HttpPort
from qmgr.server.http.app import HttpApp
from qmgr.server.http.exposition import Exposition, SeriesFamily
from qmgr.server.http.port import CONNECTION, HttpConnection, HttpService
from qmgr.server.http.service import HypercornService


@dataclass(frozen=True)
class Answer:
    """A response: its status, headers (lower-case names) and body."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode()


class HttpClient:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self._h11 = h11.Connection(h11.CLIENT)

    async def get(
        self, path: str, headers: Sequence[tuple[str, str]] = (), method: str = "GET"
    ) -> Answer:
        """Send one request and read its whole response."""
        if self._h11.our_state is h11.DONE:
            self._h11.start_next_cycle()
        request = h11.Request(method=method, target=path, headers=[("host", "qmgr"), *headers])
        await self.stream.send_all(self._h11.send(request) + self._h11.send(h11.EndOfMessage()))
        response: h11.Response | None = None
        body = b""
        while True:
            event = self._h11.next_event()
            if event is h11.NEED_DATA:
                data = await self.stream.receive_some(65536)
                self._h11.receive_data(data)
                continue
            if isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                break
        assert response is not None
        headers_ = {name.decode().lower(): value.decode() for name, value in response.headers}
        return Answer(response.status_code, headers_, body)

    async def aclose(self) -> None:
        await self.stream.aclose()


@dataclass
class Served:
    """A port served on loopback."""

    port: HttpPort
    number: int
    tls: ssl.SSLContext | None = None

    async def connect(self) -> HttpClient:
        stream: trio.abc.Stream = await trio.open_tcp_stream("127.0.0.1", self.number)
        if self.tls is not None:
            secure = trio.SSLStream(stream, self.tls, server_hostname="127.0.0.1")
            await secure.do_handshake()
            stream = secure
        return HttpClient(stream)

    async def get(self, path: str, headers: Sequence[tuple[str, str]] = ()) -> Answer:
        """One request on a connection of its own."""
        client = await self.connect()
        try:
            return await client.get(path, headers)
        finally:
            await client.aclose()


def loader(config: Config, app: HttpApp) -> Callable[[], Awaitable[HttpService]]:
    """What loads ``app`` for a port (the daemon's imports Hypercorn first)."""

    async def load() -> HttpService:
        return HypercornService(config, app)

    return load


def port_of(app: HttpApp, *settings: str) -> HttpPort:
    """A port (without TLS) that serves ``app``, with ``settings`` (``http.x=y``)."""
    config = load_config(settings=settings)
    return HttpPort(
        config,
        load=loader(config, app),
        tally=app.authorization.tally,
        tls=None,
        log=structlog.get_logger("test"),
    )


async def exchange(stream: trio.abc.Stream, request: bytes) -> bytes:
    """Send ``request`` (raw bytes; nothing if empty) and read what comes back
    until the server closes the connection."""
    if request:
        await stream.send_all(request)
    received = b""
    with trio.fail_after(10):
        while data := await stream.receive_some(65536):
            received += data
    return received


@asynccontextmanager
async def serving(port: HttpPort, tls: ssl.SSLContext | None = None) -> AsyncIterator[Served]:
    """``port`` served on loopback until the block ends."""
    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        nursery.start_soon(port.serve, listeners)
        try:
            yield Served(port, listeners[0].socket.getsockname()[1], tls)
        finally:
            nursery.cancel_scope.cancel()


def client_connection(*, certificate: str | None = None, tls: bool = False) -> HttpConnection:
    """The listener's record of a connection from 127.0.0.1:1 (the client of
    :func:`asgi_scope`): the common name of the client certificate it showed,
    if any, and whether it is under TLS."""
    return HttpConnection(1, "127.0.0.1:1", 0.0, certificate_name=certificate, tls=tls)


def asgi_scope(
    method: str,
    path: str,
    *,
    content_length: int = 0,
    query: str = "",
    headers: Sequence[tuple[str, str]] = (),
    connection: HttpConnection | None = None,
) -> dict[str, Any]:
    """The ASGI scope of one HTTP/1.1 request from 127.0.0.1:1 to port 1803, as
    the listener hands it to the application: on ``connection`` (by default a
    :func:`client_connection` of its own), with a ``Content-Length`` header."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [
            (b"content-length", str(content_length).encode()),
            *((name.lower().encode(), value.encode()) for name, value in headers),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 1803),
        "state": {CONNECTION: client_connection() if connection is None else connection},
    }


async def asgi_call(
    app: Any,
    method: str,
    path: str,
    body: bytes = b"",
    *,
    query: str = "",
    headers: Sequence[tuple[str, str]] = (),
    connection: HttpConnection | None = None,
    cut: int | None = None,
) -> Answer:
    """One request to the ASGI application ``app``, without sockets (its scope
    :func:`asgi_scope`'s, its body in chunks of 16 KiB), and its whole response;
    with ``cut``, the client goes away after that many bytes of its body (its
    ``Content-Length`` is still the whole body's)."""
    scope = asgi_scope(
        method,
        path,
        content_length=len(body),
        query=query,
        headers=headers,
        connection=connection,
    )
    sent_body = body if cut is None else body[:cut]
    chunks = [sent_body[i : i + 16384] for i in range(0, len(sent_body), 16384)] or [b""]
    incoming = [
        {"type": "http.request", "body": chunk, "more_body": cut is not None or i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = sent[0]
    # Headers may repeat (set-cookie): the last of each name, and every cookie.
    found: dict[str, str] = {}
    for name, value in start["headers"]:
        key = name.decode().lower()
        if key == "set-cookie" and key in found:
            found[key] += "\n" + value.decode()
        else:
            found[key] = value.decode()
    return Answer(start["status"], found, b"".join(m.get("body", b"") for m in sent[1:]))


class NoSeries:
    """A stand-in for the collector (for tests that scrape nothing)."""

    def snapshot(self) -> int:
        return 0

    def series(self, readings: int) -> Sequence[SeriesFamily]:
        return []


def operations_app(authorization: Authorization, operations: Operations) -> HttpApp:
    """The HTTP application over ``operations`` (the API and the console's host),
    with nothing to scrape and never stopping."""
    return HttpApp(
        authorization=authorization,
        exposition=Exposition(CollectorRegistry(), NoSeries()),
        stopping=lambda: False,
        log=structlog.get_logger("test"),
        operations=operations,
        host_names=frozenset({"qmgr"}),  # the name the tests' browser uses
    )
