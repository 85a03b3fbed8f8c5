"""Queue administration over a session: create, delete and purge (with their events and
the background work woken), list and status as a connection's version has them."""

from __future__ import annotations

import uuid

import structlog
import trio
import trio.testing
from kit import (
    Connection,
    enable_permissions,
    error,
    make_queue,
    message,
    open_session,
    permissions,
)

from qmgr.server.client.handlers.replies import queue_info
from qmgr.server.client.services import Services
from wire import client as cf


class WakeupCount:
    """Counts the wake-ups of the background work."""

    def __init__(self) -> None:
        self.count = 0

    def set(self) -> None:
        self.count += 1


async def test_a_queue_is_created_deleted_and_purged_with_an_event_each(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    wakeups = WakeupCount()
    services.maintenance = wakeups  # type: ignore[assignment]
    with structlog.testing.capture_logs() as logs:
        created = await conn.client.call(cf.CreateQueue(name="q", transactional=True))
        assert created == cf.Ok(value=services.core.queue("q").queue_id)
        for body in (b"1", b"2"):
            assert isinstance(await conn.client.call(cf.Send(message=message("q", body))), cf.Sent)
        assert await conn.client.call(cf.PurgeQueue(name="q")) == cf.Ok(value=2)
        assert wakeups.count == 1  # the background work erases them
        assert await conn.client.call(cf.DeleteQueue(name="q")) == cf.Ok(value=0)
        assert wakeups.count == 2
    events = [(e["event"], e.get("queue")) for e in logs if e["event"].startswith("queue_")]
    assert events == [("queue_created", "q"), ("queue_purged", "q"), ("queue_deleted", "q")]
    again = await conn.client.call(cf.PurgeQueue(name="q"))
    error(again, cf.ErrorCode.QUEUE_NOT_FOUND)
    error(await conn.client.call(cf.CreateQueue(name="bad\\name")), cf.ErrorCode.INVALID_NAME)


async def test_a_deleted_queue_wakes_the_receives_waiting_on_it(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q")
    async with open_session(services) as b:
        [waiting] = await b.client.send(cf.Receive(queue="q", timeout_ms=600_000))
        await trio.testing.wait_all_tasks_blocked()
        assert isinstance(await conn.client.call(cf.DeleteQueue(name="q")), cf.Ok)
        frame = await b.client.reply()
        assert frame is not None
        assert frame.request_id == waiting
        error(frame.value, cf.ErrorCode.QUEUE_NOT_FOUND)


async def test_a_new_queue_gets_its_list_of_permissions_in_the_same_write(
    services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    enable_permissions(services, default_acl={"everyone": ["peek"]})
    async with open_session(services, principal="alice") as alice:
        await make_queue(alice.client, "q")
        assert dict(await permissions(alice.client, "q")) == {"alice": 0xFF, "everyone": 0x02}


async def test_list_queues_and_status_answer_what_the_daemon_says(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q", retry_count=2)
    infos = tuple(queue_info(q, 0) for q in services.core.queues.all())
    services.queue_infos = lambda: infos
    counters = ("connections", "open_transactions", "commits", "aborts", "batches", "erasing")
    status = cf.StatusInfo(
        qm_name="test",
        qm_guid=uuid.UUID(int=1),
        server_version="test",
        started_at=0.0,
        uncommitted_bytes=0,
        queues=infos,
        **dict.fromkeys(counters, 1),
    )
    services.status = lambda: status
    assert await conn.client.call(cf.ListQueues()) == cf.QueueList(queues=infos)
    assert await conn.client.call(cf.GetStatus()) == status
    async with open_session(services, greet=False) as old:
        await old.client.hello(max_version=4)
        answered = await old.client.call(cf.GetStatus())
        assert isinstance(answered, cf.StatusInfo)
        assert [info.retry for info in answered.queues] == [None] * len(infos)
