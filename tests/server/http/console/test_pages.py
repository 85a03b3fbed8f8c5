"""The console's pages (``console.pages``): what a person reads of a queue, a
message and the dead letters through the site (the fixture ``site``), and how a
message's body is shown (text, JSON, hex, each bounded) without the site."""

from __future__ import annotations

import dataclasses

import pytest
import structlog
from http_kit import Site, cookie_of, error_shown
from metrics_kit import outgoing_info

from qmgr.client import QueueInfo
from qmgr.server.http.console.pages import (
    HEX_BOUND,
    QUEUES_PAGE,
    TEXT_BOUND,
    _views,
    back_target,
)
from wire import client as cf


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


# --------------------------------------------------------------------------
# Through the site
# --------------------------------------------------------------------------


async def test_the_queues_are_filtered_by_name_and_paged(site: Site) -> None:
    for number in range(QUEUES_PAGE):
        await site.run(cf.CreateQueue(name=f"orders-{number:03}"))
    await site.run(cf.CreateQueue(name="invoices"))
    listed = [q.name for q in (await site.run(cf.ListQueues())).queues]
    wanted = [name for name in listed if "orders" in name]  # with their journals, subqueues
    pages = -(-len(wanted) // QUEUES_PAGE)
    assert pages >= 2
    cookie = await site.as_root()
    first = await site.call("GET", "/console/queues?filter=ORDERS", cookie=cookie)
    assert first.status == 200
    assert f"Page 1 of {pages}" in first.text
    assert f">{wanted[QUEUES_PAGE - 1]}</a>" in first.text
    assert f">{wanted[QUEUES_PAGE]}</a>" not in first.text
    assert "invoices" not in first.text
    second = await site.call("GET", "/console/queues?filter=orders&page=2", cookie=cookie)
    assert f">{wanted[QUEUES_PAGE]}</a>" in second.text
    assert f">{wanted[0]}</a>" not in second.text
    past = await site.call("GET", f"/console/queues?filter=orders&page={pages + 1}", cookie=cookie)
    assert past.status == 400
    message = f"page must be a whole number from 1 to {pages}, not '{pages + 1}'"
    assert error_shown(message) in past.text
    none = await site.call("GET", "/console/queues?filter=nothing", cookie=cookie)
    assert "No queue matches." in none.text
    assert "Page 1 of 1" in none.text


async def test_a_queue_or_message_that_is_not_there_is_a_404_naming_it(site: Site) -> None:
    await site.fill("orders", b"a")
    cookie = await site.as_root()
    for path, message in (
        ("/console/queue?name=nope", "no queue is named 'nope'"),
        ("/console/queue/purge?name=nope", "no queue is named 'nope'"),
        ("/console/message?queue=orders&id=2", "'orders' has no message 2"),
        ("/console/message/body?queue=orders&id=2", "'orders' has no message 2"),
    ):
        answer = await site.call("GET", path, cookie=cookie)
        assert answer.status == 404, path
        assert error_shown(message) in answer.text, path
    zero = await site.call("GET", "/console/message?queue=orders&id=0", cookie=cookie)
    assert zero.status == 400
    assert error_shown(f"id must be a whole number from 1 to {2**64 - 1}, not '0'") in zero.text
    found = await site.call("GET", "/console/queue?name=ORDERS", cookie=cookie)
    assert (found.status, "<h1>orders</h1>" in found.text) == (200, True)  # any case


async def test_a_purge_is_asked_first_with_the_queue_s_name_and_depth(site: Site) -> None:
    await site.fill("orders", b"a", b"b")
    cookie = await site.as_root()
    page = await site.call("GET", "/console/queue/purge?name=Orders", cookie=cookie)
    assert page.status == 200
    assert "Purge the queue orders: remove its 2 messages?" in page.text
    assert 'action="/console/queue/purge"' in page.text
    assert 'name="name" value="orders"' in page.text
    assert 'href="/console/queue?name=orders"' in page.text
    assert await site.depth("orders") == 2  # asking purges nothing


async def test_a_message_s_whole_body_is_a_download_never_rendered(site: Site) -> None:
    await site.fill("orders", b"<html><script>x()</script>")
    cookie = await site.as_root()
    download = await site.call("GET", "/console/message/body?queue=orders&id=1", cookie=cookie)
    assert download.body == b"<html><script>x()</script>"
    assert download.headers["content-type"] == "application/octet-stream"
    assert download.headers["content-disposition"] == 'attachment; filename="message-1.bin"'
    assert download.headers["x-content-type-options"] == "nosniff"
    assert download.headers["cache-control"] == "no-store"


# --------------------------------------------------------------------------
# A body as a person reads it, without the site
# --------------------------------------------------------------------------


def test_a_json_body_is_shown_as_text_and_pretty_printed() -> None:
    views = _views('{"a":[1,2],"é":"ü"}'.encode())
    assert views["text"] == '{"a":[1,2],"é":"ü"}'
    assert views["json"] == '{\n  "a": [\n    1,\n    2\n  ],\n  "é": "ü"\n}'
    assert (views["text_cut"], views["hex_cut"]) == (False, False)


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (b"plain words", "plain words"),
        (b"\xff\xfe binary", None),  # not UTF-8: hex only
        (b"[" * 30_000 + b"]" * 30_000, "[" * 30_000 + "]" * 30_000),  # too deep for JSON
    ],
)
def test_a_body_that_is_not_json_has_no_json_view(body: bytes, text: str | None) -> None:
    views = _views(body)
    assert (views["text"], views["json"]) == (text, None)


