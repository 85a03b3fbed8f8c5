"""The HTTP listener in-process over loopback: routes, authentication, authorization
through the one ``Authorization``, refusals of bad input, and the bound on idle
connections; HTTPS with a client certificate as the principal."""

from __future__ import annotations

import re
import ssl
from collections.abc import Sequence
from pathlib import Path

import h11
import pytest
import structlog
import trio
import trio.testing
from http_kit import Served, exchange, loader, serving
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from qmgr.certs import init_ca, issue
from qmgr.config import Config, load_config
from qmgr.core.tokens import TokenBook, hash_token
from qmgr.server.client.authorization import Authorization
from qmgr.server.http.app import HttpApp
from qmgr.server.http.exposition import Exposition, SeriesFamily
from qmgr.server.http.port import HttpPort, HttpService
from qmgr.server.http.request_checks import HEAD_LIMIT
from qmgr.server.http.service import HypercornService
from qmgr.server.tls import load_contexts

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


def port_for(
    rules: Authorization,
    *settings: str,
    stopping: bool = False,
    tls: ssl.SSLContext | None = None,
) -> HttpPort:
    config = load_config(settings=settings)
    app = HttpApp(
        authorization=rules,
        exposition=Exposition(CollectorRegistry(), OneQueue()),
        stopping=lambda: stopping,
        log=structlog.get_logger("test"),
    )
    return HttpPort(
        config,
        load=loader(config, app),
        tally=rules.tally,
        tls=tls,
        log=structlog.get_logger("test"),
    )


async def test_healthz_answers_without_a_principal_and_metrics_needs_a_monitor() -> None:
    rules = authorization()
    async with serving(port_for(rules)) as http:
        health = await http.get("/healthz")
        assert (health.status, health.text) == (200, "ok\n")
        # A token on the open route is not even looked at.
        assert (await http.get("/healthz", [("authorization", "Bearer nonsense")])).status == 200
        nobody = await http.get("/metrics")
        assert nobody.status == 401
        assert nobody.headers["www-authenticate"] == 'Bearer realm="qmgr"'
        carol = await http.get("/metrics", bearer("carol"))
        assert carol.status == 403
        assert "'carol' may not read the metrics" in carol.text
        for allowed in ("prom", "root"):  # a monitor (through its group), an administrator
            answer = await http.get("/metrics", bearer(allowed))
            assert answer.status == 200, answer.text
            assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
            [family] = text_string_to_metric_families(answer.text)
            assert [(s.labels, s.value) for s in family.samples] == [({"queue": "q"}, 3.0)]
    assert (rules.tally.denied, rules.tally.authentication_failures) == (2, 0)


@pytest.mark.parametrize(
    "header",
    ["Bearer wrong-token", "Basic cHJvbTpwcm9tLXRva2Vu", "Bearer", "Bearer " + "x" * 513],
    ids=["wrong token", "another scheme", "no token", "too long"],
)
async def test_a_credential_that_is_not_a_valid_bearer_token_is_refused(header: str) -> None:
    rules = authorization()
    async with serving(port_for(rules)) as http:
        answer = await http.get("/metrics", [("authorization", header)])
    assert answer.status == 401
    assert "Bearer TOKEN" in answer.text
    assert rules.tally.authentication_failures == 1


async def test_a_token_in_the_query_string_is_refused_wherever_it_goes() -> None:
    rules = authorization()
    async with serving(port_for(rules)) as http:
        with structlog.testing.capture_logs() as logs:
            for path in (
                f"/metrics?access_token={TOKENS['prom']}",
                "/healthz?Token=x",
                "/nowhere?a=1&api_key=x",
            ):
                answer = await http.get(path, bearer("prom"))
                assert answer.status == 400, path
                assert "only from the Authorization header" in answer.text
        assert (await http.get("/metrics?name=x", bearer("prom"))).status == 200
    refused = [entry for entry in logs if entry["event"] == "token_in_query_refused"]
    assert [entry["parameter"] for entry in refused] == ["access_token", "Token", "api_key"]


async def test_unknown_paths_and_other_methods_are_refused() -> None:
    async with serving(port_for(authorization())) as http:
        assert (await http.get("/", bearer("prom"))).status == 404
        assert (await http.get("/metrics/x", bearer("prom"))).status == 404
        assert (await http.get("/api/queues", bearer("root"))).status == 404
        client = await http.connect()
        assert (await client.get("/metrics", bearer("prom"), method="POST")).status == 405
        head = await client.get("/healthz", method="HEAD")
        assert (head.status, head.body) == (200, b"")
        await client.aclose()


async def test_without_auth_required_every_caller_reads_the_metrics() -> None:
    rules = authorization(enabled=False)
    async with serving(port_for(rules)) as http:
        assert (await http.get("/metrics")).status == 200
        # A token, if one is shown, must still be a valid one.
        assert (await http.get("/metrics", [("authorization", "Bearer wrong")])).status == 401


