"""Poison handling in a client session over memory streams: what a connection of an
older protocol may not send and does not get (no trailers), what a version 5
connection gets, and the poison worker's returns from ``;retry``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio
import trio.testing
from kit import FrameClient, message, open_services, open_session

import storage
from qmgr.server.poison_worker import PoisonWorker
from qmgr.server.requests import queue_info
from qmgr.server.services import Services
from wire import client as cf

POISON_SAMPLES: list[cf.ClientRequest] = [
    cf.SetQueueProperties(name="q", retry_count=1),
    cf.MoveMessages(source="q;poison", target="q"),
]


def test_the_samples_cover_every_poison_request() -> None:
    assert {type(request) for request in POISON_SAMPLES} == cf.POISON_REQUESTS


async def greet(client: FrameClient, version: int) -> None:
    await client.send(cf.Hello(client_name="old", min_version=2, max_version=version))
    hello = await client.reply()
    assert hello is not None
    assert isinstance(hello.value, cf.HelloOk)
    assert hello.value.version == version


@pytest.mark.parametrize("request_", POISON_SAMPLES, ids=lambda r: type(r).__name__)
async def test_a_protocol_4_connection_is_refused_the_poison_requests(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, request_: cf.ClientRequest
) -> None:
    async with (
        open_services(tmp_path / "s") as services,
        open_session(services, greet=False) as a,
    ):
        await greet(a.client, 4)
        [request_id] = await a.client.send(request_)
        frame = await a.client.reply()
        assert frame is not None
        assert frame.request_id == request_id
        assert isinstance(frame.value, cf.ErrorReply)
        assert frame.value.code == cf.ErrorCode.BAD_REQUEST
        assert "protocol version 5" in frame.value.message
        assert await a.client.reply() is None  # and the connection is closed


def list_queues_for_real(services: Services) -> None:
    """Let ListQueues answer with the store's queues (the kit answers none)."""
    core = services.core
    services.queue_infos = lambda: tuple(queue_info(q, 0) for q in core.queues.all())


async def _aborted_message(client: FrameClient) -> None:
    """A transactional queue with poison settings and one message aborted once."""
    created = await client.call(cf.CreateQueue(name="q", transactional=True, retry_count=3))
    assert isinstance(created, cf.Ok)
    sent = await client.call(cf.Send(message=message("q", b"m")))
    assert isinstance(sent, cf.Sent)
    await client.send(cf.Begin(tx_id=1))
    received = await client.call(cf.Receive(tx_id=1, queue="q"))
    assert isinstance(received, cf.MessageReply)
    assert await client.call(cf.Abort(tx_id=1)) == cf.Ok()


@pytest.mark.parametrize("version", [2, 3, 4])
async def test_older_connections_get_no_counters_and_no_retry_settings(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, version: int
) -> None:
    async with open_services(tmp_path / "s") as services:
        list_queues_for_real(services)
        async with open_session(services) as new:
            await _aborted_message(new.client)
        async with open_session(services, greet=False) as old:
            await greet(old.client, version)
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


async def test_a_version_5_connection_gets_counters_and_retry_settings(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services, open_session(services) as a:
        list_queues_for_real(services)
        await _aborted_message(a.client)
        counted = cf.MessageCounters(abort_count=1)
        peeked = await a.client.call(cf.Receive(queue="q", peek=True))
        assert isinstance(peeked, cf.MessageReply)
        assert peeked.message.counters == counted  # known before it is written
        page = await a.client.call(cf.PeekRange(queue="q"))
        assert isinstance(page, cf.MessageList)
        assert [m.counters for m in page.messages] == [counted]
        queues = await a.client.call(cf.ListQueues())
        assert isinstance(queues, cf.QueueList)
        [info] = [q for q in queues.queues if q.name == "q"]
        assert info.retry == cf.RetrySettings(retry_count=3, retry_cycles=2, retry_delay=1800.0)
        # Nothing sent to a subqueue; a move names a family.
        refused = await a.client.call(cf.Send(message=message("q;retry", b"x")))
        assert isinstance(refused, cf.ErrorReply)
        assert refused.code == cf.ErrorCode.ACCESS_DENIED
        odd = await a.client.call(cf.MoveMessages(source="q", target="system$;deadxact"))
        assert isinstance(odd, cf.ErrorReply)
        assert odd.code == cf.ErrorCode.INVALID_ARGUMENT
        bad = await a.client.call(cf.SetQueueProperties(name="q", poison=7))
        assert isinstance(bad, cf.ErrorReply)
        assert bad.code == cf.ErrorCode.INVALID_ARGUMENT


async def test_the_worker_writes_the_aborts_and_returns_messages_from_retry(
    tmp_path: Path,
) -> None:
    async with open_services(tmp_path / "s") as services, open_session(services) as a:
        worker = PoisonWorker(
            core=services.core, committer=services.committer, signals=services.signals
        )
        client = a.client
        assert isinstance(
            await client.call(
                cf.CreateQueue(
                    name="q", transactional=True, retry_count=0, retry_cycles=1, retry_delay=0.2
                )
            ),
            cf.Ok,
        )
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
            store = services.core.store
            record = store.get_queue("q")
            assert record is not None
            assert store.retries_due(None, 10) == []
            nursery.cancel_scope.cancel()
        assert isinstance(storage.NO_COUNTERS, storage.MessageCounters)
