"""Poison handling over a session: settings and moves between a queue and its subqueues,
what a version 5 connection gets, and the poison worker's returns from ``;retry``."""

from __future__ import annotations

import time

import structlog
import trio
import trio.testing
from kit import Connection, FrameClient, error, make_queue, message

from qmgr.server.client.handlers.replies import queue_info
from qmgr.server.client.services import Services
from qmgr.server.workers.poison import PoisonWorker
from wire import client as cf


async def aborted_message(client: FrameClient) -> None:
    """A transactional queue with poison settings and one message aborted once."""
    await make_queue(client, "q", transactional=True, retry_count=3)
    assert isinstance(await client.call(cf.Send(message=message("q", b"m"))), cf.Sent)
    await client.send(cf.Begin(tx_id=1))
    assert isinstance(await client.call(cf.Receive(tx_id=1, queue="q")), cf.MessageReply)
    assert await client.call(cf.Abort(tx_id=1)) == cf.Ok()


async def test_a_version_5_connection_gets_counters_and_retry_settings(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    services.queue_infos = lambda: tuple(queue_info(q, 0) for q in services.core.queues.all())
    await aborted_message(conn.client)
    counted = cf.MessageCounters(abort_count=1)
    peeked = await conn.client.call(cf.Receive(queue="q", peek=True))
    assert isinstance(peeked, cf.MessageReply)
    assert peeked.message.counters == counted  # known before it is written
    page = await conn.client.call(cf.PeekRange(queue="q"))
    assert isinstance(page, cf.MessageList)
    assert [m.counters for m in page.messages] == [counted]
    queues = await conn.client.call(cf.ListQueues())
    assert isinstance(queues, cf.QueueList)
    [info] = [q for q in queues.queues if q.name == "q"]
    assert info.retry == cf.RetrySettings(retry_count=3, retry_cycles=2, retry_delay=1800.0)
    # Nothing sent to a subqueue; a move names a family.
    refused = await conn.client.call(cf.Send(message=message("q;retry", b"x")))
    error(refused, cf.ErrorCode.ACCESS_DENIED)
    odd = await conn.client.call(cf.MoveMessages(source="q", target="system$;deadxact"))
    error(odd, cf.ErrorCode.INVALID_ARGUMENT)
    bad = await conn.client.call(cf.SetQueueProperties(name="q", poison=7))
    error(bad, cf.ErrorCode.INVALID_ARGUMENT)


async def test_settings_change_with_an_event(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q", transactional=True)
    with structlog.testing.capture_logs() as logs:
        on = cf.SetQueueProperties(name="q", poison=int(cf.PoisonHandling.ON), retry_count=1)
        assert await conn.client.call(on) == cf.Ok(value=services.core.queue("q").queue_id)
        off = cf.SetQueueProperties(name="q", poison=int(cf.PoisonHandling.OFF))
        assert isinstance(await conn.client.call(off), cf.Ok)
    changes = [(e["poison_handling"], e["retry_count"]) for e in logs]
    assert changes == [(True, 1), (False, None)]


async def test_messages_move_one_at_a_time_all_at_once_or_in_a_transaction(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    client = conn.client
    await make_queue(client, "q", transactional=True)
    for body in (b"1", b"2", b"3"):
        assert isinstance(await client.call(cf.Send(message=message("q", body))), cf.Sent)
    with structlog.testing.capture_logs() as logs:
        one = await client.call(cf.MoveMessages(source="q", target="q;poison", lookup_id=2))
        assert isinstance(one, cf.Moved)
        assert one.count == 1
        every = await client.call(cf.MoveMessages(source="q", target="q;poison", all=True))
        assert isinstance(every, cf.Moved)
        assert every.count == 2
    assert [(e["event"], e["count"]) for e in logs] == [
        ("messages_moved", 1),
        ("messages_moved", 2),
    ]
    missing = await client.call(cf.MoveMessages(source="q", target="q;poison", lookup_id=2))
    assert "is not in" in error(missing, cf.ErrorCode.QUEUE_NOT_FOUND).message
    nothing = await client.call(cf.MoveMessages(source="q", target="q;poison"))
    assert nothing == cf.Moved(count=0, lookup_id=0)
    mixed = cf.MoveMessages(source="q;poison", target="q", all=True, tx_id=1)
    error(await client.call(mixed), cf.ErrorCode.TRANSACTION_USAGE)
    await client.send(cf.Begin(tx_id=1))
    back = await client.call(cf.MoveMessages(source="q;poison", target="q", tx_id=1))
    assert back == cf.Moved(count=1, lookup_id=0)
    assert await client.call(cf.Commit(tx_id=1)) == cf.Ok()
    page = await client.call(cf.PeekRange(queue="q"))
    assert isinstance(page, cf.MessageList)
    assert len(page.messages) == 1


async def test_the_worker_writes_the_aborts_and_returns_messages_from_retry(
    conn: Connection, services: Services
) -> None:
    worker = PoisonWorker(
        core=services.core, committer=services.committer, signals=services.signals
    )
    client = conn.client
    queue = cf.CreateQueue(
        name="q", transactional=True, retry_count=0, retry_cycles=1, retry_delay=0.2
    )
    assert isinstance(await client.call(queue), cf.Ok)
    await client.call(cf.Send(message=message("q", b"m")))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(worker.run)
        await client.send(cf.Begin(tx_id=1))
        assert isinstance(await client.call(cf.Receive(tx_id=1, queue="q")), cf.MessageReply)
        await client.call(cf.Abort(tx_id=1))
        # Moved to ;retry at once, then back after 0.2 s of wall time: a
        # receive waiting on the queue is woken by the return.
        started = time.time()
        with trio.fail_after(10):
            back = await client.call(cf.Receive(queue="q", peek=True, timeout_ms=9000))
        assert isinstance(back, cf.MessageReply)
        assert time.time() - started >= 0.19
        assert back.message.counters is not None
        assert back.message.counters.move_count == 2
        assert services.core.store.retries_due(None, 10) == []
        nursery.cancel_scope.cancel()
