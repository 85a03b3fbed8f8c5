"""The listener's application (``app``): its own routes over loopback (``/healthz``
open, ``/metrics`` for monitors), and, without sockets, what it decides before
any route runs and how it answers: the bound on a request's head, a browser at
a host of another site, a credential in the query, unknown paths, a refused
credential that ends its connection, a route that fails, and the console's
entrance."""

from __future__ import annotations

import re
from typing import Any

import pytest
import structlog
import trio
import trio.testing
from http_kit import (
    TOKENS,
    asgi_call,
    asgi_scope,
    authorization,
    bearer,
    client_connection,
    exchange,
    listener_app,
    port_for,
    serving,
)
from prometheus_client.parser import text_string_to_metric_families

from qmgr.server.client.needs import MONITORS
from qmgr.server.http.app import HttpApp
from qmgr.server.http.request_checks import HEAD_LIMIT, TOKEN_IN_URL, head_size


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


# --------------------------------------------------------------------------
# Without sockets: one ASGI call each.
# --------------------------------------------------------------------------


def padded(
    size: int,
    path: str = "/healthz",
    http_version: str = "1.1",
    headers: tuple[tuple[str, str], ...] = (),
) -> list[tuple[str, str]]:
    """``headers`` and one more that makes the head of a request of ``path``
    ``size`` bytes."""
    scope = asgi_scope(
        "GET", path, headers=[*headers, ("x-padding", "")], http_version=http_version
    )
    return [*headers, ("x-padding", "x" * (size - head_size(scope)))]


async def test_a_head_over_the_bound_is_431_with_no_body_before_any_route() -> None:
    rules = authorization()
    app = listener_app(rules)
    at_bound = await asgi_call(app, "GET", "/healthz", headers=padded(HEAD_LIMIT))
    assert at_bound.status == 200
    with structlog.testing.capture_logs() as logs:
        over = await asgi_call(
            app,
            "GET",
            "/metrics",
            headers=padded(HEAD_LIMIT + 1, "/metrics", headers=tuple(bearer("root"))),
        )
    assert (over.status, over.body) == (431, b"")
    assert (over.headers["content-length"], over.headers["connection"]) == ("0", "close")
    [refused] = [e for e in logs if e["event"] == "http_head_too_large"]
    assert (refused["size"], refused["limit"]) == (HEAD_LIMIT + 1, HEAD_LIMIT)
    assert rules.tally.denied == 0


async def test_over_http2_a_head_over_the_bound_ends_its_stream_without_connection_close() -> None:
    answer = await asgi_call(
        listener_app(authorization()),
        "GET",
        "/healthz",
        headers=padded(HEAD_LIMIT + 1, http_version="2"),
        http_version="2",
    )
    assert answer.status == 431
    assert "connection" not in answer.headers  # HTTP/2 has no such header


@pytest.mark.parametrize(
    ("path", "content_type", "body"),
    [
        ("/healthz", "text/plain; charset=utf-8", None),
        ("/api/v1/status", "application/json", "host_not_allowed"),
    ],
)
async def test_a_browser_at_a_host_of_another_site_is_421_before_anything_else(
    path: str, content_type: str, body: str | None
) -> None:
    app = listener_app(authorization())
    headers = [("host", "rebound.example:1803"), ("origin", "http://rebound.example:1803")]
    with structlog.testing.capture_logs() as logs:
        # Its head is not over the bound; a token in its query is refused after.
        answer = await asgi_call(app, "GET", path, query="access_token=x", headers=headers)
    assert answer.status == 421
    assert answer.headers["content-type"] == content_type
    expected = (
        "this queue manager does not answer browsers at 'rebound.example:1803' without TLS: "
        "use its IP address, localhost or a name of http.allowed_hosts (or TLS, tls.http)"
    )
    if body is None:
        assert answer.text == expected + "\n"
    else:
        assert answer.text == f'{{"error":{{"code":"{body}","message":"{expected}"}}}}'
    [refused] = [e for e in logs if e["event"] == "http_host_refused"]
    assert (refused["host"], refused["path"]) == ("rebound.example:1803", path)
    # Under TLS the same request is not a browser at the wrong host.
    tls = await asgi_call(
        app, "GET", "/healthz", headers=headers, connection=client_connection(tls=True)
    )
    assert tls.status == 200


async def test_a_credential_in_the_query_is_400_in_text_or_json_by_the_path() -> None:
    app = listener_app(authorization())
    text = await asgi_call(app, "GET", "/healthz", query="Bearer=x")
    assert (text.status, text.text) == (400, TOKEN_IN_URL + "\n")
    api = await asgi_call(app, "GET", "/api/v1/nothing", query="x=1&api-key=y")
    assert api.status == 400
    assert api.headers["content-type"] == "application/json"
    assert api.text == f'{{"error":{{"code":"token_in_url","message":"{TOKEN_IN_URL}"}}}}'


async def test_a_path_no_route_serves_is_404_in_json_only_under_the_api() -> None:
    app = listener_app(authorization())
    plain = await asgi_call(app, "GET", "/healthz/")
    assert (plain.status, plain.text) == (404, "Not Found")
    api = await asgi_call(app, "GET", "/api/v1/queues")  # no API without the operations
    assert api.status == 404
    assert api.text == (
        '{"error":{"code":"not_found","message":"no such route: /api/v1/queues '
        '(the routes are listed in docs/operations.md)"}}'
    )


