"""What replies carry of stored messages and queues, by the connection's version: counters
and retry settings from version 5 on, none before; how each kind of queue is shown."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from kit import Connection, make_queue, message, open_session

import storage
from qmgr.server.client.handlers.replies import queue_info
from qmgr.server.client.services import Services
from wire import client as cf


async def aborted_message(conn: Connection) -> None:
    await make_queue(conn.client, "q", transactional=True, retry_count=3)
    assert isinstance(await conn.client.call(cf.Send(message=message("q", b"m"))), cf.Sent)
    await conn.client.send(cf.Begin(tx_id=1))
    assert isinstance(await conn.client.call(cf.Receive(tx_id=1, queue="q")), cf.MessageReply)
    assert await conn.client.call(cf.Abort(tx_id=1)) == cf.Ok()


@pytest.mark.parametrize("version", [2, 3, 4])
async def test_older_connections_get_no_counters_and_no_retry_settings(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock, version: int
) -> None:
    services.queue_infos = lambda: tuple(queue_info(q, 0) for q in services.core.queues.all())
    await aborted_message(conn)
    async with open_session(services, greet=False) as old:
        await old.client.hello(max_version=version)
        peeked = await old.client.call(cf.Receive(queue="q", peek=True))
        assert isinstance(peeked, cf.MessageReply)
        assert peeked.message.counters is None
        page = await old.client.call(cf.PeekRange(queue="q"))
        assert isinstance(page, cf.MessageList)
        assert [m.counters for m in page.messages] == [None]
        queues = await old.client.call(cf.ListQueues())
        assert isinstance(queues, cf.QueueList)
        names = {info.name: info for info in queues.queues}
        assert names["q"].retry is None  # it has settings; this connection is too old
        assert names["q;poison"].kind == cf.QueueKind.SUBQUEUE


async def test_a_received_message_carries_its_counters_from_version_5(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    await aborted_message(conn)
    await conn.client.send(cf.Begin(tx_id=2))
    got = await conn.client.call(cf.Receive(tx_id=2, queue="q"))
    assert isinstance(got, cf.MessageReply)
    assert got.message.counters == cf.MessageCounters(abort_count=1)


@pytest.mark.parametrize(
    ("kind", "shown"),
    [
        (storage.QueueKind.NORMAL, cf.QueueKind.NORMAL),
        (storage.QueueKind.JOURNAL, cf.QueueKind.JOURNAL),
        (storage.QueueKind.SYSTEM_JOURNAL, cf.QueueKind.JOURNAL),
        (storage.QueueKind.DEADLETTER, cf.QueueKind.DEADLETTER),
        (storage.QueueKind.DEADXACT, cf.QueueKind.DEADXACT),
        (storage.QueueKind.SUBQUEUE, cf.QueueKind.SUBQUEUE),
    ],
)
async def test_each_kind_of_stored_queue_is_shown_as_clients_know_it(
    conn: Connection, services: Services, kind: storage.QueueKind, shown: cf.QueueKind
) -> None:
    await make_queue(conn.client, "q", journal=True)
    record = next(q for q in services.core.queues.all() if q.kind is kind)
    info = queue_info(record, 3)
    assert info.kind == shown
    assert info.locked == 3
    assert info.name == record.display_name
