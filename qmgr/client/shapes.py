"""The JSON shapes of what the SDK returns: one definition for ``qmgr --json`` and
the HTTP API.

Theory of operation
-------------------
``qmgr status --json``, ``queue list --json``, ``outgoing list --json``,
``tx list --json`` and ``peek --json`` print these objects, and the daemon's
HTTP API (``/api/v1/...``) answers with them: both build them here, from
the SDK's values (:mod:`qmgr.client`), which both get from the client
protocol's values with the same ``from_wire`` conversions. So a shape is
defined once, and a field added here appears in both.

The functions are pure: they read their argument and return a dict of
JSON-ready values (times in ISO 8601 with microseconds and the zone, ids
as strings). The one difference the HTTP API asks for is a message's body,
which it bounds: :func:`message_json` with ``bounded`` gives the body as
base64 of at most that many bytes, whether it was cut, and a preview of
its text when it is UTF-8.
"""

from __future__ import annotations

import base64
import codecs
import datetime as dt
from typing import Any, Final

from ._message import IncomingInfo, Message, OutgoingInfo, QueueInfo, Status
from .calls.routing import Routing
from .calls.two_phase import TransactionInfo

__all__ = [
    "PREVIEW_CHARS",
    "alternates",
    "incoming_json",
    "iso",
    "message_json",
    "outgoing_json",
    "poison_json",
    "queue_json",
    "status_json",
    "transaction_json",
]

#: Characters of a bounded body's text preview.
PREVIEW_CHARS: Final = 1024


def iso(value: dt.datetime) -> str:
    """A time for JSON: ISO 8601 with microseconds and the zone."""
    return value.isoformat(timespec="microseconds")


def _optional_iso(value: dt.datetime | None) -> str | None:
    return None if value is None else iso(value)


def poison_json(info: QueueInfo) -> dict[str, Any]:
    """A queue's poison settings as JSON fields (``null`` when off)."""
    return {
        "retry_count": info.retry_count,
        "retry_cycles": info.retry_cycles,
        "retry_delay": info.retry_delay,
    }


def queue_json(info: QueueInfo) -> dict[str, Any]:
    """A queue (``queue list``, ``queue show``, ``status``; ``GET /api/v1/queues``)."""
    return {
        "name": info.name,
        "format_name": info.format_name,
        "kind": str(info.kind),
        "transactional": info.transactional,
        "journal": info.journal,
        "quota": info.quota,
        "depth": info.depth,
        "bytes": info.bytes,
        "locked": info.locked,
        "created_at": iso(info.created_at),
        **poison_json(info),
    }


def outgoing_json(
    info: OutgoingInfo, routing: Routing | None = None, *, with_alternates: bool = False
) -> dict[str, Any]:
    """An outgoing queue; ``with_alternates``, also the next hops its route lists
    besides the one in use, from the ``routing`` of its destination (none when
    that is None: no routing known) (``outgoing list``; ``GET /api/v1/outgoing``)."""
    found: dict[str, Any] = {
        "destination": info.destination,
        "next_hop": info.next_hop,
        "state": info.state,
        "next_attempt": _optional_iso(info.next_attempt),
        "waiting": info.waiting,
        "unacknowledged": info.unacknowledged,
        "sequence": info.sequence,
        "sequence_timestamp": info.sequence_timestamp,
        "sequence_ordinal": info.sequence_ordinal,
        "next_number": info.next_number,
        "last_order_ack": _optional_iso(info.last_order_ack),
        "last_error": info.last_error,
    }
    if with_alternates:
        found["alternates"] = alternates(routing)
    return found


def alternates(routing: Routing | None) -> list[str]:
    """The next hops of a destination other than the one in use, in order."""
    return [] if routing is None else [h.hop for h in routing.hops if not h.in_use]


def incoming_json(info: IncomingInfo) -> dict[str, Any]:
    """An incoming sequence (in ``status``; ``GET /api/v1/incoming``)."""
    return {
        "source_qm": str(info.source_qm),
        "queue": info.queue,
        "sequence": info.sequence,
        "sequence_timestamp": info.sequence_timestamp,
        "sequence_ordinal": info.sequence_ordinal,
        "last_number": info.last_number,
        "reject_count": info.reject_count,
        "last_access": iso(info.last_access),
    }


