"""The console's pages: what a person reads (every ``GET`` but the login form).

Theory of operation
-------------------
Each page makes the client requests that read what it shows, through the
visit's ``ApiCall`` (so each is authorized, with the need the request table
declares for it), converts the replies with the SDK's ``from_wire`` as the
CLI and the JSON API do, and renders its template. What the client
requests do not say, a page reads from what the metrics read
(``MetricsSources``): a queue's oldest message (one seek per queue shown)
and the store's usage; its rates come from the console's history
(``rates``). A page that updates itself passes ``live=True``.

Bounds: a page of queues shows :data:`QUEUES_PAGE` of them, a page of
messages :data:`MESSAGES_PAGE` (bodies are not shown in lists), and a
message's page at most :data:`TEXT_BOUND` bytes of its body as text or
JSON and :data:`HEX_BOUND` as hex; the whole body is a download.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import urlencode

from starlette.responses import Response

from qmgr.client import Message, OutgoingInfo, QueueInfo, Status, TransactionInfo
from qmgr.client.calls.routing import Routing
from qmgr.client.shapes import alternates
from wire import client as cf
from wire.rights import Right, rights_names

from ..api import ApiError, peek_page
from ..metrics import class_name
from ..rates import chart
from ..sources import store_limit
from .site import Console, Visit

__all__ = [
    "HEX_BOUND",
    "MESSAGES_PAGE",
    "QUEUES_PAGE",
    "TEXT_BOUND",
    "dead_letters",
    "lists",
    "message",
    "message_body",
    "outgoing",
    "overview",
    "queue",
    "queues",
    "transactions",
]

QUEUES_PAGE: Final = 50
MESSAGES_PAGE: Final = 50
#: Bytes of a body shown as text or JSON on a message's page.
TEXT_BOUND: Final = 64 * 1024
#: Bytes of a body shown as hex.
HEX_BOUND: Final = 4096
#: The kinds of queue the dead-letter page lists (as the protocol numbers them).
_DEAD_WIRE: Final = frozenset({int(cf.QueueKind.DEADLETTER), int(cf.QueueKind.DEADXACT)})


async def _status(visit: Visit) -> tuple[Status, cf.StatusInfo]:
    """The status, converted without its queues (there may be tens of thousands:
    a page converts those it shows), and as it came."""
    found = await visit.call.run(cf.GetStatus(), cf.StatusInfo)
    return Status.from_wire(dataclasses.replace(found, queues=())), found


async def _wire_queues(visit: Visit) -> tuple[cf.QueueInfo, ...]:
    """Every queue the principal may list, as the protocol gives them (converted
    only when shown)."""
    return (await visit.call.run(cf.ListQueues(), cf.QueueList)).queues


def _facts(site: Console, shown: Iterable[QueueInfo]) -> dict[str, dict[str, Any]]:
    """For the queues ``shown``: their oldest message's age and their rates, by name."""
    sources = site.sources
    wanted = {q.name for q in shown}
    records = [r for r in sources.store.queue_records() if r.display_name in wanted]
    arrivals = sources.store.oldest_arrivals(sorted(r.queue_id for r in records if r.depth))
    now = sources.wall()
    facts = {}
    for record in records:
        arrived = arrivals.get(record.queue_id)
        rates = site.history.queue_rates(record.queue_id)
        facts[record.display_name] = {
            "age": None if arrived is None else max(0.0, now - arrived),
            "in": None if rates is None else rates[0],
            "out": None if rates is None else rates[1],
        }
    return facts


async def overview(site: Console, visit: Visit) -> Response:
    """Identity, uptime, rates over 15 minutes, connections, transactions, store
    (the store, the disk, the connections and the daemon-wide rates only for
    those who may read the metrics)."""
    status, found = await _status(visit)
    sources = site.sources
    monitor = site.may_monitor(visit.principal)
    points = site.history.points() if monitor else []
    dead = [q for q in found.queues if q.kind in _DEAD_WIRE]
    usage = sources.store.usage() if monitor else None
    free = sources.disk_free(sources.data_dir) if monitor else None
    return site.render(
        visit,
        "overview.html",
        live=True,
        title="Overview",
        status=status,
        monitor=monitor,
        connections=sorted(sources.connections().items()) if monitor else [],
        prepared=sources.core.two_phase.prepared_count if monitor else None,
        usage=usage,
        disk_free=free,
        limit=None if usage is None or free is None else store_limit(usage, free),
        chart=chart(points, ("added", "removed", "commits"), now=site.now()),
        latest=points[-1] if points else None,
        messages=sum(q.depth for q in found.queues),
        dead_letters=sum(q.depth for q in dead),
        backlog=sum(o.waiting + o.unacknowledged for o in status.outgoing),
    )


