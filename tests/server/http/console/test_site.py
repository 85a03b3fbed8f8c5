"""The console's site as a whole, over the ASGI application without sockets or
a browser (the fixture ``site``): logins and sessions (cookie attributes,
server-side expiry, logout), CSRF tokens and origins, live regions, the
refusals of bad input and of a principal without the right, and what the site
decides on its own (forms, fields, filters, static files)."""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlencode

import pytest
import structlog
import trio
import trio.lowlevel
import trio.testing
from http_kit import IDLE, LIFETIME, Site, asgi_call, cookie_of, error_shown

from qmgr.server.http.api import ApiError
from qmgr.server.http.console.sessions import MAX_NOTICES, ConsoleSessions
from qmgr.server.http.console.site import FILTERS, Console, Visit, _methods, form_field
from qmgr.server.http.rates import SAMPLE_SECONDS
from wire import client as cf


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


# --------------------------------------------------------------------------
# What the site decides on its own
# --------------------------------------------------------------------------


async def test_a_form_of_too_many_fields_or_not_utf8_is_a_400(site: Site) -> None:
    cookie = await site.as_root()
    token = await site.csrf(cookie)
    message = "the form is not UTF-8 with at most 32 fields"
    many = urlencode({"csrf": token, **{f"f{i}": "x" for i in range(32)}}).encode()
    latin = f"csrf={token}&name=caf\xe9".encode("latin-1")
    for body in (many, latin):
        answer = await site.call("POST", "/console/queue/purge", cookie=cookie, body=body)
        assert answer.status == 400
        assert error_shown(message) in answer.text
    # 32 fields are a form; its charset parameter is allowed.
    enough = urlencode({"csrf": token, "name": "q", **{f"f{i}": "" for i in range(30)}})
    answer = await site.call(
        "POST",
        "/console/queue/purge",
        cookie=cookie,
        body=enough.encode(),
        headers=[
            ("content-type", "application/x-www-form-urlencoded; charset=UTF-8"),
            ("origin", "http://qmgr:1803"),
            ("host", "qmgr:1803"),
        ],
    )
    assert answer.status == 404  # past the form: there is no queue q
    assert "queue &#39;q&#39; does not exist" in answer.text


async def test_a_refresh_that_is_refused_gets_the_message_alone(site: Site) -> None:
    cookie = await site.as_root()
    part = await site.call(
        "GET", "/console/queue?name=<b>", cookie=cookie, headers=[("x-console-fragment", "1")]
    )
    assert (part.status, part.text) == (
        404,
        "<p class=error>no queue is named &#x27;&lt;b&gt;&#x27;</p>",
    )
    assert part.headers["content-security-policy"].startswith("default-src 'none'")


async def test_a_session_of_nobody_needs_a_login_once_auth_is_required(site: Site) -> None:
    site.app.authorization.enabled = False
    cookie = cookie_of(await site.call("GET", "/console"))
    site.app.authorization.enabled = True
    answer = await site.call("GET", "/console/queues", cookie=cookie)
    assert (answer.status, answer.headers["location"]) == (303, "/console/login")


async def test_a_page_that_fails_is_a_500_page_and_is_logged(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    cookie = await site.as_root()

    def broken() -> list[object]:
        raise RuntimeError("no history")

    monkeypatch.setattr(site.console.history, "points", broken)
    with structlog.testing.capture_logs() as logs:
        answer = await site.call("GET", "/console", cookie=cookie)
    assert answer.status == 500
    assert error_shown("internal error (see the daemon's log)") in answer.text
    assert [e["log_level"] for e in logs if e["event"] == "http_request_failed"] == ["error"]


async def test_static_files_are_served_by_name_and_kept_a_while(site: Site) -> None:
    style = await site.call("GET", "/console/static/console.css")
    assert (style.status, style.headers["content-type"]) == (200, "text/css; charset=utf-8")
    assert style.headers["cache-control"] == "max-age=300"
    assert style.headers["x-content-type-options"] == "nosniff"
    for name in ("nothing.js", "..%2Fsite.py", "console"):
        missing = await site.call("GET", f"/console/static/{name}")
        assert (missing.status, missing.text) == (404, "<p class=error>no such file</p>"), name


def test_a_form_field_must_be_given_and_is_read_without_spaces() -> None:
    assert form_field({"name": "  orders "}, "name") == "orders"
    for form in ({}, {"name": ""}, {"name": " \t"}):
        with pytest.raises(ApiError) as refused:
            form_field(form, "name")
        assert (refused.value.status, refused.value.code) == (400, "bad_request")
        assert refused.value.message == "the form must give name"


def test_a_path_with_a_get_answers_head_too() -> None:
    page = Console.plain_error
    assert _methods({"GET": page}) == ["GET", "HEAD"]  # type: ignore[dict-item]
    assert _methods({"GET": page, "POST": page}) == ["GET", "HEAD", "POST"]  # type: ignore[dict-item]
    assert _methods({"POST": page}) == ["POST"]  # type: ignore[dict-item]


def test_a_session_keeps_the_last_notices_for_its_next_page() -> None:
    session = ConsoleSessions(idle_timeout=1.0, lifetime=1.0).open("alice", "token", 0.0)
    visit = Visit(None, session, None, None, None, fragment=False)  # type: ignore[arg-type]
    for number in range(MAX_NOTICES + 2):
        visit.notice(f"notice {number}")
    assert session.notices == [f"notice {n}" for n in range(2, MAX_NOTICES + 2)]


def test_a_short_refusal_is_escaped_and_carries_the_security_headers() -> None:
    answer = Console.plain_error(403, "<script>'x'</script>")
    assert answer.status_code == 403
    assert answer.body == b"<p class=error>&lt;script&gt;&#x27;x&#x27;&lt;/script&gt;</p>"
    assert answer.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("rate", None, ""),
        ("rate", 0.0, "0.0/s"),
        ("rate", 12.34, "12.3/s"),
        ("rate", 99.94, "99.9/s"),
        ("rate", 100.0, "100/s"),
        ("rate", 1234.5, "1234/s"),
        ("size", None, ""),
        ("age", None, ""),
        ("when", None, ""),
        (
            "when",
            dt.datetime(2024, 1, 2, 3, 4, 5, 600_000, tzinfo=dt.UTC),
            "2024-01-02 03:04:05 UTC",
        ),
        ("unix", None, ""),
        ("unix", 0.0, ""),  # unknown
        ("unix", 1_700_000_000.0, "2023-11-14 22:13:20 UTC"),
    ],
)
def test_the_templates_filters_show_values_for_people(name: str, value: object, shown: str) -> None:
    assert FILTERS[name](value) == shown


async def test_ended_sessions_are_forgotten_every_sampling_interval(
    site: Site, autojump_clock: trio.testing.MockClock
) -> None:
    kept = await site.login("alice-token")
    ended = await site.login("alice-token")
    site.now[0] += IDLE - 1
    assert (await site.call("GET", "/console", cookie=kept)).status == 200
    site.now[0] += 1  # the other one has been idle for its whole timeout
    async with trio.open_nursery() as nursery:
        nursery.start_soon(site.console.expire_sessions)
        await trio.sleep(1)
        assert len(site.console.sessions) == 1  # at once
        site.now[0] += IDLE
        await trio.sleep(SAMPLE_SECONDS - 2)
        assert len(site.console.sessions) == 1  # not before the interval
        await trio.sleep(2)
        assert len(site.console.sessions) == 0
        nursery.cancel_scope.cancel()
    assert (await site.call("GET", "/console", cookie=ended)).status == 303
