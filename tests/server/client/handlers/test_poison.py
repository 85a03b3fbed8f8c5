"""Poison handling over a session: settings and moves between a queue and its subqueues,
what a version 5 connection gets, the poison worker's returns from ``;retry``, and dead
letters moved back to their queues (with who may)."""

from __future__ import annotations

import time

import structlog
import trio
import trio.testing
from kit import Connection, FrameClient, error, make_queue, message, open_session

import storage
import wire
from qmgr.core.moves import BACK_STEP
from qmgr.core.permissions import Right
from qmgr.server.client.authorization import Authorization
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


async def test_the_quota_changes_with_an_event_and_judges_the_next_send(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    client = conn.client
    await make_queue(client, "q", quota=3, retry_count=4)
    queue_id = services.core.queue("q").queue_id
    assert isinstance(await client.call(cf.Send(message=message("q", b"abc"))), cf.Sent)
    full = await client.call(cf.Send(message=message("q", b"d")))
    error(full, cf.ErrorCode.QUOTA_EXCEEDED)
    with structlog.testing.capture_logs() as logs:
        raised = cf.SetQueueProperties(name="q", quota=4)
        assert await client.call(raised) == cf.Ok(value=queue_id)
        assert isinstance(await client.call(cf.Send(message=message("q", b"d"))), cf.Sent)
        # Lower than it holds: nothing more fits, and the poison settings stayed.
        assert isinstance(await client.call(cf.SetQueueProperties(name="q", quota=1)), cf.Ok)
        lowered = await client.call(cf.Send(message=message("q", b"")))
        error(lowered, cf.ErrorCode.QUOTA_EXCEEDED)
        both = cf.SetQueueProperties(name="q", no_quota=True, retry_count=1)
        assert isinstance(await client.call(both), cf.Ok)
        assert isinstance(await client.call(cf.Send(message=message("q", b"x" * 99))), cf.Sent)
    record = services.core.queue("q")
    assert (record.quota, record.poison) == (None, storage.PoisonSettings(1, 2, 1800.0))
    changes = [(e["event"], e["quota"], e["retry_count"]) for e in logs if "quota" in e]
    assert changes == [
        ("queue_properties_set", 4, 4),
        ("queue_properties_set", 1, 4),
        ("queue_properties_set", None, 1),
    ]
    # Only an application queue has a quota of its own.
    journal = await client.call(cf.SetQueueProperties(name="q;poison", quota=1))
    error(journal, cf.ErrorCode.ACCESS_DENIED)
    missing = await client.call(cf.SetQueueProperties(name="nothing", quota=1))
    error(missing, cf.ErrorCode.QUEUE_NOT_FOUND)


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


async def dead_letters(services: Services, *destinations: str) -> list[int]:
    """Keep messages sent here to ``destinations`` in ``system$;deadletter``, as
    messages that died here (NACK_Q_PURGED); their lookup ids there."""
    core = services.core
    ops = tuple(
        core.outcomes.dead_letter(
            message(
                destination,
                destination.encode(),
                label="dead",
                source_qm=services.qm_guid,
                ordinal=core.ordinals.take(),
            ),
            wire.MessageClass.NACK_Q_PURGED,
        )
        for destination in destinations
    )
    outcome = await services.committer.submit(storage.Unit(ops))
    ids = [result.lookup_id for result in outcome.results if isinstance(result, storage.Appended)]
    assert len(ids) == len(destinations)
    return ids


async def test_dead_letters_go_back_to_their_queues_with_their_ids(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    client = conn.client
    await make_queue(client, "orders")
    far, _ = await dead_letters(services, "DIRECT=TCP:10.0.0.5\\private$\\far", "orders")
    dead = "system$;deadletter"
    peeked = await client.call(cf.PeekRange(queue=dead))
    assert isinstance(peeked, cf.MessageList)
    ids = [m.message.message_id for m in peeked.messages]
    refused = await client.call(cf.MoveMessages(source=dead, target="", lookup_id=far))
    assert (
        "is a queue on another queue manager"
        in error(refused, cf.ErrorCode.INVALID_ARGUMENT).message
    )
    with structlog.testing.capture_logs() as logs:
        moved = await client.call(cf.MoveMessages(source=dead, target="", all=True))
    assert isinstance(moved, cf.Moved)
    assert moved.count == 1
    [event] = [e for e in logs if e["event"] == "messages_moved"]
    assert (event["back"], event["target"], event["count"], event["skipped"]) == (True, None, 1, 1)
    got = await client.call(cf.Receive(queue="orders"))
    assert isinstance(got, cf.MessageReply)
    back = got.message.message
    assert (back.message_id, back.body, back.message_class) == (ids[1], b"orders", 0)
    assert got.message.lookup_id == moved.lookup_id
    left = await client.call(cf.PeekRange(queue=dead))
    assert isinstance(left, cf.MessageList)
    assert [m.lookup_id for m in left.messages] == [far]
    # Into a queue of the other transactional kind: refused, naming both.
    await make_queue(client, "ledger", transactional=True)
    other = await client.call(cf.MoveMessages(source=dead, target="ledger", lookup_id=far))
    text = error(other, cf.ErrorCode.INVALID_ARGUMENT).message
    assert "'system$;deadletter' to 'ledger'" in text
    into = await client.call(cf.MoveMessages(source=dead, target="orders", lookup_id=far))
    assert isinstance(into, cf.Moved)
    assert into.count == 1


async def test_a_dead_letter_goes_back_only_where_its_mover_may_send(
    services: Services, authorization: Authorization, autojump_clock: trio.testing.MockClock
) -> None:
    dead = "system$;deadletter"
    async with open_session(services, principal="root") as root:
        await make_queue(root.client, "orders")
        for entry in ("alice", "bob"):
            grant = cf.ChangePermissions(queue=dead, entry=entry, grant=int(Right.RECEIVE))
            assert isinstance(await root.client.call(grant), cf.Permissions)
    [lookup_id] = await dead_letters(services, "orders")
    denied_before = authorization.tally.denied
    with structlog.testing.capture_logs() as logs:
        async with open_session(services, principal="alice") as alice:
            back = cf.MoveMessages(source=dead, target="", lookup_id=lookup_id)
            refused = error(await alice.client.call(back), cf.ErrorCode.ACCESS_DENIED)
            assert "'alice' may not send on queue 'orders'" in refused.message
            named = cf.MoveMessages(source=dead, target="orders", lookup_id=lookup_id)
            error(await alice.client.call(named), cf.ErrorCode.ACCESS_DENIED)
            every = await alice.client.call(cf.MoveMessages(source=dead, target="", all=True))
            assert every == cf.Moved(count=0, lookup_id=0)
    assert [e["request"] for e in logs if e["event"] == "access_denied"] == ["MoveMessages"] * 3
    assert authorization.tally.denied == denied_before + 3
    async with open_session(services, principal="root") as root:
        page = await root.client.call(cf.PeekRange(queue=dead))
        assert isinstance(page, cf.MessageList)
        assert [m.lookup_id for m in page.messages] == [lookup_id]  # it stayed
        grant = cf.ChangePermissions(queue="orders", entry="alice", grant=int(Right.SEND))
        assert isinstance(await root.client.call(grant), cf.Permissions)
    async with open_session(services, principal="carol") as carol:
        nobody = await carol.client.call(back)
        assert (
            "'carol' may not receive on queue" in error(nobody, cf.ErrorCode.ACCESS_DENIED).message
        )
    async with open_session(services, principal="alice") as alice:
        moved = await alice.client.call(back)
        assert isinstance(moved, cf.Moved)
        assert moved.count == 1


async def test_moving_all_back_goes_on_past_a_step_whose_queue_is_full(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    """A step of moves back that all fail (their queue is over its quota) does not
    end the move: the messages of the other queues, in later steps, go back."""
    client = conn.client
    await make_queue(client, "full", quota=1)
    await make_queue(client, "roomy")
    await dead_letters(services, *(["full"] * (BACK_STEP + 10)), *(["roomy"] * 5))
    moved = await client.call(cf.MoveMessages(source="system$;deadletter", target="", all=True))
    assert isinstance(moved, cf.Moved)
    assert moved.count == 5
    listed = await client.call(cf.PeekRange(queue="roomy", max_count=10))
    assert isinstance(listed, cf.MessageList)
    assert len(listed.messages) == 5