async def queues(site: Console, visit: Visit) -> Response:
    """Every queue, filtered by name and paged."""
    wanted = visit.query("filter").strip()
    listed = await _wire_queues(visit)
    if wanted:
        listed = tuple(q for q in listed if wanted.lower() in q.name.lower())
    pages = max(1, -(-len(listed) // QUEUES_PAGE))
    number = visit.number(visit.query("page", "1"), "page", 1, pages)
    shown = [
        QueueInfo.from_wire(q) for q in listed[(number - 1) * QUEUES_PAGE : number * QUEUES_PAGE]
    ]
    return site.render(
        visit,
        "queues.html",
        live=True,
        title="Queues",
        queues=shown,
        facts=_facts(site, shown),
        filter=wanted,
        page=number,
        pages=pages,
        total=len(listed),
    )


async def _one_queue(visit: Visit, name: str) -> QueueInfo:
    """The queue ``name``.

    Raises:
        ApiError: 404, there is none.
    """
    for info in await _wire_queues(visit):
        if info.name.lower() == name.lower():
            return QueueInfo.from_wire(info)
    raise ApiError(404, "queue_not_found", f"no queue is named {name!r}")


async def _page_of(visit: Visit, name: str, after: int) -> tuple[list[Message], int | None]:
    """A page of the messages of ``name`` after the LookupId ``after``, and the
    LookupId to start the next page after (None: the last page)."""
    return await peek_page(visit.call, name, after, MESSAGES_PAGE)


async def queue(site: Console, visit: Visit) -> Response:
    """A queue: its settings, rates, permissions, and a page of its messages."""
    name = visit.query("name")
    info = await _one_queue(visit, name)
    after = visit.number(visit.query("after", "0"), "after")
    page, next_after = await _page_of(visit, info.name, after)
    permissions: list[tuple[str, str]] | None = None
    hidden = ""
    try:
        acl = await visit.call.run(cf.GetPermissions(queue=info.name), cf.Permissions)
        permissions = [
            (entry.name, ", ".join(rights_names(Right(entry.rights)))) for entry in acl.entries
        ]
    except ApiError as exc:
        hidden = exc.message
    return site.render(
        visit,
        "queue.html",
        live=True,
        title=info.name,
        info=info,
        facts=_facts(site, [info]).get(info.name, {}),
        messages=page,
        after=after,
        next_after=next_after,
        permissions=permissions,
        permissions_hidden=hidden,
    )


async def _message(visit: Visit) -> Message:
    """The message the query names (``queue``, ``id``: its LookupId).

    Raises:
        ApiError: 404, it is not there.
    """
    name = visit.query("queue")
    lookup_id = visit.number(visit.query("id"), "id", 1)
    asked = cf.PeekRange(queue=name, after=lookup_id - 1, max_count=1)
    found = (await visit.call.run(asked, cf.MessageList)).messages
    if not found or found[0].lookup_id != lookup_id:
        raise ApiError(404, "message_not_found", f"{name!r} has no message {lookup_id}")
    return Message.from_wire(found[0])


def _views(body: bytes) -> dict[str, Any]:
    """A body as a person reads it: text, JSON pretty-printed, hex (each bounded)."""
    shown = bytes(body[:TEXT_BOUND])
    text = None
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A character cut at the bound is not a reason to give up on the text.
        if len(body) > TEXT_BOUND and exc.start >= TEXT_BOUND - 4:
            text = shown[: exc.start].decode("utf-8")
    pretty = None
    if text is not None and len(body) <= TEXT_BOUND:
        try:
            pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):
            pretty = None
    rows = []
    for offset in range(0, min(len(body), HEX_BOUND), 16):
        chunk = bytes(body[offset : offset + 16])
        printable = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        rows.append((f"{offset:08x}", chunk.hex(" "), printable))
    return {
        "text": text,
        "json": pretty,
        "hex": rows,
        "text_cut": len(body) > TEXT_BOUND,
        "hex_cut": len(body) > HEX_BOUND,
    }


async def message(site: Console, visit: Visit) -> Response:
    """A message: its properties, its body (text, JSON, hex), its trace."""
    found = await _message(visit)
    trace = None
    trace_hidden = ""
    try:
        report = await visit.call.run(cf.TraceMessage(message_id=found.id), cf.TraceReport)
        trace = [
            (f, class_name(f.message_class) if f.message_class else "") for f in report.findings
        ]
    except ApiError as exc:
        trace_hidden = exc.message
    return site.render(
        visit,
        "message.html",
        title=f"{found.queue} #{found.lookup_id}",
        message=found,
        size=len(found.body),
        views=_views(found.body),
        trace=trace,
        trace_hidden=trace_hidden,
    )


async def message_body(site: Console, visit: Visit) -> Response:
    """A message's whole body, as a download."""
    found = await _message(visit)
    filename = f"message-{found.lookup_id}.bin"
    return Response(
        bytes(found.body),
        media_type="application/octet-stream",
        headers={
            "Content-Disposition": f'attachment; filename="{filename}"',
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        },
    )


async def purge_confirmation(site: Console, visit: Visit) -> Response:
    """Ask before purging a queue: its name and how many messages will go."""
    info = await _one_queue(visit, visit.query("name"))
    return site.render(
        visit,
        "confirm.html",
        title=f"Purge {info.name}?",
        question=f"Purge the queue {info.name}: remove its {info.depth} messages?",
        detail="Purged messages are gone for good (a journal keeps no copy of them).",
        action="/queue/purge",
        fields={"name": info.name, "count": str(info.depth)},
        button="Purge",
        back="/queue?" + urlencode({"name": info.name}),
    )


async def dead_letters(site: Console, visit: Visit) -> Response:
    """The dead-letter queues and poison subqueues, and a page of one of them."""
    listed = [
        QueueInfo.from_wire(q)
        for q in await _wire_queues(visit)
        if q.kind in _DEAD_WIRE or (q.kind == cf.QueueKind.SUBQUEUE and q.name.endswith(";poison"))
    ]
    # Unless one is asked for, the first the principal may browse (a poison
    # subqueue of another principal's queue is listed, not opened).
    name = visit.query("queue") or next(
        (q.name for q in listed if _may_peek(site, visit, q.name)), ""
    )
    chosen = next((q for q in listed if q.name.lower() == name.lower()), None)
    page: list[Message] = []
    next_after = None
    after = visit.number(visit.query("after", "0"), "after")
    if chosen is not None:
        page, next_after = await _page_of(visit, chosen.name, after)
    return site.render(
        visit,
        "dead_letters.html",
        live=True,
        title="Dead letters",
        queues=listed,
        chosen=chosen,
        messages=page,
        after=after,
        next_after=next_after,
        back_to=None if chosen is None else back_target(chosen),
    )


def _may_peek(site: Console, visit: Visit, name: str) -> bool:
    """Whether the visit's principal may browse the queue ``name`` (asked
    without a refusal being counted or logged)."""
    request = cf.PeekRange(queue=name, after=0, max_count=1)
    need = site.operations.need(cf.PeekRange)
    return site.host.authorization.denial(visit.principal, request, need) is None


def back_target(info: QueueInfo) -> str:
    """Where ``move back`` sends a message of ``info``: a poison subqueue's queue,
    or ``""`` (each dead letter to its original destination)."""
    if str(info.kind) == "subqueue":
        return info.name.rpartition(";")[0]
    return ""


async def outgoing(site: Console, visit: Visit) -> Response:
    """The outgoing queues with their links, and the incoming sequences."""
    listed = await visit.call.run(cf.ListOutgoing(), cf.OutgoingList)
    sources = site.sources
    ids = {info.destination: queue_id for queue_id, info in sources.peering.outgoing_by_id()}
    arrivals = sources.store.oldest_arrivals(sorted(ids.values()))
    now = sources.wall()
    rows = []
    for wire_info in listed.outgoing:
        info = OutgoingInfo.from_wire(wire_info)
        asked = cf.GetRouting(destination=info.destination)
        routing = await visit.call.optional(asked, cf.RoutingInfo)
        arrived = arrivals.get(ids.get(info.destination, -1))
        rows.append(
            {
                "info": info,
                "alternates": alternates(None if routing is None else Routing.from_wire(routing)),
                "age": None if arrived is None else max(0.0, now - arrived),
            }
        )
    status, _ = await _status(visit)
    return site.render(
        visit,
        "outgoing.html",
        live=True,
        title="Outgoing",
        outgoing=rows,
        incoming=status.incoming,
    )


async def outgoing_purge_confirmation(site: Console, visit: Visit) -> Response:
    """Ask before purging an outgoing queue."""
    destination = visit.query("destination")
    listed = await visit.call.run(cf.ListOutgoing(), cf.OutgoingList)
    wanted = destination.lower()
    found = next((o for o in listed.outgoing if o.destination.lower() == wanted), None)
    if found is None:
        raise ApiError(404, "not_found", f"no outgoing queue goes to {destination!r}")
    return site.render(
        visit,
        "confirm.html",
        title="Purge an outgoing queue?",
        question=(
            f"Purge the outgoing queue to {destination}: "
            f"remove its {found.waiting} messages waiting to be sent?"
        ),
        detail="Their senders get a negative acknowledgment where they asked for one.",
        action="/outgoing/purge",
        fields={"destination": destination},
        button="Purge",
        back="/outgoing",
    )


async def transactions(site: Console, visit: Visit) -> Response:
    """Transactions in doubt (prepared, waiting for their coordinator)."""
    asked = cf.ListTransactions(prefix="", resolved=False, max_count=1000)
    listed = await visit.call.run(asked, cf.TransactionList)
    return site.render(
        visit,
        "transactions.html",
        live=True,
        title="Transactions in doubt",
        transactions=[TransactionInfo.from_wire(t) for t in listed.transactions],
    )


async def lists(site: Console, visit: Visit) -> Response:
    """The distribution lists and their targets."""
    listed = await visit.call.run(cf.GetLists(), cf.ListInfoList)
    return site.render(
        visit, "lists.html", live=True, title="Distribution lists", lists=listed.lists
    )