def test_the_hex_view_has_sixteen_bytes_a_row_with_their_printable_characters() -> None:
    views = _views(b"ABCDEFGHIJKLMNOP\x00\x7f\x80 ~")
    assert views["hex"] == [
        ("00000000", "41 42 43 44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50", "ABCDEFGHIJKLMNOP"),
        ("00000010", "00 7f 80 20 7e", "... ~"),
    ]


def test_a_large_body_is_shown_up_to_its_bounds() -> None:
    views = _views(b"{}" + b" " * TEXT_BOUND)
    assert len(views["text"]) == TEXT_BOUND
    assert views["json"] is None  # a part of a JSON body is not shown as JSON
    assert len(views["hex"]) == HEX_BOUND // 16
    assert (views["text_cut"], views["hex_cut"]) == (True, True)
    exact = _views(b" " * HEX_BOUND)
    assert (len(exact["hex"]), exact["hex_cut"]) == (HEX_BOUND // 16, False)


def test_a_character_cut_at_the_text_bound_is_left_out_not_the_whole_text() -> None:
    body = b"a" * (TEXT_BOUND - 1) + "é".encode() + b"more"
    assert _views(body)["text"] == "a" * (TEXT_BOUND - 1)
    early = b"\xff" + b"a" * TEXT_BOUND  # not UTF-8 long before the bound
    assert _views(early)["text"] is None


async def test_a_poison_subqueue_moves_back_to_its_queue_a_dead_letter_to_its_destination(
    site: Site,
) -> None:
    await site.fill("orders", b"a")
    await site.run(cf.MoveMessages(source="orders", target="orders;poison", lookup_id=1))
    listed = {q.name: QueueInfo.from_wire(q) for q in (await site.run(cf.ListQueues())).queues}
    assert back_target(listed["orders;poison"]) == "orders"
    dead = [q for q in listed.values() if str(q.kind) in ("deadletter", "deadxact")]
    assert dead
    assert {back_target(q) for q in dead} == {""}


async def test_the_overview_s_backlog_counts_what_waits_and_what_is_unacknowledged(
    site: Site,
) -> None:
    # After a restart every message of an outgoing queue counts as sent and
    # not acknowledged until the peer says otherwise: the backlog is both.
    status = site.services.status
    outgoing = (
        outgoing_info("waiting", 0, 3, host="10.0.0.1"),
        outgoing_info("waiting", 2, 5, host="10.0.0.2"),
    )
    site.services.status = lambda: dataclasses.replace(status(), outgoing=outgoing)
    cookie = cookie_of(await site.call("GET", "/console", certificate="root"))
    page = await site.call("GET", "/console", cookie=cookie)
    assert "<dt>Outgoing backlog</dt><dd>10</dd>" in page.text
