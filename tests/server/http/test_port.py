"""The listener's accepting side (``port``), in-process over loopback: room for a
scraper among idle connections and among connections that do not read their
answers, HTTPS with a client certificate as the
principal, plain HTTP refused on the HTTPS port, a connection whose service
fails closed alone, an address whose tokens keep failing slowed down, and the
service loaded once, at the first connection, with its tasks started."""

from __future__ import annotations

import dataclasses
import ssl
from pathlib import Path

import h11
import pytest
import structlog
import trio
import trio.testing
from http_kit import (
    Served,
    authorization,
    bearer,
    client_connection,
    listener_app,
    port_for,
    serving,
)
from server.peer_kit import wait_until

from qmgr.certs import init_ca, issue
from qmgr.config import Config, load_config
from qmgr.server.http.app import HttpApp
from qmgr.server.http.port import UNREAD_SECONDS, HttpPort, HttpService
from qmgr.server.http.service import HypercornService
from qmgr.server.tls import load_contexts


async def test_idle_connections_cannot_keep_a_scraper_out() -> None:
    port = port_for(authorization(), "http.max_connections=4")
    async with serving(port) as http:
        idle = [await trio.open_tcp_stream("127.0.0.1", http.number) for _ in range(10)]
        await trio.testing.wait_all_tasks_blocked(0.01)
        # Each newcomer closed the one idle the longest: never more than the limit.
        assert len(port.connections) <= 4
        answer = await http.get("/metrics", bearer("prom"))
        assert answer.status == 200
        # The seven idle the longest were closed by the server (the last for the scraper).
        with trio.fail_after(5):
            for stream in idle[:7]:
                assert await stream.receive_some(1) == b""
        for stream in idle:
            await stream.aclose()


async def stalled_reader(number: int) -> trio.SocketStream:
    """A connection that pipelines ``/healthz`` requests and reads none of the
    answers, until the server stops taking them: its answer waits for it."""
    sock = trio.socket.socket()
    sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF, 4096)
    await sock.connect(("127.0.0.1", number))
    stream = trio.SocketStream(sock)
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    while True:
        with trio.move_on_after(0.5) as blocked:
            await stream.send_all(request * 256)
        if blocked.cancelled_caught:
            return stream


async def test_connections_that_do_not_read_their_answers_cannot_keep_a_scraper_out() -> None:
    # The write deadline (http.request_timeout) is far away: room is made at once.
    port = port_for(
        authorization(enabled=False), "http.max_connections=2", "http.request_timeout=60"
    )
    # Left unread at all: closed at once (how long is the next test's).
    port.unread_after = 0.0
    async with serving(port) as http:
        with trio.fail_after(10):
            readers = [await stalled_reader(http.number) for _ in range(2)]
            await wait_until(
                lambda: all(c.writing_since is not None for c in port.connections.values()),
                step=0.01,
            )
        with trio.fail_after(10):
            assert len(port.connections) == 2
            first = min(port.connections.values(), key=lambda c: c.writing_since or 0.0)
            # Every connection is answering a request; none is idle. The one
            # whose answer has waited the longest goes, its write abandoned.
            try:
                assert (await http.get("/healthz")).status == 200
                await wait_until(lambda: first.conn_id not in port.connections, step=0.01)
            finally:
                for stream in readers:
                    await stream.aclose()


