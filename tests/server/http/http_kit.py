"""Helpers of the HTTP listener's tests: a small HTTP/1.1 client over trio (h11),
the listener served on loopback in the test's nursery, the application over
a queue manager's operations called without sockets, the listener's own routes
with a few principals and their tokens (:func:`port_for`), and the console
seen by a browser (:class:`Site`).

Tests import them with ``from http_kit import ...``.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import h11
import markupsafe
import structlog
import trio
from prometheus_client import CollectorRegistry

from qmgr.config import Config, load_config
from qmgr.core.tokens import TokenBook, hash_token
from qmgr.server.client.authorization import Authorization
from qmgr.server.client.operations import Operations
from qmgr.server.client.services import Services
from qmgr.server.http import HttpPort
from qmgr.server.http.app import HttpApp
from qmgr.server.http.console import Console
from qmgr.server.http.exposition import Exposition, SeriesFamily
from qmgr.server.http.port import CONNECTION, HttpConnection, HttpService
from qmgr.server.http.service import HypercornService
from wire import MessageProperties
from wire import client as cf


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
    http_version: str = "1.1",
) -> dict[str, Any]:
    """The ASGI scope of one request (HTTP/1.1 unless ``http_version`` says) from
    127.0.0.1:1 to port 1803, as the listener hands it to the application: on
    ``connection`` (by default a :func:`client_connection` of its own), with a
    ``Content-Length`` header."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": http_version,
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
    http_version: str = "1.1",
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
        http_version=http_version,
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


# --------------------------------------------------------------------------
# The listener's own routes (``/healthz``, ``/metrics``): principals with
# tokens, ``prom`` a monitor through its group, ``root`` an administrator,
# ``carol`` neither.
# --------------------------------------------------------------------------

TOKENS = {"prom": "prom-token", "root": "root-token", "carol": "carol-token"}


class OneQueue:
    """A stand-in for the collector: one queue's depth."""

    def snapshot(self) -> int:
        return 3

    def series(self, readings: int) -> Sequence[SeriesFamily]:
        line = f'qmgr_queue_messages{{queue="q"}} {readings}\n'
        return [SeriesFamily("qmgr_queue_messages", "gauge", "Messages.", line)]


def authorization(*, enabled: bool = True) -> Authorization:
    return Authorization(
        None,
        enabled=enabled,
        admins=frozenset({"root"}),
        groups={"watchers": frozenset({"prom"})},
        default_acl={},
        tokens=TokenBook({name: hash_token(token) for name, token in TOKENS.items()}),
        monitors=frozenset({"group:watchers"}),
    )


def bearer(name: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {TOKENS[name]}")]


def listener_app(rules: Authorization, *, stopping: bool = False) -> HttpApp:
    """The application of the listener's own routes (no API, no console), its
    metrics one queue's depth, under ``rules``."""
    return HttpApp(
        authorization=rules,
        exposition=Exposition(CollectorRegistry(), OneQueue()),
        stopping=lambda: stopping,
        log=structlog.get_logger("test"),
    )


def port_for(
    rules: Authorization,
    *settings: str,
    stopping: bool = False,
    tls: ssl.SSLContext | None = None,
) -> HttpPort:
    config = load_config(settings=settings)
    app = listener_app(rules, stopping=stopping)
    return HttpPort(
        config,
        load=loader(config, app),
        tally=rules.tally,
        tls=tls,
        log=structlog.get_logger("test"),
    )


# --------------------------------------------------------------------------
# The console as a browser sees it (the fixture ``site`` is in
# ``console/conftest.py``): its sessions' idle timeout and lifetime.
# --------------------------------------------------------------------------

IDLE = 60.0
LIFETIME = 600.0


class DirectRequests:
    """Client requests made directly to a queue manager's ``operations`` (no
    session, no principal), to set a test up."""

    operations: Operations

    async def run(self, request: Any) -> Any:
        return await self.operations.run(request, principal=None, log=structlog.get_logger())

    async def send(self, queue: str, body: bytes, **fields: Any) -> None:
        await self.run(cf.Send(message=MessageProperties(destination=queue, body=body, **fields)))


@dataclass
class Site(DirectRequests):
    """The application with its console, a clock, and a browser's cookie."""

    app: HttpApp
    console: Console
    services: Services
    operations: Operations
    now: list[float] = field(default_factory=lambda: [1000.0])

    async def call(
        self,
        method: str,
        path: str,
        form: dict[str, str] | None = None,
        *,
        cookie: str | None = None,
        headers: list[tuple[str, str]] | None = None,
        certificate: str | None = None,
        tls: bool = False,
        body: bytes | None = None,
        cut: int | None = None,
    ) -> Answer:
        path, _, query = path.partition("?")
        sent = list(headers or [])
        data = b"" if form is None else urlencode(form).encode()
        if body is not None:
            data = body
        if form is not None or body is not None:
            sent.append(("content-type", "application/x-www-form-urlencoded"))
            if not any(name == "origin" for name, _ in sent):  # as a browser does
                sent += [("origin", "http://qmgr:1803"), ("host", "qmgr:1803")]
        if cookie is not None:
            sent.append(("cookie", f"qmgr_console={cookie}"))
        return await asgi_call(
            self.app,
            method,
            path,
            data,
            query=query,
            headers=sent,
            connection=client_connection(certificate=certificate, tls=tls),
            cut=cut,
        )

    async def login(self, token: str) -> str:
        answer = await self.call("POST", "/console/login", {"token": token})
        assert answer.status == 303, answer.text
        return cookie_of(answer)

    async def as_root(self) -> str:
        """The cookie of the session opened for ``root``'s client certificate."""
        return cookie_of(await self.call("GET", "/console", certificate="root"))

    async def csrf(self, cookie: str) -> str:
        page = await self.call("GET", "/console/queues", cookie=cookie)
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found is not None, page.text
        return found.group(1)

    async def depth(self, name: str) -> int:
        listed = (await self.run(cf.ListQueues())).queues
        return next(q.depth for q in listed if q.name == name)

    async def fill(self, queue: str, *bodies: bytes) -> None:
        """Create ``queue`` with a message of each of ``bodies``."""
        await self.run(cf.CreateQueue(name=queue))
        for body in bodies:
            await self.send(queue, body)


def error_shown(message: str) -> str:
    """How the console's error page shows ``message`` (escaped as its templates escape)."""
    return f'<p class="error" role="alert">{markupsafe.escape(message)}</p>'


def cookie_of(answer: Answer) -> str:
    found = re.search(r"qmgr_console=([^;]+);", answer.headers.get("set-cookie", ""))
    assert found is not None, answer.headers
    return found.group(1)