async def test_healthz_says_when_the_queue_manager_is_stopping() -> None:
    async with serving(port_for(authorization(), stopping=True)) as http:
        answer = await http.get("/healthz")
    assert (answer.status, answer.text) == (503, "stopping\n")


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


async def test_an_idle_keep_alive_connection_is_closed_after_its_timeout() -> None:
    port = port_for(authorization(enabled=False), "http.keep_alive_timeout=0.2")
    async with serving(port) as http:
        client = await http.connect()
        assert (await client.get("/healthz")).status == 200
        assert (await client.get("/healthz")).status == 200  # kept alive
        with trio.fail_after(5):
            assert await client.stream.receive_some(1) == b""
        await client.aclose()


async def test_a_request_head_that_never_ends_is_refused_at_its_bound() -> None:
    async with serving(port_for(authorization(enabled=False))) as http:
        async with await trio.open_tcp_stream("127.0.0.1", http.number) as stream:
            await stream.send_all(b"GET /healthz HTTP/1.1\r\nx-padding: ")
            received = b""
            with trio.fail_after(5):
                # Up to 40 KiB in pieces, more than twice the bound, until the
                # server answers (it closes the connection after its answer).
                for piece in range(40):
                    await stream.send_all(b"x" * 1024)
                    if piece < 15:  # not yet at the bound
                        continue
                    with trio.move_on_after(0.05):
                        received = await stream.receive_some(4096)
                    if received:
                        break
    assert received.startswith(b"HTTP/1.1 431"), received


def _undated(response: bytes) -> bytes:
    """``response`` without its date, in lower case (h11 writes ``Connection``
    when the request asked for the connection to close)."""
    return re.sub(rb"\r\ndate: [^\r]*", b"", response.lower())


def _head_of(size: int, target: str = "/healthz") -> bytes:
    """A request whose line and headers are ``size`` bytes, padded with a header."""
    start = f"GET {target} HTTP/1.1\r\nhost: qmgr\r\nconnection: close\r\nx-padding: ".encode()
    return start + b"x" * (size - len(start) - 4) + b"\r\n\r\n"


async def test_a_request_head_that_arrives_whole_is_refused_at_its_bound_too() -> None:
    rules = authorization()
    with structlog.testing.capture_logs() as logs:
        async with serving(port_for(rules)) as http:

            async def sent(request: bytes) -> bytes:
                async with await trio.open_tcp_stream("127.0.0.1", http.number) as stream:
                    return _undated(await exchange(stream, request))

            # Hypercorn's answer to a head that grows past the bound before its end.
            growing = await sent(
                b"GET /healthz HTTP/1.1\r\nhost: qmgr\r\nx-padding: " + b"x" * 20000
            )
            assert growing == b"http/1.1 431 \r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            # A head at the bound is served; one byte more gets the same answer
            # whatever the route (before any authentication), and the
            # connection is closed after it.
            assert (await sent(_head_of(HEAD_LIMIT))).startswith(b"http/1.1 200 ")
            for target in ("/healthz", "/metrics", "/api/v1/status", "/console/login", "/nowhere"):
                assert await sent(_head_of(HEAD_LIMIT + 1, target)) == growing, target
            # A long query string is part of the head too.
            query = b"GET /healthz?q=" + b"a" * 17000 + b" HTTP/1.1\r\nhost: qmgr\r\n\r\n"
            assert await sent(query) == growing
    refused = [e for e in logs if e["event"] == "http_head_too_large"]
    assert len(refused) == 6
    assert refused[0]["size"] == HEAD_LIMIT + 1
    assert rules.tally.denied == 0  # refused before any route's need was checked


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


async def test_a_client_that_never_reads_is_let_go_after_the_request_timeout() -> None:
    port = port_for(
        authorization(enabled=False), "http.max_connections=1", "http.request_timeout=0.5"
    )
    async with serving(port) as http:
        reader = trio.socket.socket()
        reader.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF, 4096)
        await reader.connect(("127.0.0.1", http.number))
        stream = trio.SocketStream(reader)
        # Requests for answers it never reads, until the server stops taking them.
        request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
        with trio.move_on_after(10):
            while True:
                with trio.move_on_after(1) as blocked:
                    try:
                        await stream.send_all(request * 64)
                    except trio.BrokenResourceError:
                        break  # the server already let it go (a loaded machine)
                if blocked.cancelled_caught:
                    break
        for _ in range(200):  # polled: the server closes it on its own deadline
            if not port.connections:
                break
            await trio.sleep(0.05)
        assert not port.connections
        assert (await http.get("/healthz")).status == 200  # room again
        await stream.aclose()


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
    app = HttpApp(
        authorization=rules,
        exposition=Exposition(CollectorRegistry(), OneQueue()),
        stopping=lambda: False,
        log=structlog.get_logger("test"),
    )
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
