"""Messages and transactions over a session: a commit is whole and wakes a waiting
receive, bounds on waiting receives and on what open transactions hold, a quota
in a transaction, and waits on journals."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing
from kit import Connection, error, make_queue, message, open_connection, open_services, open_session

from qmgr.core.engine import Limits
from qmgr.server.client.services import Services
from wire import client as cf


async def receive_waiting_in_transaction_1(conn: Connection, timeout_ms: int = 60_000) -> int:
    """A transactional queue ``q``, and transaction 1 of ``conn`` begun with a receive
    waiting on it (the queue is empty); that receive's request id."""
    await make_queue(conn.client, "q", transactional=True)
    _, waiting = await conn.client.send(
        cf.Begin(tx_id=1), cf.Receive(tx_id=1, queue="q", timeout_ms=timeout_ms)
    )
    return waiting


async def test_a_transaction_commits_whole_and_a_waiting_receive_wakes(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q", transactional=True)
    async with open_session(services) as b:
        [waiting] = await b.client.send(cf.Receive(queue="q", timeout_ms=60_000))
        # Begin and sends in a transaction are answered only if they fail.
        await conn.client.send(
            cf.Begin(tx_id=1),
            cf.Send(tx_id=1, message=message("q", b"one")),
            cf.Send(tx_id=1, message=message("q", b"two")),
        )
        assert isinstance(await conn.client.call(cf.Commit(tx_id=1)), cf.Ok)
        frame = await b.client.reply()
        assert frame is not None
        assert frame.request_id == waiting
        assert isinstance(frame.value, cf.MessageReply)
        assert frame.value.message.message.body == b"one"
        assert frame.value.message.lookup_id == 1


async def test_an_abort_puts_the_received_message_back(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q", transactional=True)
    sent = await conn.client.call(cf.Send(message=message("q", b"m")))
    assert isinstance(sent, cf.Sent)
    begun = await conn.client.call(cf.Begin())
    assert isinstance(begun, cf.Ok)
    tx_id = begun.value
    assert isinstance(await conn.client.call(cf.Receive(tx_id=tx_id, queue="q")), cf.MessageReply)
    assert await conn.client.call(cf.Abort(tx_id=tx_id)) == cf.Ok()
    again = await conn.client.call(cf.Receive(queue="q", peek=True))
    assert isinstance(again, cf.MessageReply)
    assert again.message.lookup_id == sent.lookup_id
    gone = await conn.client.call(cf.Commit(tx_id=tx_id))
    error(gone, cf.ErrorCode.TRANSACTION_NOT_FOUND)


async def test_a_send_mode_out_of_range_is_an_invalid_argument(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q")
    refused = await conn.client.call(cf.Send(mode=3, message=message("q", b"x")))
    assert "not 3" in error(refused, cf.ErrorCode.INVALID_ARGUMENT).message


async def test_exceeding_a_quota_in_a_transaction_says_quota_exceeded(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "small", transactional=True, quota=10)
    await conn.client.send(
        cf.Begin(tx_id=1),
        cf.Send(tx_id=1, message=message("small", b"x" * 8)),
        cf.Send(tx_id=1, message=message("small", b"y" * 8)),
    )
    error(await conn.client.call(cf.Commit(tx_id=1)), cf.ErrorCode.QUOTA_EXCEEDED)


async def test_waiting_receives_per_connection_are_bounded(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_connection(tmp_path, max_waiting_receives=2) as a:
        await make_queue(a.client, "q")
        await a.client.send(*(cf.Receive(queue="q", timeout_ms=60_000) for _ in range(2)))
        reply = await a.client.call(cf.Receive(queue="q", timeout_ms=60_000))
        error(reply, cf.ErrorCode.LIMIT_EXCEEDED)


async def test_a_request_id_that_a_waiting_receive_uses_is_refused_not_reused(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Receives that all name one request id would replace one another in the count
    # of waiting receives, and their answers could not be told apart.
    async with open_connection(tmp_path, max_waiting_receives=2) as a:
        await make_queue(a.client, "q")
        wait = cf.Receive(queue="q", timeout_ms=60_000)
        await a.client.send_raw(b"".join(cf.encode_frame(7, wait) for _ in range(3)))
        for _ in range(2):
            refused = await a.client.error()
            assert refused.code == cf.ErrorCode.INVALID_ARGUMENT
            assert "request id 7 is already used by a receive that waits" in refused.message
        # The one that waits is the first: a message ends it, and the id is free again.
        for body in (b"one", b"two"):
            if body == b"two":
                await a.client.send_raw(cf.encode_frame(7, wait))
            await a.client.send(cf.Send(message=message("q", body)))
            frame = await a.client.reply()
            while frame is not None and frame.request_id != 7:
                frame = await a.client.reply()
            assert frame is not None
            assert isinstance(frame.value, cf.MessageReply)
            assert frame.value.message.message.body == body


@pytest.mark.parametrize("peek", [True, False], ids=["peeks", "receives"])
async def test_the_waiting_receives_of_a_client_that_does_not_read_hold_one_reply_at_a_time(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, peek: bool
) -> None:
    # Fifty receives wait on an empty queue of a client that reads nothing more; each
    # message sent to it would be a 1 MiB reply. Answers wait for room in its outbox
    # instead of piling up there, one copy of a message each.
    body = b"x" * (1 << 20)
    async with (
        open_services(tmp_path) as services,
        open_session(services, lockstep=True) as slow,
        open_session(services) as sender,
    ):
        await make_queue(sender.client, "q")
        await slow.client.send(
            *(cf.Receive(queue="q", peek=peek, timeout_ms=60_000) for _ in range(50))
        )
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(1 if peek else 50):
            sent = await sender.client.call(cf.Send(message=message("q", body)))
            assert isinstance(sent, cf.Sent)
        await trio.testing.wait_all_tasks_blocked()
        # One reply on its way to the client (its write waits for the reader), one in
        # the outbox: no more.
        assert slow.session.connection.outbox_bytes < 2 * len(body)
        # Read, every receive is answered with the message.
        for _ in range(50):
            frame = await slow.client.reply()
            assert frame is not None
            assert isinstance(frame.value, cf.MessageReply)
            assert frame.value.message.message.body == body


async def test_a_transaction_has_one_waiting_receive_and_commits_without_it(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    await receive_waiting_in_transaction_1(conn)
    second = await conn.client.call(cf.Receive(tx_id=1, queue="q", timeout_ms=60_000))
    assert "already has a receive waiting" in error(second, cf.ErrorCode.TRANSACTION_USAGE).message
    refused = await conn.client.call(cf.Commit(tx_id=1))
    assert "still has a receive waiting" in error(refused, cf.ErrorCode.TRANSACTION_USAGE).message


async def test_an_abort_ends_the_receive_waiting_in_its_transaction(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    waiting = await receive_waiting_in_transaction_1(conn)
    assert await conn.client.call(cf.Abort(tx_id=1)) == cf.Ok()
    frame = await conn.client.reply()
    assert frame is not None
    assert frame.request_id == waiting
    ended = error(frame.value, cf.ErrorCode.TRANSACTION_ABORTED)
    assert ended.message == "transaction 1 was aborted while this receive waited"


async def test_a_receive_that_waits_in_vain_gets_no_message(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q")
    started = trio.current_time()
    assert await conn.client.call(cf.Receive(queue="q", timeout_ms=5_000)) == cf.NoMessage()
    assert trio.current_time() - started == pytest.approx(5.0)
    assert await conn.client.call(cf.Receive(queue="q")) == cf.NoMessage()


async def test_uncommitted_sends_are_bounded_daemon_wide(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    core_limits = Limits(max_uncommitted_bytes=100_000)
    async with open_services(tmp_path / "s", core_limits=core_limits) as services:
        async with open_session(services) as a, open_session(services) as b:
            await make_queue(a.client, "q", transactional=True)
            await a.client.send(
                cf.Begin(tx_id=1), cf.Send(tx_id=1, message=message("q", b"x" * 60_000))
            )
            await b.client.send(cf.Begin(tx_id=1))
            reply = await b.client.call(cf.Send(tx_id=1, message=message("q", b"y" * 60_000)))
            error(reply, cf.ErrorCode.LIMIT_EXCEEDED)
            assert isinstance(await a.client.call(cf.Commit(tx_id=1)), cf.Ok)


async def test_a_transaction_waiting_for_a_message_is_not_idle(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    waiting = await receive_waiting_in_transaction_1(conn, timeout_ms=600_000)
    await trio.sleep(500)  # a worker waiting on an empty queue
    core = services.core
    assert core.transactions.idle(trio.current_time(), timeout=1) == []
    async with open_session(services) as b:
        reply = await b.client.call(cf.Send(mode=2, message=message("q", b"work")))
        assert isinstance(reply, cf.Sent)
    frame = await conn.client.reply()
    assert frame is not None
    assert frame.request_id == waiting
    assert isinstance(frame.value, cf.MessageReply)
    # Its idle time counts from the end of the wait, not from the Begin.
    now = trio.current_time()
    assert core.transactions.idle(now + 0.5, timeout=1) == []
    assert len(core.transactions.idle(now + 2, timeout=1)) == 1


@pytest.mark.parametrize("in_transaction", [False, True])
async def test_a_receive_waiting_on_a_journal_wakes_when_a_copy_arrives(
    conn: Connection,
    services: Services,
    autojump_clock: trio.testing.MockClock,
    in_transaction: bool,
) -> None:
    a = conn
    await make_queue(a.client, "j", journal=True, transactional=in_transaction)
    mode = 2 if in_transaction else 1
    reply = await a.client.call(cf.Send(mode=mode, message=message("j", b"kept")))
    assert isinstance(reply, cf.Sent)
    async with open_session(services) as b:
        [waiting] = await b.client.send(cf.Receive(queue="j;journal", timeout_ms=600_000))
        await trio.testing.wait_all_tasks_blocked()
        started = trio.current_time()
        if in_transaction:
            await a.client.send(cf.Begin(tx_id=1))
            got = await a.client.call(cf.Receive(tx_id=1, queue="j"))
            assert isinstance(got, cf.MessageReply)
            assert isinstance(await a.client.call(cf.Commit(tx_id=1)), cf.Ok)
        else:
            got = await a.client.call(cf.Receive(queue="j"))
            assert isinstance(got, cf.MessageReply)
        frame = await b.client.reply()
        assert frame is not None
        assert frame.request_id == waiting
        assert isinstance(frame.value, cf.MessageReply)
        assert frame.value.message.message.body == b"kept"
        assert trio.current_time() - started < 1


async def test_a_peek_range_stops_where_its_frame_is_full(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q")
    big = message("q", b"x" * (cf.MAX_MESSAGE_BODY // 3))
    for _ in range(4):
        assert isinstance(await conn.client.call(cf.Send(mode=1, message=big)), cf.Sent)
    page = await conn.client.call(cf.PeekRange(queue="q"))
    assert isinstance(page, cf.MessageList)
    assert [m.lookup_id for m in page.messages] == [1, 2]  # a third would pass the frame limit
    rest = await conn.client.call(cf.PeekRange(queue="q", after=2))
    assert isinstance(rest, cf.MessageList)
    assert [m.lookup_id for m in rest.messages] == [3, 4]


# ---------------------------------------------------------------------- CancelReceive


async def test_a_cancelled_receive_is_answered_as_at_its_timeout_and_takes_nothing_after(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q")
    [waiting] = await conn.client.send(cf.Receive(queue="q", timeout_ms=60_000))
    await trio.testing.wait_all_tasks_blocked()
    started = trio.current_time()
    await conn.client.send(cf.CancelReceive(request_id=waiting))
    frame = await conn.client.reply()
    assert frame == cf.Frame(request_id=waiting, value=cf.NoMessage())
    assert trio.current_time() == started  # not at its timeout: at once
    # Nothing of it is left waiting: the next message stays in the queue.
    sent = await conn.client.call(cf.Send(mode=1, message=message("q", b"kept")))
    assert isinstance(sent, cf.Sent)
    assert services.core.queue("q").depth == 1
    # The cancel itself was never answered: the next reply is the next request's.
    assert await conn.client.call(cf.GetStatus()) is not None
    assert conn.session.context.cancels == {}


async def test_a_cancelled_receive_in_a_transaction_leaves_the_transaction_usable(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    waiting = await receive_waiting_in_transaction_1(conn)
    await trio.testing.wait_all_tasks_blocked()
    await conn.client.send(cf.CancelReceive(request_id=waiting))
    assert await conn.client.reply() == cf.Frame(request_id=waiting, value=cf.NoMessage())
    await conn.client.send(cf.Send(tx_id=1, message=message("q", b"one")))
    assert await conn.client.call(cf.Commit(tx_id=1)) == cf.Ok()
    assert services.core.queue("q").depth == 1


async def test_a_cancelled_peek_is_answered_no_message(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q")
    [waiting] = await conn.client.send(cf.Receive(queue="q", timeout_ms=60_000, peek=True))
    await trio.testing.wait_all_tasks_blocked()
    await conn.client.send(cf.CancelReceive(request_id=waiting))
    assert await conn.client.reply() == cf.Frame(request_id=waiting, value=cf.NoMessage())


async def test_a_cancel_sent_with_its_receive_stops_it_before_it_waits(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q")
    receive = cf.encode_frame(7, cf.Receive(queue="q", timeout_ms=60_000))
    cancel = cf.encode_frame(8, cf.CancelReceive(request_id=7))
    started = trio.current_time()
    await conn.client.send_raw(bytes(receive) + bytes(cancel))  # one read for both
    assert await conn.client.reply() == cf.Frame(request_id=7, value=cf.NoMessage())
    assert trio.current_time() == started


async def test_a_cancel_of_no_waiting_receive_is_ignored(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q")
    await conn.client.send(cf.Send(mode=1, message=message("q", b"one")))
    got = await conn.client.call(cf.Receive(queue="q"))
    assert isinstance(got, cf.MessageReply)
    # Its receive was answered already; another id names nothing.
    await conn.client.send(cf.CancelReceive(request_id=1), cf.CancelReceive(request_id=99_999))
    assert await conn.client.call(cf.Receive(queue="q")) == cf.NoMessage()


async def test_a_cancel_needs_version_8(
    services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_session(services, greet=False) as old:
        await old.client.hello(max_version=cf.ROUTING_VERSION)
        [request_id] = await old.client.send(cf.CancelReceive(request_id=1))
        frame = await old.client.reply()
        assert frame is not None
        assert frame.request_id == request_id
        error(frame.value, cf.ErrorCode.BAD_REQUEST)
