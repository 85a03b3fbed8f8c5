"""The JSON API (``api``, ``/api/v1/...``) over the ASGI application, without sockets: the
daemon's parts in-process (a real store, core and committer), each request an
ASGI call. The routes' needs against the client request table, a queue's
messages paged, purge and moves (with their log events and principal), the
refusals of bad input, and authentication and authorization."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
from http_kit import (
    DirectRequests,
    asgi_call,
    asgi_scope,
    client_connection,
    exchange,
    operations_app,
    port_of,
    serving,
)
from server.client.kit import enable_permissions, open_services

from qmgr.client import Message
from qmgr.client.shapes import message_json
from qmgr.server.client.handlers import REQUESTS
from qmgr.server.client.handlers.replies import queue_info
from qmgr.server.client.operations import Operations
from qmgr.server.client.services import Services
from qmgr.server.http import api as api_module
from qmgr.server.http.api import API_ROUTES, BODY_BOUND, MAX_BODY
from qmgr.server.http.app import HttpApp
from wire import client as cf

DOCS = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    json: Any


@dataclass
class Api(DirectRequests):
    """The application over in-process services, and a way to call it (and to
    make client requests directly, to set things up)."""

    app: HttpApp
    services: Services
    operations: Operations

    async def call(
        self,
        method: str,
        path: str,
        body: bytes | dict[str, Any] = b"",
        *,
        query: str = "",
        token: str | None = None,
        certificate: str | None = None,
        cut: int | None = None,
        headers: tuple[tuple[str, str], ...] = (),
        content_type: str | None = "application/json",
    ) -> Reply:
        """One request: a body (bytes, or an object as JSON) is sent with
        ``content_type`` (None: no ``Content-Type``)."""
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        headers = (*headers, *(() if token is None else [("authorization", f"Bearer {token}")]))
        if data and content_type is not None:
            headers = (*headers, ("content-type", content_type))
        answer = await asgi_call(
            self.app,
            method,
            path,
            data,
            query=query,
            headers=headers,
            connection=client_connection(certificate=certificate),
            cut=cut,
        )
        assert answer.headers["content-type"] == "application/json", answer.body
        return Reply(answer.status, answer.headers, json.loads(answer.body))


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with open_services(tmp_path / "s") as services:
        operations = Operations(services)
        enable_permissions(services, enabled=False)
        assert services.authorization is not None
        app = operations_app(services.authorization, operations)
        yield Api(app, services, operations)


def test_each_route_needs_what_its_client_requests_need_and_is_documented() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    for route in API_ROUTES:
        assert route.requests, route.path
        assert route.needs() == tuple(REQUESTS[r].need for r in route.requests)
        shown = route.path.replace("{name:path}", "NAME")
        assert f"`{route.method} {shown}`" in docs, f"{route.method} {shown} is not documented"


async def test_a_queue_s_messages_in_pages_bounded_and_peeked_only(api: Api) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    await api.send("orders", b"first", label="one")
    await api.send("orders", b"\xff\xfe binary")
    await api.send("orders", "é".encode() * (BODY_BOUND // 2 + 10))  # over the bound
    for body in (b"4", b"5"):
        await api.send("orders", body)
    seen: list[dict[str, Any]] = []
    after = 0
    while True:
        page = await api.call("GET", "/api/v1/queues/orders/messages", query=f"after={after}&max=2")
        assert page.status == 200, page.json
        assert page.json["queue"] == "orders"
        seen += page.json["messages"]
        if page.json["next_after"] is None:
            break
        after = page.json["next_after"]
    assert [m["lookup_id"] for m in seen] == sorted(m["lookup_id"] for m in seen)
    assert len(seen) == 5
    first, binary, large = seen[:3]
    # The shape of `qmgr peek --json`, the body always base64 and bounded.
    peeked = await api.run(cf.PeekRange(queue="orders", after=0, max_count=1))
    cli = message_json(Message.from_wire(peeked.messages[0]))
    assert set(cli) <= set(first)
    assert {k: first[k] for k in cli if not k.startswith("body")} == {
        k: v for k, v in cli.items() if not k.startswith("body")
    }
    assert (first["body"], first["body_encoding"], first["text_preview"]) == (
        "Zmlyc3Q=",
        "base64",
        "first",
    )
    assert (binary["text_preview"], binary["body_truncated"]) == (None, False)
    assert large["body_truncated"] is True
    assert large["body_size"] == 2 * (BODY_BOUND // 2 + 10)
    assert large["text_preview"] == "é" * 1024
    # Peek only: everything is still there.
    again = await api.call("GET", "/api/v1/queues/orders/messages", query="max=1000")
    assert [m["id"] for m in again.json["messages"]] == [m["id"] for m in seen]
    assert again.json["next_after"] is None


@pytest.mark.parametrize("path", ["/api/v1/queues", "/api/v1/status"])
async def test_a_long_whole_list_is_shaped_and_encoded_away_from_the_event_loop(
    api: Api, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    for name in ("a", "b", "c"):
        await api.run(cf.CreateQueue(name=name))
    core = api.services.core
    infos = tuple(queue_info(q, 0) for q in core.queues.all() if q.name in "abc")
    api.services.queue_infos = lambda: infos
    api.services.status = lambda: cf.StatusInfo(
        qm_name="test",
        qm_guid=api.services.qm_guid,
        server_version="test",
        started_at=1.0,
        connections=0,
        open_transactions=0,
        commits=0,
        aborts=0,
        batches=0,
        uncommitted_bytes=0,
        erasing=0,
        queues=infos,
    )
    short = await api.call("GET", path)
    threads: list[object] = []
    run_sync = trio.to_thread.run_sync

    async def spy(function: Any, *args: Any, **kwargs: Any) -> Any:
        threads.append(function)
        return await run_sync(function, *args, **kwargs)

    monkeypatch.setattr(trio.to_thread, "run_sync", spy)
    monkeypatch.setattr(api_module, "ENCODE_AWAY", 2)  # three queues are a long list
    long = await api.call("GET", path)
    assert len(threads) == 1  # shaped and encoded in a worker thread, once
    assert (long.status, long.headers["content-type"]) == (200, "application/json")
    for reply in (short, long):  # its uptime moves on
        if isinstance(reply.json, dict):
            reply.json.pop("uptime_seconds", None)
    assert long.json == short.json
    assert len(short.json if path.endswith("queues") else short.json["queues"]) == 3


async def test_purge_and_moves_are_the_client_requests_with_their_events(api: Api) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    for body in (b"a", b"b", b"c"):
        await api.send("orders", body)
    page = await api.call("GET", "/api/v1/queues/orders/messages")
    first = page.json["messages"][0]
    with structlog.testing.capture_logs() as logs:
        moved = await api.call(
            "POST",
            "/api/v1/queues/orders/move",
            {"to": "orders;poison", "lookup_id": first["lookup_id"]},
        )
        assert moved.status == 200, moved.json
        assert moved.json["count"] == 1
        back = await api.call(
            "POST", "/api/v1/queues/orders;poison/move", {"to": "orders", "all": True}
        )
        assert back.json["count"] == 1
        again = await api.call("GET", "/api/v1/queues/orders/messages")
        assert first["id"] in [m["id"] for m in again.json["messages"]]  # the id is kept
        purged = await api.call("POST", "/api/v1/queues/orders/purge")
    assert (purged.status, purged.json) == (200, {"queue": "orders", "purged": 3})
    events = [e for e in logs if e["event"] in ("messages_moved", "queue_purged")]
    assert [e["event"] for e in events] == ["messages_moved", "messages_moved", "queue_purged"]
    assert all(e["path"].startswith("/api/v1/queues/") for e in events)


async def test_unknown_queues_and_xids_are_the_daemon_s_errors(api: Api) -> None:
    missing = await api.call("POST", "/api/v1/queues/nowhere/purge")
    assert missing.status == 404
    assert missing.json["error"]["code"] == "queue_not_found"
    assert "nowhere" in missing.json["error"]["message"]
    peek = await api.call("GET", "/api/v1/queues/nowhere/messages")
    assert (peek.status, peek.json["error"]["code"]) == (404, "queue_not_found")
    xid = await api.call("POST", "/api/v1/transactions/commit", {"xid": "no-such-xid"})
    assert (xid.status, xid.json["error"]["code"]) == (404, "transaction_not_found")
    listed = await api.call("GET", "/api/v1/transactions", query="all=true")
    assert (listed.status, listed.json) == (200, [])
    peering = await api.call("GET", "/api/v1/outgoing")  # no peering in these parts
    assert (peering.status, peering.json["error"]["code"]) == (501, "not_supported")


@pytest.mark.parametrize(
    ("method", "path", "body", "query", "status", "code"),
    [
        ("GET", "/api/v1/nothing", b"", "", 404, "not_found"),
        ("GET", "/api/v2/status", b"", "", 404, "not_found"),
        ("DELETE", "/api/v1/queues", b"", "", 405, "method_not_allowed"),
        ("GET", "/api/v1/queues/q/purge", b"", "", 405, "method_not_allowed"),
        ("POST", "/api/v1/queues/q/purge", b"{not json", "", 400, "bad_request"),
        ("POST", "/api/v1/queues/q/purge", b"[1]", "", 400, "bad_request"),
        ("POST", "/api/v1/queues/q/purge", b" " * (MAX_BODY + 1), "", 413, "payload_too_large"),
        ("POST", "/api/v1/queues/q/move", b"{}", "", 400, "bad_request"),
        ("POST", "/api/v1/queues/q/move", b'{"to": 5}', "", 400, "bad_request"),
        ("POST", "/api/v1/transactions/abort", b'{"xid": true}', "", 400, "bad_request"),
        ("GET", "/api/v1/queues/q/messages", b"", "max=0", 400, "bad_request"),
        ("GET", "/api/v1/queues/q/messages", b"", "max=1001", 400, "bad_request"),
        ("GET", "/api/v1/queues/q/messages", b"", "after=-1", 400, "bad_request"),
        ("GET", "/api/v1/transactions", b"", "all=maybe", 400, "bad_request"),
        ("GET", "/api/v1/status", b"", "access_token=x", 400, "token_in_url"),
    ],
)
async def test_bad_input_is_refused_in_json(
    api: Api, method: str, path: str, body: bytes, query: str, status: int, code: str
) -> None:
    await api.run(cf.CreateQueue(name="q"))
    reply = await api.call(method, path, body, query=query)
    assert (reply.status, reply.json["error"]["code"]) == (status, code), reply.json
    if status == 405:
        assert reply.headers["allow"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/queues/orders/move", b'{"to": "orders;poison", "lookupId": 3}'),
        ("/api/v1/queues/orders/move", b'{"to": "orders;poison", "every": true}'),
        ("/api/v1/queues/orders/purge", b'{"queue": "other"}'),
        ("/api/v1/outgoing/pause", b'{"destination": "x", "dest": "y"}'),
        ("/api/v1/transactions/abort", b'{"xid": "x", "commit": true}'),
    ],
    ids=["move-misspelt-lookup-id", "move-misspelt-all", "purge", "outgoing", "resolve"],
)
async def test_a_field_an_action_does_not_take_is_refused_before_it_acts(
    api: Api, path: str, body: bytes
) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    for text in (b"a", b"b", b"c"):
        await api.send("orders", text)
    reply = await api.call("POST", path, body)
    assert (reply.status, reply.json["error"]["code"]) == (400, "bad_request"), reply.json
    assert "unknown field" in reply.json["error"]["message"]
    page = await api.call("GET", "/api/v1/queues/orders/messages")
    assert len(page.json["messages"]) == 3  # neither moved nor purged


async def test_with_auth_required_nobody_is_asked_and_each_request_is_checked(
    api: Api,
) -> None:
    authorization = enable_permissions(api.services)  # root administers; alice has a token
    api.app.authorization = authorization
    await api.run(cf.CreateQueue(name="orders"))  # made by nobody: its list is empty
    nobody = await api.call("GET", "/api/v1/queues")
    assert (nobody.status, nobody.json["error"]["code"]) == (401, "unauthenticated")
    assert nobody.headers["www-authenticate"] == 'Bearer realm="qmgr"'
    wrong = await api.call("GET", "/api/v1/queues", token="wrong")
    assert (wrong.status, wrong.json["error"]["code"]) == (401, "unauthenticated")
    listed = await api.call("GET", "/api/v1/queues", token="alice-token")  # open
    assert listed.status == 200
    with structlog.testing.capture_logs() as logs:
        denied = await api.call("POST", "/api/v1/queues/orders/purge", token="alice-token")
        pause = await api.call(
            "POST", "/api/v1/outgoing/pause", {"destination": "x"}, token="alice-token"
        )
    assert (denied.status, denied.json["error"]["code"]) == (403, "access_denied")
    assert "'alice'" in denied.json["error"]["message"]
    assert (pause.status, pause.json["error"]["code"]) == (403, "access_denied")
    [refusal, _] = [e for e in logs if e["event"] == "access_denied"]
    assert (refusal["principal"], refusal["request"]) == ("alice", "PurgeQueue")
    root = await api.call("POST", "/api/v1/queues/orders/purge", certificate="root")
    assert (root.status, root.json["purged"]) == (200, 0)
    assert (authorization.tally.denied, authorization.tally.authentication_failures) == (3, 1)


async def test_a_move_of_a_message_the_queue_does_not_hold_is_message_not_found(
    api: Api,
) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    await api.send("orders", b"a")
    missing = await api.call(
        "POST", "/api/v1/queues/orders/move", {"to": "orders;poison", "lookup_id": 999}
    )
    assert (missing.status, missing.json["error"]["code"]) == (404, "message_not_found")
    assert "message 999 is not in 'orders'" in missing.json["error"]["message"]
    # A queue that does not exist is still queue_not_found.
    nowhere = await api.call(
        "POST", "/api/v1/queues/nowhere/move", {"to": "orders", "lookup_id": 999}
    )
    assert (nowhere.status, nowhere.json["error"]["code"]) == (404, "queue_not_found")


async def test_a_stopping_queue_manager_refuses_the_api(api: Api) -> None:
    api.services.stopping = True
    reply = await api.call("GET", "/api/v1/queues")
    assert (reply.status, reply.json["error"]["code"]) == (503, "shutting_down")
    await trio.lowlevel.checkpoint()


@pytest.mark.parametrize("lookup_id", [-1, 2**64, -(2**70)])
async def test_a_lookup_id_out_of_range_is_a_bad_request_naming_it(
    api: Api, lookup_id: int
) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    await api.send("orders", b"a")
    body = {"to": "orders;poison", "lookup_id": lookup_id}
    reply = await api.call("POST", "/api/v1/queues/orders/move", body)
    assert (reply.status, reply.json["error"]["code"]) == (400, "bad_request")
    assert reply.json["error"]["message"] == (
        f"'lookup_id' must be a whole number from 0 to {2**64 - 1}, not {lookup_id}"
    )
    page = await api.call("GET", "/api/v1/queues/orders/messages")
    assert len(page.json["messages"]) == 1  # nothing moved


async def test_a_long_number_out_of_range_is_named_by_its_length_not_echoed(api: Api) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    for digits in ("9" * 4000, "-" + "9" * 4000):
        body = b'{"to": "orders;poison", "lookup_id": ' + digits.encode() + b"}"
        moved = await api.call("POST", "/api/v1/queues/orders/move", body)
        assert (moved.status, moved.json["error"]["message"]) == (
            400,
            f"'lookup_id' must be a whole number from 0 to {2**64 - 1}, "
            f"not a number of {len(digits)} digits",
        )
    shown = "9" * 40  # up to 40 characters, the value itself, as for a query
    body = b'{"to": "orders;poison", "lookup_id": ' + shown.encode() + b"}"
    moved = await api.call("POST", "/api/v1/queues/orders/move", body)
    assert moved.json["error"]["message"].endswith(f"not {shown}")


async def test_numbers_too_long_are_bad_requests_that_do_not_echo_them(api: Api) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    digits = "9" * 5000
    body = b'{"to": "orders;poison", "lookup_id": ' + digits.encode() + b"}"
    moved = await api.call("POST", "/api/v1/queues/orders/move", body)
    assert (moved.status, moved.json["error"]["message"]) == (
        400,
        "the body has a number too long",
    )
    page = await api.call("GET", "/api/v1/queues/orders/messages", query=f"after={digits}")
    assert (page.status, page.json["error"]["message"]) == (
        400,
        f"after must be a whole number from 0 to {2**64 - 1}, not a value of 5000 characters",
    )


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/queues/orders/purge", b"{}       "),
        ("/api/v1/queues/orders/move", b'{"to": "orders;poison", "all": true}'),
    ],
    ids=["purge", "move"],
)
async def test_a_body_the_client_does_not_finish_is_refused_as_its_fault(
    api: Api, path: str, body: bytes
) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    await api.send("orders", b"a")
    with structlog.testing.capture_logs() as logs:
        reply = await api.call("POST", path, body, cut=2)
    assert (reply.status, reply.json["error"]["code"]) == (400, "bad_request"), reply.json
    assert "the client closed the connection or stopped sending" in reply.json["error"]["message"]
    [gone] = [e for e in logs if e["event"] == "http_client_disconnected"]
    assert (gone["log_level"], gone["received"], gone["declared"]) == ("info", 2, str(len(body)))
    assert [e for e in logs if e["log_level"] in ("error", "critical")] == []
    page = await api.call("GET", "/api/v1/queues/orders/messages")
    assert len(page.json["messages"]) == 1  # neither purged nor moved


async def test_over_a_socket_a_client_that_stalls_mid_body_gets_a_400(api: Api) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    await api.send("orders", b"a")
    port = port_of(api.app, "http.request_timeout=0.5")
    with structlog.testing.capture_logs() as logs:
        async with serving(port) as http:
            async with await trio.open_tcp_stream("127.0.0.1", http.number) as stream:
                # Two bytes of ten, then nothing: the read times out.
                answer = await exchange(
                    stream,
                    b"POST /api/v1/queues/orders/purge HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Length: 10\r\n\r\n{}",
                )
            async with await trio.open_tcp_stream("127.0.0.1", http.number) as stream:
                # Two bytes of ten, and the end of what the client sends.
                await stream.send_all(
                    b"POST /api/v1/queues/orders/purge HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Length: 10\r\n\r\n{}"
                )
                await stream.send_eof()
                closed = await exchange(stream, b"")
    head, _, text = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), answer
    assert json.loads(text)["error"]["code"] == "bad_request"
    assert closed.startswith(b"HTTP/1.1 400 "), closed
    assert [e["event"] for e in logs].count("http_client_disconnected") == 2
    assert [e for e in logs if e["log_level"] in ("error", "critical")] == []
    page = await api.call("GET", "/api/v1/queues/orders/messages")
    assert len(page.json["messages"]) == 1  # not purged


async def test_head_is_get_without_its_body_on_the_api_s_get_routes(api: Api) -> None:
    async with serving(port_of(api.app)) as http:
        client = await http.connect()
        head = await client.get("/api/v1/queues", method="HEAD")
        got = await client.get("/api/v1/queues")  # the same connection: no body came before
        await client.aclose()
    assert (head.status, head.body) == (200, b"")
    assert head.headers["content-type"] == "application/json"
    assert head.headers["content-length"] == got.headers["content-length"]
    assert (got.status, json.loads(got.body)) == (200, [])
    refused = await api.call("DELETE", "/api/v1/queues")
    assert refused.headers["allow"] == "GET, HEAD"
    post_only = await api.call("HEAD", "/api/v1/queues/q/purge")
    assert post_only.headers["allow"] == "POST"


@pytest.mark.parametrize(
    ("headers", "refused"),
    [
        ((("origin", "https://evil.example"), ("host", "127.0.0.1:1803")), True),
        ((("origin", "null"), ("host", "127.0.0.1:1803")), True),
        ((("sec-fetch-site", "cross-site"),), True),
        ((("sec-fetch-site", "same-site"), ("origin", "http://127.0.0.1:1803")), True),
        ((("origin", "http://127.0.0.1:1803"), ("host", "127.0.0.1:1803")), False),
        ((("sec-fetch-site", "same-origin"), ("origin", "http://127.0.0.1:1803")), False),
        ((), False),  # not a browser's page: curl, the SDK, a script
    ],
)
async def test_a_change_a_page_on_another_site_makes_is_refused_before_it_runs(
    api: Api, headers: tuple[tuple[str, str], ...], refused: bool
) -> None:
    # Without auth.required (or with a client certificate a browser shows by
    # itself), a page on another site could otherwise purge or move messages
    # with a form or a no-cors fetch (text/plain, which the API reads as JSON).
    await api.run(cf.CreateQueue(name="orders"))
    await api.send("orders", b"a")
    with structlog.testing.capture_logs() as logs:
        purged = await api.call("POST", "/api/v1/queues/orders/purge", b"{}", headers=headers)
        moved = await api.call(
            "POST",
            "/api/v1/queues/orders/move",
            {"to": "orders;poison", "all": True},
            headers=headers,
        )
        listed = await api.call("GET", "/api/v1/queues", headers=headers)  # a read is not
    assert listed.status == 200
    page = await api.call("GET", "/api/v1/queues/orders/messages")
    if refused:
        for reply in (purged, moved):
            assert (reply.status, reply.json["error"]["code"]) == (403, "cross_site"), reply.json
            assert "another site" in reply.json["error"]["message"]
        assert len(page.json["messages"]) == 1  # nothing purged or moved
        refusals = [e for e in logs if e["event"] == "http_cross_site_refused"]
        assert len(refusals) == 2
        assert refusals[0]["log_level"] == "warning"
    else:
        assert (purged.status, purged.json["purged"]) == (200, 1), purged.json
        assert page.json["messages"] == []


async def test_a_refused_token_ends_its_connection_once_answered(api: Api) -> None:
    enable_permissions(api.services, enabled=True)
    async with serving(port_of(api.app)) as http:
        client = await http.connect()
        refused = await client.get("/api/v1/status", [("authorization", "Bearer wrong")])
        assert refused.status == 401
        assert json.loads(refused.body)["error"]["code"] == "unauthenticated"
        with trio.fail_after(5):
            assert await client.stream.receive_some(1) == b""  # no second guess on it
        await client.aclose()


async def test_a_body_that_trickles_in_cannot_keep_a_scraper_out(api: Api) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    await api.send("orders", b"a")
    port = port_of(api.app, "http.max_connections=2")
    async with serving(port) as http:
        trickling = []
        for _ in range(2):
            stream = await trio.open_tcp_stream("127.0.0.1", http.number)
            await stream.send_all(
                b"POST /api/v1/queues/orders/purge HTTP/1.1\r\nHost: x\r\n"
                b"Content-Length: 16000\r\n\r\n{"
            )
            trickling.append(stream)
        await trio.testing.wait_all_tasks_blocked(0.01)  # both wait for their bodies
        assert [c.active for c in port.connections.values()] == [0, 0]
        answer = await http.get("/api/v1/queues")
        assert answer.status == 200, answer.body
        with trio.fail_after(5):
            assert await trickling[0].receive_some(1) == b""  # closed for it
        for stream in trickling:
            await stream.aclose()
    page = await api.call("GET", "/api/v1/queues/orders/messages")
    assert len(page.json["messages"]) == 1  # nothing was done for either


async def test_a_page_the_reply_s_size_cut_short_still_leads_to_the_next(api: Api) -> None:
    # A small message, then one too large to share its reply: the first page
    # holds one message of the ten asked, and is not the last.
    await api.run(cf.CreateQueue(name="big"))
    bodies = [b"s" * 1_000_000, b"L" * 3_500_000, b"a", b"b", b"c"]
    for body in bodies:
        await api.send("big", body)
    seen: list[int] = []
    after, pages = 0, 0
    while True:
        page = await api.call("GET", "/api/v1/queues/big/messages", query=f"after={after}&max=10")
        assert page.status == 200, page.json
        seen += [m["body_size"] for m in page.json["messages"]]
        pages += 1
        if page.json["next_after"] is None:
            break
        after = page.json["next_after"]
    assert seen == [len(body) for body in bodies]
    assert pages >= 2


async def test_a_path_with_a_final_slash_is_not_a_route(api: Api) -> None:
    # Not a redirect: its Location would be built from the Host header.
    reply = await api.call("GET", "/api/v1/queues/", headers=(("host", "evil.example"),))
    assert (reply.status, reply.json["error"]["code"]) == (404, "not_found")


async def test_a_request_closed_for_room_while_its_body_came_does_nothing(api: Api) -> None:
    # The port closes a connection whose request waits for its body when it
    # needs room; the cancel lands after the body's last bytes came: the route
    # must not purge all the same (and answer nobody).
    await api.run(cf.CreateQueue(name="orders"))
    await api.send("orders", b"a")
    connection = client_connection()
    scope = asgi_scope(
        "POST", "/api/v1/queues/orders/purge", content_length=2, connection=connection
    )
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        assert connection.active == 0  # waiting for the body: not busy
        connection.scope.cancel()  # the port makes room now
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with connection.scope:
        await api.app(scope, receive, send)
    assert connection.scope.cancelled_caught
    assert sent == []
    assert connection.active == 0
    page = await api.call("GET", "/api/v1/queues/orders/messages")
    assert len(page.json["messages"]) == 1  # not purged


@pytest.mark.parametrize(
    ("host", "answered"),
    [
        ("127.0.0.1:1803", True),
        ("[::1]:1803", True),
        ("localhost:1803", True),
        ("qmgr:1803", True),  # a name the listener answers at (http_kit: the queue manager's)
        ("QMGR", True),
        ("rebound.example:1803", False),  # a page that made its name resolve here
        ("qmgr.evil.example:1803", False),
    ],
)
async def test_a_browser_is_answered_without_tls_only_at_a_host_of_this_listener(
    api: Api, host: str, answered: bool
) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    await api.send("orders", b"a")
    origin = f"http://{host.lower()}"
    browser = (("host", host), ("origin", origin), ("sec-fetch-site", "same-origin"))
    with structlog.testing.capture_logs() as logs:
        read = await api.call("GET", "/api/v1/queues/orders/messages", headers=browser[::2])
        purged = await api.call("POST", "/api/v1/queues/orders/purge", headers=browser)
        program = await api.call("GET", "/api/v1/queues", headers=(("host", host),))
    assert program.status == 200  # not a browser: curl, Prometheus, a script
    if answered:
        assert (read.status, purged.status) == (200, 200), (read.json, purged.json)
    else:
        for reply in (read, purged):
            assert (reply.status, reply.json["error"]["code"]) == (421, "host_not_allowed")
            assert "http.allowed_hosts" in reply.json["error"]["message"]
        assert len([e for e in logs if e["event"] == "http_host_refused"]) == 2
        page = await api.call("GET", "/api/v1/queues/orders/messages")
        assert len(page.json["messages"]) == 1  # not purged


async def test_under_tls_the_certificate_binds_the_name(api: Api) -> None:
    headers = (("host", "rebound.example"), ("sec-fetch-site", "same-origin"))
    answer = await asgi_call(
        api.app, "GET", "/api/v1/queues", headers=headers, connection=client_connection(tls=True)
    )
    assert answer.status == 200


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
        "application/json; charset=iso-8859-1",
    ],
)
async def test_a_body_that_does_not_say_it_is_json_is_refused_before_it_acts(
    api: Api, content_type: str | None
) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    await api.send("orders", b"a")
    body = {"to": "orders;poison", "all": True}
    path = "/api/v1/queues/orders/move"
    reply = await api.call("POST", path, body, content_type=content_type)
    assert (reply.status, reply.json["error"]["code"]) == (415, "unsupported_media_type")
    assert "Content-Type: application/json" in reply.json["error"]["message"]
    page = await api.call("GET", "/api/v1/queues/orders/messages")
    assert len(page.json["messages"]) == 1  # nothing moved


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        'application/json;charset="UTF-8"',
    ],
)
async def test_json_with_or_without_its_charset_is_taken(api: Api, content_type: str) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    await api.send("orders", b"a")
    body = {"to": "orders;poison", "all": True}
    reply = await api.call("POST", "/api/v1/queues/orders/move", body, content_type=content_type)
    assert (reply.status, reply.json["count"]) == (200, 1)
    # No body at all needs no Content-Type (a purge).
    purged = await api.call("POST", "/api/v1/queues/orders;poison/purge", content_type=None)
    assert (purged.status, purged.json["purged"]) == (200, 1)


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ('{{"to": "orders;poison", "lookup_id": {first}, "lookup_id": {second}}}', "lookup_id"),
        ('{{"to": "orders;poison", "all": true, "all": false}}', "all"),
        ('{{"to": "orders;poison", "to": "orders;retry", "all": true}}', "to"),
        ('{{"to": "orders;poison", "all": true, "x": {{"a": 1, "a": 2}}}}', "a"),
    ],
    ids=["lookup_id", "all", "to", "nested"],
)
async def test_a_body_that_gives_a_key_twice_is_refused_before_it_acts(
    api: Api, body: str, key: str
) -> None:
    await api.run(cf.CreateQueue(name="orders"))
    for text in (b"a", b"b"):
        await api.send("orders", text)
    page = await api.call("GET", "/api/v1/queues/orders/messages")
    first, second = (m["lookup_id"] for m in page.json["messages"])
    data = body.format(first=first, second=second).encode()
    reply = await api.call("POST", "/api/v1/queues/orders/move", data)
    assert (reply.status, reply.json["error"]["code"]) == (400, "bad_request"), reply.json
    assert reply.json["error"]["message"] == (
        f"the body gives the key {key!r} more than once in an object"
    )
    page = await api.call("GET", "/api/v1/queues/orders/messages")
    assert len(page.json["messages"]) == 2  # nothing moved
