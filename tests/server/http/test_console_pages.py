"""The web console over the ASGI application, without sockets or a browser: the
daemon's parts in-process (a real store, core and committer), a clock the test
moves. Logins and sessions (cookie attributes, server-side expiry, logout),
CSRF tokens and origins, escaping, the refusals of bad input, a principal
without the right, and the actions (purge, move back) with their events."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import structlog
from http_kit import Answer, asgi_call, client_connection, operations_app
from metrics_kit import sources_of
from server.client.kit import enable_permissions, open_services

from qmgr.server.client.handlers.replies import queue_info
from qmgr.server.client.operations import Operations
from qmgr.server.client.services import Services
from qmgr.server.http.app import HttpApp
from qmgr.server.http.console import Console
from qmgr.server.http.console import console as make_console
from storage import QueueKind
from wire import MessageProperties
from wire import client as cf

IDLE = 60.0
LIFETIME = 600.0


@dataclass
class Site:
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

    async def csrf(self, cookie: str) -> str:
        page = await self.call("GET", "/console/queues", cookie=cookie)
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found is not None, page.text
        return found.group(1)

    async def run(self, request: Any) -> Any:
        return await self.operations.run(request, principal=None, log=structlog.get_logger())

    async def depth(self, name: str) -> int:
        listed = (await self.run(cf.ListQueues())).queues
        return next(q.depth for q in listed if q.name == name)

    async def send(self, queue: str, body: bytes, **fields: Any) -> None:
        await self.run(cf.Send(message=MessageProperties(destination=queue, body=body, **fields)))


def cookie_of(answer: Answer) -> str:
    found = re.search(r"qmgr_console=([^;]+);", answer.headers.get("set-cookie", ""))
    assert found is not None, answer.headers
    return found.group(1)


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    async with open_services(tmp_path / "s") as services:
        core = services.core

        def queue_infos() -> tuple[cf.QueueInfo, ...]:
            return tuple(
                queue_info(q, core.holds.count(q.queue_id))
                for q in core.queues.all()
                if q.kind is not QueueKind.OUTGOING
            )

        services.queue_infos = queue_infos
        services.status = lambda: cf.StatusInfo(
            qm_name="test",
            qm_guid=services.qm_guid,
            server_version="test",
            started_at=time.time() - 5,
            connections=0,
            open_transactions=len(core.transactions),
            commits=core.tally.commits,
            aborts=core.tally.aborts,
            batches=0,
            uncommitted_bytes=0,
            erasing=0,
            queues=queue_infos(),
        )
        operations = Operations(services)
        authorization = enable_permissions(services)  # root administers; alice has a token
        app = operations_app(authorization, operations)
        sources = sources_of(
            core.store,
            tmp_path,
            core=core,
            tally=authorization.tally,
            connections=lambda: {"client": 0},
        )
        now = [1000.0]
        console = make_console(
            host=app,
            operations=operations,
            sources=sources,
            idle_timeout=IDLE,
            lifetime=LIFETIME,
            clock=lambda: now[0],
        )
        app.serve_console(console.starlette_routes())
        yield Site(app, console, services, operations, now)


async def test_a_login_opens_a_session_kept_on_the_server(site: Site) -> None:
    nobody = await site.call("GET", "/console/queues")
    assert (nobody.status, nobody.headers["location"]) == (303, "/console/login")
    assert (await site.call("GET", "/")).headers["location"] == "/console"
    form = await site.call("GET", "/console/login")
    assert form.status == 200
    assert 'name="token"' in form.text
    assert "set-cookie" not in form.headers  # nothing is kept for a visitor
    with structlog.testing.capture_logs() as logs:
        wrong = await site.call("POST", "/console/login", {"token": "wrong"})
    assert wrong.status == 401
    assert "not accepted" in wrong.text
    assert site.app.authorization.tally.authentication_failures == 1
    assert [e["method"] for e in logs if e["event"] == "authentication_failed"] == ["console"]
    answer = await site.call("POST", "/console/login", {"token": "alice-token"})
    assert (answer.status, answer.headers["location"]) == (303, "/console")
    attributes = answer.headers["set-cookie"].lower()
    assert "httponly" in attributes
    assert "samesite=strict" in attributes
    assert "path=/console" in attributes
    assert "secure" not in attributes
    cookie = cookie_of(answer)
    page = await site.call("GET", "/console/queues", cookie=cookie)
    assert page.status == 200
    assert "alice" in page.text
    headers = page.headers
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["cache-control"] == "no-store"
    # Under TLS the cookie is Secure.
    secure = await site.call("POST", "/console/login", {"token": "alice-token"}, tls=True)
    assert "secure" in secure.headers["set-cookie"].lower()


async def test_a_session_ends_idle_old_or_logged_out_whatever_the_cookie(site: Site) -> None:
    cookie = await site.login("alice-token")
    site.now[0] += IDLE - 1
    assert (await site.call("GET", "/console", cookie=cookie)).status == 200  # used: kept
    site.now[0] += IDLE
    ended = await site.call("GET", "/console", cookie=cookie)
    assert (ended.status, ended.headers["location"]) == (303, "/console/login")
    refresh = await site.call(
        "GET", "/console", cookie=cookie, headers=[("x-console-fragment", "1")]
    )
    assert refresh.status == 401  # the page's script reloads to the login form
    # However busy, a session lasts its lifetime at most.
    cookie = await site.login("alice-token")
    for _ in range(int(LIFETIME // (IDLE / 2)) + 1):
        site.now[0] += IDLE / 2
        last = await site.call("GET", "/console", cookie=cookie)
    assert last.status == 303
    # Logging out ends it on the server: the same cookie opens nothing.
    cookie = await site.login("alice-token")
    token = await site.csrf(cookie)
    out = await site.call("POST", "/console/logout", {"csrf": token}, cookie=cookie)
    assert (out.status, out.headers["location"]) == (303, "/console/login")
    assert (await site.call("GET", "/console", cookie=cookie)).status == 303
    assert len(site.console.sessions) == 0


async def test_an_action_needs_its_session_s_token_and_this_site(site: Site) -> None:
    await site.run(cf.CreateQueue(name="orders"))
    await site.send("orders", b"kept")
    root = await site.call("GET", "/console/queues", certificate="root")
    cookie = cookie_of(root)
    token = await site.csrf(cookie)
    with structlog.testing.capture_logs() as logs:
        missing = await site.call("POST", "/console/queue/purge", {"name": "orders"}, cookie=cookie)
        forged = await site.call(
            "POST", "/console/queue/purge", {"name": "orders", "csrf": "x" * 43}, cookie=cookie
        )
        other = await site.call(
            "POST",
            "/console/queue/purge",
            {"name": "orders", "csrf": token},
            cookie=cookie,
            headers=[("origin", "https://elsewhere.example"), ("host", "qmgr:1803")],
        )
    assert [a.status for a in (missing, forged, other)] == [403, 403, 403]
    assert "security token" in forged.text
    assert "another site" in other.text
    assert len([e for e in logs if e["event"] == "console_csrf_refused"]) == 3
    assert await site.depth("orders") == 1  # nothing was done
    with structlog.testing.capture_logs() as logs:
        # From this site: Site.call sends the browser's origin, http://qmgr:1803.
        done = await site.call(
            "POST", "/console/queue/purge", {"name": "orders", "csrf": token}, cookie=cookie
        )
    assert (done.status, done.headers["location"]) == (303, "/console/queue?name=orders")
    events = {e["event"]: e for e in logs}
    assert events["queue_purged"]["principal"] == "root"
    assert events["console_action"]["action"] == "purge"
    page = await site.call("GET", "/console/queue?name=orders", cookie=cookie)
    assert "Purged 1 message from orders." in page.text
    assert 'id="depth">0<' in page.text


async def test_a_principal_without_the_right_is_refused_and_nothing_is_done(site: Site) -> None:
    await site.run(cf.CreateQueue(name="orders"))
    await site.send("orders", b"kept")
    cookie = await site.login("alice-token")
    token = await site.csrf(cookie)
    with structlog.testing.capture_logs() as logs:
        denied = await site.call(
            "POST", "/console/queue/purge", {"name": "orders", "csrf": token}, cookie=cookie
        )
        browse = await site.call("GET", "/console/queue?name=orders", cookie=cookie)
    assert denied.status == 403
    assert "access denied" in denied.text
    assert "alice" in denied.text
    assert browse.status == 403  # peeking needs a right alice lacks
    refusals = [e for e in logs if e["event"] == "access_denied"]
    assert {e["request"] for e in refusals} >= {"PurgeQueue", "PeekRange"}
    assert all(e["principal"] == "alice" for e in refusals)
    assert await site.depth("orders") == 1


async def test_names_labels_and_bodies_are_text_never_markup(site: Site) -> None:
    await site.run(cf.CreateQueue(name="orders"))
    await site.send(
        "orders", b'{"x": "<img src=x onerror=alert(1)>"}', label="<script>bad()</script>"
    )
    cookie = cookie_of(await site.call("GET", "/console", certificate="root"))
    for path in ("/console/queue?name=orders", "/console/message?queue=orders&id=1"):
        page = await site.call("GET", path, cookie=cookie)
        assert page.status == 200
        assert "<script>bad" not in page.text
        assert "&lt;script&gt;bad()&lt;/script&gt;" in page.text
    message = await site.call("GET", "/console/message?queue=orders&id=1", cookie=cookie)
    assert "<img" not in message.text
    assert "&lt;img src=x" in message.text
    assert '"x": ' in message.text.replace("&#34;", '"')  # JSON, pretty-printed


async def test_a_large_body_is_cut_on_the_page_and_whole_as_a_download(site: Site) -> None:
    await site.run(cf.CreateQueue(name="big"))
    body = b"a" * 200_000
    await site.send("big", body)
    cookie = cookie_of(await site.call("GET", "/console", certificate="root"))
    page = await site.call("GET", "/console/message?queue=big&id=1", cookie=cookie)
    assert page.status == 200
    assert len(page.body) < 100_000
    assert "Only the first 64 KiB are shown" in page.text
    download = await site.call("GET", "/console/message/body?queue=big&id=1", cookie=cookie)
    assert (download.status, download.body) == (200, body)
    assert download.headers["content-disposition"].startswith("attachment")


async def test_bad_input_gets_a_clear_refusal(site: Site) -> None:
    cookie = cookie_of(await site.call("GET", "/console", certificate="root"))
    token = await site.csrf(cookie)
    huge = urlencode({"csrf": token, "name": "x" * 20_000}).encode()
    too_large = await site.call("POST", "/console/queue/purge", cookie=cookie, body=huge)
    assert too_large.status == 413
    not_form = await site.call(
        "POST",
        "/console/queue/purge",
        cookie=cookie,
        headers=[("content-type", "application/json")],
    )
    assert not_form.status == 400
    assert "form" in not_form.text
    assert (await site.call("GET", "/console/nowhere", cookie=cookie)).status == 404
    assert (await site.call("GET", "/console/queue?name=nope", cookie=cookie)).status == 404
    bad_id = await site.call("GET", "/console/message?queue=x&id=abc", cookie=cookie)
    assert bad_id.status == 400
    assert "whole number" in bad_id.text
    in_url = await site.call("GET", "/console?token=alice-token")
    assert in_url.status == 400
    assert (await site.call("DELETE", "/console/queues", cookie=cookie)).status == 405


async def test_a_form_the_client_does_not_finish_is_refused_as_its_fault(site: Site) -> None:
    await site.run(cf.CreateQueue(name="orders"))
    await site.send("orders", b"kept")
    cookie = cookie_of(await site.call("GET", "/console", certificate="root"))
    token = await site.csrf(cookie)
    with structlog.testing.capture_logs() as logs:
        login = await site.call("POST", "/console/login", {"token": "alice-token"}, cut=5)
        purge = await site.call(
            "POST", "/console/queue/purge", {"name": "orders", "csrf": token}, cookie=cookie, cut=9
        )
    for answer in (login, purge):
        assert answer.status == 400, answer.text
        assert "the client closed the connection or stopped sending" in answer.text
        assert "set-cookie" not in answer.headers  # no session opened
    gone = [e for e in logs if e["event"] == "http_client_disconnected"]
    assert [(e["log_level"], e["received"]) for e in gone] == [("info", 5), ("info", 9)]
    assert [e for e in logs if e["log_level"] in ("error", "critical")] == []
    assert await site.depth("orders") == 1
    assert len(site.console.sessions) == 1  # root's only


async def test_where_a_form_comes_from_is_checked_before_its_body_is_read(site: Site) -> None:
    # A login form from another site that never finishes its body is refused at
    # once: it neither waits for its bytes nor holds its connection busy.
    with structlog.testing.capture_logs() as logs:
        login = await site.call(
            "POST",
            "/console/login",
            {"token": "alice-token"},
            headers=[("origin", "https://elsewhere.example"), ("host", "qmgr:1803")],
            cut=5,
        )
        fetched = await site.call(
            "POST",
            "/console/login",
            {"token": "alice-token"},
            headers=[("sec-fetch-site", "cross-site"), ("origin", "http://qmgr:1803")],
        )
    for answer in (login, fetched):
        assert answer.status == 403, answer.text
        assert "another site" in answer.text
    assert [e["event"] for e in logs if e["log_level"] != "debug"] == ["console_csrf_refused"] * 2
    assert len(site.console.sessions) == 0


async def test_a_refresh_is_the_live_region_alone(site: Site) -> None:
    cookie = cookie_of(await site.call("GET", "/console", certificate="root"))
    whole = await site.call("GET", "/console", cookie=cookie)
    assert 'data-refresh="2000"' in whole.text
    assert "<html" in whole.text
    part = await site.call("GET", "/console", cookie=cookie, headers=[("x-console-fragment", "1")])
    assert part.status == 200
    assert "<html" not in part.text
    assert "Queue manager" in part.text
    script = await site.call("GET", "/console/static/console.js")
    assert script.status == 200
    assert "X-Console-Fragment" in script.text


async def test_without_auth_required_nobody_needs_to_log_in(site: Site) -> None:
    site.app.authorization.enabled = False
    answer = await site.call("GET", "/console")
    assert answer.status == 200
    assert "Log out" not in answer.text
    assert cookie_of(answer)  # a session all the same: the actions' CSRF tokens


async def test_move_back_from_a_poison_subqueue_keeps_the_id(site: Site) -> None:
    await site.run(cf.CreateQueue(name="orders"))
    await site.send("orders", b"poisoned")
    await site.run(cf.MoveMessages(source="orders", target="orders;poison", lookup_id=1))
    cookie = cookie_of(await site.call("GET", "/console", certificate="root"))
    token = await site.csrf(cookie)
    page = await site.call("GET", "/console/dead-letters?queue=orders;poison", cookie=cookie)
    assert page.status == 200
    assert "Move back" in page.text
    with structlog.testing.capture_logs() as logs:
        moved = await site.call(
            "POST",
            "/console/dead-letters/move",
            {"csrf": token, "queue": "orders;poison", "target": "orders", "lookup_id": "1"},
            cookie=cookie,
        )
    assert moved.status == 303
    assert [e["count"] for e in logs if e["event"] == "messages_moved"] == [1]
    found = await site.run(cf.PeekRange(queue="orders", after=0, max_count=10))
    assert [bytes(m.message.body) for m in found.messages] == [b"poisoned"]
    after = await site.call("GET", "/console/dead-letters?queue=orders;poison", cookie=cookie)
    assert "Moved 1 message from orders;poison back to orders." in after.text


async def test_the_dead_letters_page_opens_a_queue_its_principal_may_browse(site: Site) -> None:
    await site.run(cf.CreateQueue(name="aaa"))  # root's: listed first, not alice's to browse
    await site.send("aaa", b"root's")
    await site.run(cf.MoveMessages(source="aaa", target="aaa;poison", lookup_id=1))
    alice = site.app.authorization.principal("alice")
    await site.operations.run(
        cf.CreateQueue(name="mine"), principal=alice, log=structlog.get_logger()
    )
    cookie = await site.login("alice-token")
    await site.send("mine", b"alice's")
    await site.run(cf.MoveMessages(source="mine", target="mine;poison", lookup_id=1))
    page = await site.call("GET", "/console/dead-letters", cookie=cookie)
    assert page.status == 200, page.text
    assert ">aaa;poison</a>" in page.text  # listed
    assert "<h2>mine;poison</h2>" in page.text  # opened, with its message
    assert 'href="/console/message?queue=mine%3Bpoison&amp;id=1"' in page.text
    asked = await site.call("GET", "/console/dead-letters?queue=aaa;poison", cookie=cookie)
    assert asked.status == 403  # asked for by name: refused, as before


async def test_a_login_from_another_site_or_a_sandboxed_frame_is_refused(site: Site) -> None:
    for origin in ("null", "https://elsewhere.example"):
        answer = await site.call(
            "POST", "/console/login", {"token": "alice-token"}, headers=[("origin", origin)]
        )
        assert answer.status == 403
        assert "set-cookie" not in answer.headers
    bare = await asgi_call(
        site.app,
        "POST",
        "/console/login",
        b"token=alice-token",
        headers=[("content-type", "application/x-www-form-urlencoded"), ("host", "qmgr:1803")],
    )
    assert bare.status == 403  # every browser sends an Origin with a form
    assert len(site.console.sessions) == 0


async def test_odd_methods_and_numbers_get_refusals_not_errors(site: Site) -> None:
    cookie = cookie_of(await site.call("GET", "/console", certificate="root"))
    for path in ("/console/logout", "/console/dead-letters/move", "/console/outgoing/control"):
        assert (await site.call("HEAD", path, cookie=cookie)).status == 405
    assert (await site.call("HEAD", "/console/queues", cookie=cookie)).status == 200
    for number in ("%C2%B2", "9" * 5000):
        odd = await site.call("GET", f"/console/message?queue=x&id={number}", cookie=cookie)
        assert odd.status == 400


async def test_a_refreshing_page_does_not_keep_its_session(site: Site) -> None:
    cookie = await site.login("alice-token")
    for _ in range(int(IDLE // 2) + 2):
        site.now[0] += 2.0
        await site.call("GET", "/console", cookie=cookie, headers=[("x-console-fragment", "1")])
    assert (await site.call("GET", "/console", cookie=cookie)).status == 303


async def test_the_console_with_a_final_slash_leads_to_the_console(site: Site) -> None:
    answer = await site.call("GET", "/console/", headers=[("host", "evil.example")])
    assert (answer.status, answer.headers["location"]) == (303, "/console")