def status_json(info: Status, routing: Routing | None = None) -> dict[str, Any]:
    """The status (``qmgr status --json``; ``GET /api/v1/status``); with the
    routing, also whether it is a router and its aliases."""
    found: dict[str, Any] = {
        "qm_name": info.qm_name,
        "qm_guid": str(info.qm_guid),
        "server_version": info.server_version,
        "started_at": iso(info.started_at),
        "uptime_seconds": round(info.uptime.total_seconds(), 3),
        "connections": info.connections,
        "open_transactions": info.open_transactions,
        "uncommitted_bytes": info.uncommitted_bytes,
        "commits": info.commits,
        "aborts": info.aborts,
        "batches": info.batches,
        "erasing": info.erasing,
        "queues": [queue_json(q) for q in info.queues],
        "outgoing": [outgoing_json(o) for o in info.outgoing],
        "incoming": [incoming_json(i) for i in info.incoming],
    }
    if routing is not None:
        found["router"] = routing.router
        found["aliases"] = list(routing.aliases)
    return found


def transaction_json(info: TransactionInfo) -> dict[str, Any]:
    """A transaction (``since``: when prepared or resolved; ``tx list``;
    ``GET /api/v1/transactions``)."""
    return {
        "xid": info.xid,
        "state": str(info.state),
        "since": iso(dt.datetime.fromtimestamp(info.since, dt.UTC)),
        "age_seconds": round(info.age, 3),
        "sends": info.sends,
        "receives": info.receives,
        "bytes": info.bytes,
    }


def message_json(message: Message, *, bounded: int | None = None) -> dict[str, Any]:
    """A message (``receive --json``, ``peek --json``; the pages of
    ``GET /api/v1/queues/NAME/messages``).

    Without ``bounded``, the body is its text when it is UTF-8, else base64
    (``body_encoding`` says which). With ``bounded``, the body is always
    base64 of its first ``bounded`` bytes at most, ``body_truncated`` says
    whether it was cut, and ``text_preview`` is the start of its text when
    it is UTF-8 (else ``null``); ``body_size`` is always the whole size.
    """
    data = message.body
    if bounded is None:
        try:
            body = data.decode("utf-8")
            encoding = "utf-8"
        except UnicodeDecodeError:
            body = base64.b64encode(data).decode("ascii")
            encoding = "base64"
        extra: dict[str, Any] = {}
    else:
        kept = bytes(data[:bounded])
        truncated = len(data) > len(kept)
        body = base64.b64encode(kept).decode("ascii")
        encoding = "base64"
        extra = {"body_truncated": truncated, "text_preview": _preview(kept, cut=truncated)}
    return {
        "queue": message.queue,
        "lookup_id": message.lookup_id,
        "id": message.id,
        "label": message.label,
        "body": body,
        "body_encoding": encoding,
        "body_size": len(data),
        **extra,
        "correlation_id": None if message.correlation_id is None else message.correlation_id.hex(),
        "app_specific": message.app_specific,
        "priority": message.priority,
        "message_class": message.message_class,
        "class_name": message.class_name,
        "acknowledged_id": message.acknowledged_id,
        "sent_time": iso(message.sent_time),
        "arrived_time": iso(message.arrived_time),
        "source_qm": str(message.source_qm),
        "delivery": message.delivery.name.lower(),
        "acknowledge": message.acknowledge,
        "journal": message.journal,
        "admin_queue": message.admin_queue,
        "response_queue": message.response_queue,
        "time_to_reach_queue": message.time_to_reach_queue,
        "time_to_be_received": message.time_to_be_received,
        "transactional": message.transactional,
        "destination": message.destination,
        "abort_count": message.abort_count,
        "move_count": message.move_count,
        "last_move_time": _optional_iso(message.last_move_time),
    }


def _preview(kept: bytes, *, cut: bool) -> str | None:
    """The start of ``kept`` as text if it is UTF-8 (a character cut at the end
    of a cut body does not count against it), else None."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(kept, final=not cut)
    except UnicodeDecodeError:
        return None
    return text[:PREVIEW_CHARS]
