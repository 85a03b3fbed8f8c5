"""The console's actions (``console.actions``) through the site (the fixture
``site``): each makes its client request and leaves a notice, and the refusals
of a form that does not say what to do, with their status and message."""

from __future__ import annotations

import pytest
import structlog
from http_kit import Answer, Site, cookie_of, error_shown

from wire import client as cf


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


async def act(site: Site, path: str, **form: str) -> Answer:
    """``form`` posted to ``path`` by root (its client certificate), with its
    session's CSRF token."""
    cookie = await site.as_root()
    token = await site.csrf(cookie)
    return await site.call("POST", path, {"csrf": token, **form}, cookie=cookie)


def refused(answer: Answer, status: int, message: str) -> bool:
    """Whether ``answer`` is the error page of ``status`` saying ``message``."""
    return answer.status == status and error_shown(message) in answer.text


@pytest.mark.parametrize(
    ("path", "form", "message"),
    [
        ("/console/queue/purge", {"name": "  "}, "the form must give name"),
        ("/console/dead-letters/move", {"lookup_id": "1"}, "the form must give queue"),
        ("/console/dead-letters/move", {"queue": "q;poison"}, "the form must give lookup_id"),
        (
            "/console/dead-letters/move",
            {"queue": "q;poison", "lookup_id": "0"},
            f"lookup_id must be a whole number from 1 to {2**64 - 1}, not '0'",
        ),
        ("/console/outgoing/control", {"action": "pause"}, "the form must give destination"),
        ("/console/outgoing/control", {"destination": "x"}, "the form must give action"),
        (
            "/console/outgoing/control",
            {"destination": "x", "action": "PAUSE"},
            "action must be pause, resume or purge",
        ),
        (
            "/console/outgoing/purge",
            {"destination": "x", "action": "drop"},
            "action must be pause, resume or purge",
        ),
        ("/console/transactions/resolve", {"decision": "commit"}, "the form must give xid"),
        (
            "/console/transactions/resolve",
            {"xid": "x", "decision": "maybe"},
            "decision must be commit or abort",
        ),
    ],
)
async def test_a_form_that_does_not_say_what_to_do_is_a_400_and_does_nothing(
    site: Site, path: str, form: dict[str, str], message: str
) -> None:
    await site.fill("q", b"a")
    with structlog.testing.capture_logs() as logs:
        answer = await act(site, path, **form)
    assert refused(answer, 400, message), answer.text
    assert [e for e in logs if e["event"] == "console_action"] == []
    assert await site.depth("q") == 1


async def test_the_daemon_s_refusal_of_an_action_is_its_page(site: Site) -> None:
    unknown = await act(site, "/console/transactions/resolve", xid="no-such-xid", decision="abort")
    assert unknown.status == 404
    assert "no-such-xid" in unknown.text
    missing = await act(site, "/console/queue/purge", name="nowhere")
    assert missing.status == 404
    assert "nowhere" in missing.text


async def test_move_back_of_all_moves_every_message_of_a_poison_subqueue(site: Site) -> None:
    await site.fill("orders", b"a", b"b")
    await site.run(cf.MoveMessages(source="orders", target="orders;poison", all=True))
    with structlog.testing.capture_logs() as logs:
        moved = await act(
            site,
            "/console/dead-letters/move",
            queue="orders;poison",
            target="orders",
            all="1",
            lookup_id="not read",
        )
    assert (moved.status, moved.headers["location"]) == (
        303,
        "/console/dead-letters?queue=orders%3Bpoison",
    )
    [action] = [e for e in logs if e["event"] == "console_action"]
    assert (action["action"], action["lookup_id"], action["moved"]) == ("move_back", None, 2)
    assert await site.depth("orders") == 2


async def test_a_purge_says_how_many_messages_went(site: Site) -> None:
    await site.fill("orders", b"a", b"b", b"c")
    cookie = await site.as_root()
    token = await site.csrf(cookie)
    done = await site.call(
        "POST", "/console/queue/purge", {"name": "orders", "csrf": token}, cookie=cookie
    )
    assert done.headers["location"] == "/console/queue?name=orders"
    page = await site.call("GET", done.headers["location"], cookie=cookie)
    assert "Purged 3 messages from orders." in page.text
    again = await site.call("GET", done.headers["location"], cookie=cookie)
    assert "Purged 3 messages" not in again.text  # said once


async def test_a_blank_token_is_a_failed_login(site: Site) -> None:
    with structlog.testing.capture_logs() as logs:
        answer = await site.call("POST", "/console/login", {"token": "   "})
    assert answer.status == 401
    assert "set-cookie" not in answer.headers
    assert site.app.authorization.tally.authentication_failures == 1
    assert [e["event"] for e in logs if e["event"].startswith("console_")] == []


async def test_a_login_opens_a_session_and_logging_out_forgets_the_cookie(site: Site) -> None:
    with structlog.testing.capture_logs() as logs:
        cookie = await site.login(" alice-token ")  # the token as typed, spaces aside
    assert [e["principal"] for e in logs if e["event"] == "console_login"] == ["alice"]
    session = site.console.sessions.find(cookie, site.now[0])
    assert session is not None
    assert (session.principal, session.method) == ("alice", "token")
    token = await site.csrf(cookie)
    with structlog.testing.capture_logs() as logs:
        out = await site.call("POST", "/console/logout", {"csrf": token}, cookie=cookie)
    assert "console_logout" in [e["event"] for e in logs]
    forget = out.headers["set-cookie"].lower()
    assert forget.startswith('qmgr_console="";')
    assert "max-age=0" in forget
    assert "path=/console" in forget