async def test_only_an_answer_left_unread_for_a_while_makes_room(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A client that reads its answer steadily (its write makes progress) is not
    closed for a newcomer; one whose answer has made no progress for
    ``UNREAD_SECONDS`` is, the longest waiting first."""
    port = port_for(authorization(enabled=False), "http.max_connections=2")
    now = trio.current_time()
    reading = client_connection()
    reading.active, reading.writing_since = 1, now - UNREAD_SECONDS / 2
    stalled = dataclasses.replace(client_connection(), conn_id=2)
    stalled.active, stalled.writing_since = 1, now - UNREAD_SECONDS * 5
    port.connections = {1: reading, 2: dataclasses.replace(reading, conn_id=3)}
    assert "all answering requests" in (port._make_room() or "")
    assert not reading.scope.cancel_called
    port.connections = {1: reading, 2: stalled}
    assert port._make_room() is None
    assert stalled.scope.cancel_called
    assert not reading.scope.cancel_called


def tls_config(tmp_path: Path, *more: str) -> tuple[list[str], Path]:
    pki = tmp_path / "pki"
    init_ca(pki)
    qm = issue(pki, "qm-a", kind="qm", hosts=("127.0.0.1",))
    settings = [
        f"tls.certificate={qm.cert}",
        f"tls.key={qm.key}",
        f"tls.ca={pki / 'ca.crt'}",
        *more,
    ]
    return settings, pki


def client_context(pki: Path, name: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if name is not None:
        issued = issue(pki, name, kind="client")
        context.load_cert_chain(issued.cert, issued.key)
    return context


async def test_over_https_a_client_certificate_is_the_principal(tmp_path: Path) -> None:
    settings, pki = tls_config(tmp_path)
    contexts = load_contexts(load_config(settings=settings))
    assert contexts.http is not None
    rules = authorization()
    port = port_for(rules, *settings, tls=contexts.http)
    async with serving(port) as plain:
        prom = Served(port, plain.number, client_context(pki, "prom"))
        assert (await prom.get("/metrics")).status == 200
        carol = Served(port, plain.number, client_context(pki, "carol"))
        assert (await carol.get("/metrics")).status == 403
        anonymous = Served(port, plain.number, client_context(pki, None))
        assert (await anonymous.get("/metrics")).status == 401
        assert (await anonymous.get("/metrics", bearer("root"))).status == 200
        assert (await anonymous.get("/healthz")).status == 200
        # Plain HTTP to the HTTPS port gets no answer.
        with structlog.testing.capture_logs() as logs:
            client = await plain.connect()
            await client.stream.send_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            with trio.fail_after(5):
                assert await client.stream.receive_some(100) == b""
            await client.aclose()
        assert "http_tls_refused" in [entry["event"] for entry in logs]


async def test_a_broken_upgrade_to_http2_closes_its_connection_and_nothing_else() -> None:
    port = port_for(authorization(enabled=False))
    with structlog.testing.capture_logs() as logs:
        async with serving(port) as http:
            for settings in (b"a", b"AAAA"):
                async with await trio.open_tcp_stream("127.0.0.1", http.number) as stream:
                    await stream.send_all(
                        b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
                        b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                        b"HTTP2-Settings: " + settings + b"\r\n\r\n"
                    )
                    with trio.fail_after(5):
                        while await stream.receive_some(65536):
                            pass
            assert (await http.get("/healthz")).status == 200  # the listener serves on
    assert [e["event"] for e in logs].count("http_connection_failed") == 2


async def test_an_address_whose_tokens_keep_failing_is_slowed_down() -> None:
    rules = authorization()
    port = port_for(rules, "auth.failure_limit=2", "auth.failure_delay=0.5")
    wrong = [("authorization", "Bearer wrong-token")]
    async with serving(port) as http:
        for _ in range(2):
            began = trio.current_time()
            assert (await http.get("/metrics", wrong)).status == 401
            assert trio.current_time() - began < 0.5  # not slowed yet
        began = trio.current_time()
        assert (await http.get("/metrics", bearer("prom"))).status == 200
        assert trio.current_time() - began >= 0.5  # its address waited first
    assert rules.tally.authentication_failures == 2  # each counted once


class CountedLoads:
    """A port's ``load``: makes the service of ``app``, failing the first ``failures``
    times, and counts its calls and the runs of the service's task."""

    def __init__(self, config: Config, app: HttpApp, failures: int = 0) -> None:
        self.config = config
        self.app = app
        self.failures = failures
        self.calls = 0
        self.task_runs = 0
        self.release = trio.Event()

    async def __call__(self) -> HttpService:
        self.calls += 1
        await self.release.wait()
        if self.calls <= self.failures:
            raise ImportError("no module named 'hypercorn'")
        service = HypercornService(self.config, self.app)
        service.tasks.append(self.task)
        return service

    async def task(self) -> None:
        self.task_runs += 1
        await trio.sleep_forever()


def counted_port(failures: int = 0) -> tuple[HttpPort, CountedLoads]:
    rules = authorization(enabled=False)
    config = load_config()
    app = listener_app(rules)
    loads = CountedLoads(config, app, failures)
    port = HttpPort(config, load=loads, tally=rules.tally, tls=None, log=structlog.get_logger("t"))
    return port, loads


async def test_the_first_connections_load_the_service_once_and_start_its_tasks() -> None:
    port, loads = counted_port()
    async with serving(port) as http:
        answers: list[int] = []

        async def get() -> None:
            answers.append((await http.get("/healthz")).status)

        with structlog.testing.capture_logs() as logs:
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(get)
                await trio.testing.wait_all_tasks_blocked()
                assert (port.service, loads.calls) == (None, 1)  # the others wait for it
                loads.release.set()
        assert answers == [200, 200, 200]
        assert (await http.get("/healthz")).status == 200
        assert (loads.calls, loads.task_runs) == (1, 1)
        assert [e["event"] for e in logs].count("http_loaded") == 1


async def test_a_service_that_cannot_load_closes_the_connection_and_the_next_tries_again() -> None:
    port, loads = counted_port(failures=1)
    loads.release.set()
    async with serving(port) as http:
        with structlog.testing.capture_logs() as logs:
            # Closed without an answer (reset, if the request was still unread).
            with pytest.raises((h11.RemoteProtocolError, trio.BrokenResourceError)):
                await http.get("/healthz")
        failed = [e for e in logs if e["event"] == "http_load_failed"]
        assert [e["reason"] for e in failed] == ["ImportError: no module named 'hypercorn'"]
        assert port.connections == {}
        assert (await http.get("/healthz")).status == 200
        assert (loads.calls, loads.task_runs) == (2, 1)


async def test_a_service_loaded_before_the_listener_serves_gets_its_tasks_then() -> None:
    port, loads = counted_port()
    loads.release.set()
    assert await port._service(structlog.get_logger("t")) is not None
    assert loads.task_runs == 0  # nothing serves yet
    async with serving(port) as http:
        await trio.testing.wait_all_tasks_blocked()
        assert loads.task_runs == 1
        assert (await http.get("/healthz")).status == 200
    assert loads.calls == 1