async def test_a_websocket_is_closed_and_the_lifespan_is_ignored() -> None:
    app = listener_app(authorization())
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        raise AssertionError("nothing is read")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "websocket", "path": "/metrics", "headers": []}, receive, send)
    await app({"type": "lifespan"}, receive, send)
    assert sent == [{"type": "websocket.close", "code": 1008}]


@pytest.mark.parametrize(
    "header", ["bearer prom-token", "  Bearer   prom-token  ", "BEARER prom-token"]
)
async def test_the_bearer_scheme_is_read_without_case_or_extra_spaces(header: str) -> None:
    answer = await asgi_call(
        listener_app(authorization()), "GET", "/metrics", headers=[("authorization", header)]
    )
    assert answer.status == 200, answer.text


async def test_a_client_certificate_is_the_principal_unless_a_token_is_shown() -> None:
    app = listener_app(authorization())
    prom = client_connection(certificate="prom")
    assert (await asgi_call(app, "GET", "/metrics", connection=prom)).status == 200
    carol = await asgi_call(
        app, "GET", "/metrics", connection=client_connection(certificate="carol")
    )
    assert carol.status == 403
    assert carol.text.startswith("access denied: ")
    # A token shown with the certificate is the one that counts.
    shown = await asgi_call(
        app,
        "GET",
        "/metrics",
        headers=bearer("carol"),
        connection=client_connection(certificate="prom"),
    )
    assert shown.status == 403


async def test_a_refused_credential_closes_its_connection_once_answered() -> None:
    app = listener_app(authorization())
    failed: list[str] = []
    app.on_failure = failed.append
    connection = client_connection()
    refused = await asgi_call(
        app, "GET", "/metrics", headers=[("authorization", "Bearer wrong")], connection=connection
    )
    assert refused.status == 401
    assert refused.text == "the Authorization header must be 'Bearer TOKEN' with a valid token\n"
    assert refused.headers["www-authenticate"] == 'Bearer realm="qmgr"'
    assert refused.headers["connection"] == "close"
    assert (connection.close_after, failed) == (True, ["127.0.0.1:1"])
    # Whatever comes next on it is answered with the same close.
    after = await asgi_call(app, "GET", "/healthz", connection=connection)
    assert (after.status, after.headers["connection"]) == (200, "close")
    assert app.authorization.tally.authentication_failures == 1
    assert not connection.scope.cancel_called  # HTTP/1: the server closes it after the answer


async def test_over_http2_a_refused_credential_ends_the_connection_after_its_answer() -> None:
    app = listener_app(authorization())
    connection = client_connection()
    answer = await asgi_call(
        app,
        "GET",
        "/metrics",
        headers=[("authorization", "Bearer wrong")],
        connection=connection,
        http_version="2",
    )
    assert answer.status == 401
    assert "connection" not in answer.headers
    assert connection.scope.cancel_called


async def test_a_request_marks_its_connection_busy_only_while_it_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app = listener_app(authorization(enabled=False))
    connection = client_connection()
    seen: list[int] = []

    class Watching:
        async def scrape(self, accept: str | None) -> tuple[bytes, str]:
            seen.append(connection.active)
            return b"", "text/plain"

    app.exposition = Watching()
    autojump_clock.jump(5.0)
    assert (await asgi_call(app, "GET", "/metrics", connection=connection)).status == 200
    assert seen == [1]
    assert (connection.active, connection.idle_since) == (0, trio.current_time())


async def test_a_route_that_fails_is_a_500_and_is_logged() -> None:
    app = listener_app(authorization(enabled=False))

    class Broken:
        async def scrape(self, accept: str | None) -> tuple[bytes, str]:
            raise RuntimeError("the store is gone")

    app.exposition = Broken()
    with structlog.testing.capture_logs() as logs:
        answer = await asgi_call(app, "GET", "/metrics")
    assert (answer.status, answer.text) == (500, "internal error\n")
    assert [e["log_level"] for e in logs if e["event"] == "http_request_failed"] == ["error"]


async def test_the_root_leads_to_the_console_once_it_is_served() -> None:
    app = listener_app(authorization())
    assert (await asgi_call(app, "GET", "/")).status == 404
    app.serve_console([])
    for path in ("/", "/console/"):
        answer = await asgi_call(app, "GET", path)
        assert (answer.status, answer.headers["location"]) == (303, "/console")
    assert (await asgi_call(app, "POST", "/")).status == 405


async def test_without_auth_required_a_route_s_need_refuses_nobody() -> None:
    rules = authorization(enabled=False)
    app: HttpApp = listener_app(rules)
    assert app.refusal(None, None, MONITORS, structlog.get_logger()) is None
    assert (await asgi_call(app, "GET", "/metrics")).status == 200
    assert rules.tally.denied == 0


async def test_refusals_a_peer_repeats_are_all_counted_but_logged_at_a_bounded_rate() -> None:
    # Each request without a principal is refused and counted; a client that
    # repeats them cannot make the daemon write a warning for each.
    rules = authorization()
    async with serving(port_for(rules)) as http:
        with structlog.testing.capture_logs() as logs:
            for _ in range(30):
                assert (await http.get("/metrics")).status == 401
            for _ in range(3):  # a principal's own refusals are logged apart
                assert (await http.get("/metrics", bearer("carol"))).status == 403
    denied = [entry for entry in logs if entry["event"] == "access_denied"]
    assert [entry.get("principal") for entry in denied] == [None, "carol"]
    assert rules.tally.denied == 33
