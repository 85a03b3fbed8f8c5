"""What the handlers' replies are made of: stored messages and queues, as a connection's
version has them.

A receive answers with the stored bytes of a message behind a small header,
without decoding them (:func:`message_frame`). Version 5 added trailers to
some replies: a message's counters (aborts, moves) and a queue's retry
settings; a connection that agreed on an older version gets them without
(:func:`message_frame`, :func:`counters_trailer`, :func:`for_version`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Final

import storage
from qmgr.core.names import display_format_name
from storage import QueueKind, QueueRecord
from wire import client as cf

from ..request_context import RequestContext

__all__ = ["counters_trailer", "for_version", "message_frame", "queue_info"]


def message_frame(
    ctx: RequestContext, request_id: int, queue: QueueRecord, lookup_id: int, record: bytes
) -> bytes:
    """A Message reply around a stored message; with its counters on a version 5
    connection."""
    counters = None
    if ctx.counted:
        found = ctx.services.core.poison.counters(queue.queue_id, (lookup_id,))
        counters = _wire_counters(found.get(lookup_id, storage.NO_COUNTERS))
    return cf.encode_message_reply(
        request_id,
        queue.display_name,
        lookup_id,
        storage.message_arrived_time(record),
        storage.message_payload(record),
        counters,
    )


def counters_trailer(ctx: RequestContext, queue: QueueRecord, lookup_ids: Iterable[int]) -> bytes:
    """The counters trailer of a MessageList of these messages (empty before version 5)."""
    if not ctx.counted:
        return b""
    ids = list(lookup_ids)
    found = ctx.services.core.poison.counters(queue.queue_id, ids)
    none = storage.NO_COUNTERS
    return b"".join(
        cf.counters_record(_wire_counters(found.get(lookup_id, none))) for lookup_id in ids
    )


def for_version(ctx: RequestContext, queues: tuple[cf.QueueInfo, ...]) -> tuple[cf.QueueInfo, ...]:
    """Queue infos as this connection's version has them (no retry settings before 5)."""
    if ctx.counted or all(info.retry is None for info in queues):
        return queues
    return tuple(dataclasses.replace(info, retry=None) for info in queues)


def _wire_counters(found: storage.MessageCounters) -> cf.MessageCounters:
    return cf.MessageCounters(
        abort_count=found.abort_count,
        move_count=found.move_count,
        last_move_time=found.last_move_time,
    )


#: How clients see each kind of stored queue (the system journal is a journal
#: queue to them; outgoing queues are not listed as queues).
_WIRE_KINDS: Final = {
    QueueKind.NORMAL: cf.QueueKind.NORMAL,
    QueueKind.JOURNAL: cf.QueueKind.JOURNAL,
    QueueKind.DEADLETTER: cf.QueueKind.DEADLETTER,
    QueueKind.DEADXACT: cf.QueueKind.DEADXACT,
    QueueKind.SYSTEM_JOURNAL: cf.QueueKind.JOURNAL,
    QueueKind.SUBQUEUE: cf.QueueKind.SUBQUEUE,
}


def queue_info(record: QueueRecord, held: int) -> cf.QueueInfo:
    """The client-protocol view of a queue."""
    poison = record.poison
    return cf.QueueInfo(
        name=record.display_name,
        format_name=display_format_name(record.name),
        kind=int(_WIRE_KINDS[record.kind]),
        transactional=record.transactional,
        journal=record.journal,
        quota=record.quota,
        depth=record.depth,
        bytes=record.bytes,
        locked=held,
        created_at=record.created_at,
        retry=None
        if poison is None
        else cf.RetrySettings(
            retry_count=poison.retry_count,
            retry_cycles=poison.retry_cycles,
            retry_delay=poison.retry_delay,
        ),
    )
