"""What serves the listener's connections (``service``): Hypercorn's bounds from
the configuration (an idle keep-alive connection, a head that never ends, a
client that never reads its answers, over loopback), the names a browser may
use, and the application assembled with its metrics and, given the operations,
its JSON API and console."""

from __future__ import annotations

import math
from pathlib import Path

import structlog
import trio
from http_kit import asgi_call, authorization, listener_app, port_for, serving
from metrics_kit import sources_of
from server.client.kit import enable_permissions, open_services

import storage
from qmgr.config import load_config
from qmgr.server.client.operations import Operations
from qmgr.server.http.rates import RateHistory
from qmgr.server.http.request_checks import HEAD_LIMIT
from qmgr.server.http.service import HypercornService, host_names, http_service, hypercorn_config


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


def test_the_names_a_browser_may_use_come_from_the_configuration() -> None:
    config = load_config(
        settings=(
            "server.name=QM-A",
            "http.listen=qm1.example.net:1803",
            'http.allowed_hosts=["Console.Example.net"]',
        )
    )
    assert host_names(config) == {"qm-a", "qm1.example.net", "console.example.net"}


def test_the_listener_s_own_host_is_a_name_without_its_brackets() -> None:
    config = load_config(settings=("server.name=qm", "http.listen=[::1]:1803"))
    assert host_names(config) == {"qm", "::1"}
    assert host_names(load_config(settings=("server.name=qm", 'http.listen=""'))) == {"qm"}


def test_hypercorn_s_bounds_come_from_the_configuration() -> None:
    config = load_config(settings=("http.keep_alive_timeout=7.5", "http.request_timeout=2.2"))
    settings = hypercorn_config(config)
    assert settings.keep_alive_timeout == 7.5
    assert settings.read_timeout == 3  # whole seconds, rounded up
    assert settings.h11_max_incomplete_size == HEAD_LIMIT
    assert settings.h2_max_header_list_size == HEAD_LIMIT
    assert settings.h2_max_concurrent_streams == 8
    assert settings.include_server_header is False
    assert (
        math.ceil(load_config().http_request_timeout)
        == hypercorn_config(load_config()).read_timeout
    )


def test_a_refused_credential_reaches_the_port_through_the_application() -> None:
    app = listener_app(authorization())
    service = HypercornService(load_config(), app)
    failed: list[str] = []
    service.on_failure = failed.append
    assert service.on_failure is app.on_failure
    app.on_failure("127.0.0.1:1")
    assert failed == ["127.0.0.1:1"]
    assert service.tasks == []


async def test_without_the_operations_the_service_has_metrics_and_no_api_or_console(
    store: storage.Store, tmp_path: Path
) -> None:
    service = http_service(
        load_config(),
        sources=sources_of(store, tmp_path),
        authorization=authorization(enabled=False),
        stopping=lambda: False,
        log=structlog.get_logger("test"),
    )
    assert service.tasks == []
    metrics = await asgi_call(service.app, "GET", "/metrics")
    assert metrics.status == 200
    assert "\nqmgr_build_info{" in metrics.text  # the collector's
    assert "\nprocess_cpu_seconds_total " in metrics.text  # the process collector's
    for path in ("/console", "/console/login", "/api/v1/status", "/"):
        assert (await asgi_call(service.app, "GET", path)).status == 404, path


async def test_with_the_operations_the_service_serves_the_api_and_the_console(
    tmp_path: Path,
) -> None:
    config = load_config(settings=("server.name=QM-A", "http.session_timeout=42"))
    history = RateHistory()
    async with open_services(tmp_path / "s") as services:
        rules = enable_permissions(services)
        service = http_service(
            config,
            sources=sources_of(services.core.store, tmp_path, core=services.core),
            authorization=rules,
            stopping=lambda: False,
            log=structlog.get_logger("test"),
            operations=Operations(services),
            history=history,
        )
        [expire] = service.tasks
        console = expire.__self__  # type: ignore[attr-defined]
        assert console.history is history
        assert console.sessions.idle_timeout == 42
        assert (await asgi_call(service.app, "GET", "/console/login")).status == 200
        root = await asgi_call(service.app, "GET", "/")
        assert (root.status, root.headers["location"]) == (303, "/console")
        status = await asgi_call(service.app, "GET", "/api/v1/status")
        assert status.status == 401  # auth.required: the API's refusal, not a 404
        # A browser may use the queue manager's name; not another.
        browser = [("host", "qm-a:1803"), ("origin", "http://qm-a:1803")]
        assert (await asgi_call(service.app, "GET", "/healthz", headers=browser)).status == 200
        other = [("host", "qm-b:1803"), ("origin", "http://qm-b:1803")]
        assert (await asgi_call(service.app, "GET", "/healthz", headers=other)).status == 421
