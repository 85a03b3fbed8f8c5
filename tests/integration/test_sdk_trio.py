"""The trio SDK against a real daemon: shared clients, waiting receives, transactions."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable

import pytest
import trio
import trio.testing
from helpers import DaemonProcess, free_port, settings
from sdk_kit import check_closed_by_daemon_async

from qmgr.client import (
    AccessDenied,
    AsyncQueueManager,
    ConnectionLost,
    InvalidName,
    LimitExceeded,
    MessageTooLarge,
    QueueExists,
    QueueNotFound,
    QuotaExceeded,
    TransactionUsageError,
    open_client,
)
from wire.client import MAX_MESSAGE_BODY


@pytest.fixture
async def qm(shared_daemon: DaemonProcess, queue_name: str) -> AsyncIterator[AsyncQueueManager]:
    """A client of the shared daemon, which has made the transactional queue ``queue_name``."""
    async with open_client(shared_daemon.address) as qm:
        await qm.create_queue(queue_name, transactional=True)
        yield qm


async def test_queue_admin(shared_daemon: DaemonProcess, queue_name: str) -> None:
    async with open_client(shared_daemon.address, client_name="trio-test") as qm:
        assert qm.qm_name == "qmgr-shared"
        await qm.create_queue(queue_name, transactional=True, journal=True)
        with pytest.raises(QueueExists):
            await qm.create_queue(queue_name)
        with pytest.raises(InvalidName):
            await qm.create_queue("no;semicolons")
        names = {q.name for q in await qm.list_queues()}
        assert {queue_name, f"{queue_name};journal"} <= names
        await qm.send(queue_name, b"x")
        status = await qm.status()
        assert next(q for q in status.queues if q.name == queue_name).depth == 1
        assert await qm.purge_queue(queue_name) == 1
        assert await qm.delete_queue(queue_name) == 0
        with pytest.raises(QueueNotFound):
            await qm.delete_queue(queue_name)
    assert qm.closed


async def test_send_receive_peek(shared_daemon: DaemonProcess, queue_name: str) -> None:
    async with open_client(shared_daemon.address) as qm:
        await qm.create_queue(queue_name)
        message_id = await qm.send(queue_name, "hello", label="l", app_specific=7)
        peeked = await qm.peek(queue_name)
        assert peeked is not None
        assert peeked.id == message_id
        assert [m.id for m in await qm.peek_range(queue_name)] == [message_id]
        message = await qm.receive(queue_name)
        assert message == peeked
        assert (message.body, message.label, message.app_specific) == (b"hello", "l", 7)
        assert await qm.receive(queue_name) is None
        with trio.move_on_after(5):
            assert await qm.receive(queue_name, timeout=0.2) is None


async def test_errors_are_typed(shared_daemon: DaemonProcess, queue_name: str) -> None:
    async with open_client(shared_daemon.address) as qm:
        await qm.create_queue(queue_name, quota=10)
        with pytest.raises(QueueNotFound):
            await qm.send(f"missing-{uuid.uuid4().hex}", b"x")
        with pytest.raises(MessageTooLarge):
            await qm.send(queue_name, b"x" * (MAX_MESSAGE_BODY + 1))
        with pytest.raises(QuotaExceeded):
            await qm.send(queue_name, b"x" * 11)
        with pytest.raises(AccessDenied):
            await qm.send("system$;deadletter", b"x")
        with pytest.raises(TransactionUsageError):
            await qm.send(queue_name, b"x", transactional=True)
        assert await qm.receive(queue_name) is None


async def test_a_waiting_receive_does_not_block_other_tasks(
    qm: AsyncQueueManager, queue_name: str
) -> None:
    """One client shared by tasks: a receive waiting for ever while others work."""
    other = f"{queue_name}-other"
    await qm.create_queue(other)
    received: list[bytes] = []

    async def waiter() -> None:
        message = await qm.receive(queue_name, timeout=None)
        assert message is not None
        received.append(message.body)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            # Its request is out; the sends' replies on the same connection
            # come after the daemon has taken it.
            await trio.testing.wait_all_tasks_blocked()
            for i in range(20):  # the shared client keeps working meanwhile
                await qm.send(other, str(i))
            assert len(await qm.peek_range(other)) == 20
            started = trio.current_time()
            async with qm.begin() as tx:
                await tx.send(queue_name, b"wake")
        assert trio.current_time() - started < 2.0
    assert received == [b"wake"]


async def test_receive_wakes_on_commit_from_another_client(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    async with (
        open_client(shared_daemon.address) as reader,
        open_client(shared_daemon.address) as writer,
    ):
        await reader.create_queue(queue_name, transactional=True)
        result = []

        async def receive() -> None:
            async with reader.begin() as tx:
                result.append(await tx.receive(queue_name, timeout=5))

        with trio.fail_after(3):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(receive)
                await trio.testing.wait_all_tasks_blocked()  # its request is out
                await reader.list_queues()  # and the daemon took it (one connection)
                async with writer.begin() as tx:
                    await tx.send(queue_name, b"a")
                    await tx.send(queue_name, b"b")
        assert result[0] is not None
        assert result[0].body == b"a"
        assert [m.text for m in await reader.peek_range(queue_name)] == ["b"]


async def test_many_tasks_share_one_client(qm: AsyncQueueManager, queue_name: str) -> None:
    async def producer(n: int) -> None:
        for i in range(10):
            async with qm.begin() as tx:
                await tx.send(queue_name, f"{n}-{i}")
                await tx.send(queue_name, f"{n}-{i}-bis")

    async with trio.open_nursery() as nursery:
        for n in range(8):
            nursery.start_soon(producer, n)
    messages = await qm.peek_range(queue_name)
    assert len(messages) == 160
    bodies = [m.text for m in messages]
    for n in range(8):  # each transaction's two messages are adjacent, in order
        for i in range(10):
            index = bodies.index(f"{n}-{i}")
            assert bodies[index + 1] == f"{n}-{i}-bis"


async def test_commit_and_abort(qm: AsyncQueueManager, queue_name: str) -> None:
    for i in range(3):
        await qm.send(queue_name, f"m{i}")
    before = await qm.peek_range(queue_name)

    tx = await qm.begin()
    first = await tx.receive(queue_name)
    await tx.send(queue_name, b"discarded")
    await tx.abort()
    assert first is not None
    assert first.lookup_id == before[0].lookup_id
    after = await qm.peek_range(queue_name)
    assert [(m.lookup_id, m.body) for m in after] == [(m.lookup_id, m.body) for m in before]

    with pytest.raises(KeyError):
        async with qm.begin() as tx:
            await tx.receive(queue_name)
            raise KeyError("abort me")
    assert len(await qm.peek_range(queue_name)) == 3

    async with qm.begin() as tx:
        for i in range(5):
            await tx.send(queue_name, f"n{i}")
    new = (await qm.peek_range(queue_name))[3:]
    assert [m.text for m in new] == [f"n{i}" for i in range(5)]
    assert [m.lookup_id - new[0].lookup_id for m in new] == list(range(5))


async def test_failed_pipelined_send_aborts_the_commit(
    qm: AsyncQueueManager, queue_name: str
) -> None:
    plain = f"{queue_name}-plain"
    await qm.create_queue(plain)
    tx = qm.begin()
    await tx.send(queue_name, b"a")
    await tx.send(plain, b"not allowed in a transaction")
    await tx.send(queue_name, b"c")
    with pytest.raises(TransactionUsageError, match="aborted"):
        await tx.commit()
    assert await qm.peek_range(queue_name) == []
    assert await qm.peek_range(plain) == []


async def test_large_pipelined_transaction(qm: AsyncQueueManager, queue_name: str) -> None:
    async with qm.begin() as tx:
        for _ in range(3000):
            await tx.send(queue_name, b"z" * 300)
    assert (await qm.status()).open_transactions >= 0
    assert len(await qm.peek_range(queue_name, max=5000)) == 3000


async def test_a_cancelled_waiting_receive_takes_nothing_after(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    async with open_client(shared_daemon.address) as qm:
        await qm.create_queue(queue_name)
        for _ in range(3):
            with trio.move_on_after(0.1) as scope:
                await qm.receive(queue_name, timeout=None)
            assert scope.cancelled_caught
        # The daemon stopped each of them: the next message stays for the next receive.
        await qm.send(queue_name, b"must not vanish")
        assert len(await qm.peek_range(queue_name)) == 1
        message = await qm.receive(queue_name, timeout=5)
        assert message is not None
        assert message.body == b"must not vanish"


async def test_connection_refused_is_not_an_exception_group() -> None:
    port = free_port()
    with pytest.raises(ConnectionLost, match="refused"):
        async with open_client(f"127.0.0.1:{port}"):
            pass


async def test_a_connection_refused_at_a_limit_raises_limit_exceeded(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(extra_args=settings("limits.max_connections_per_address=2"))
    async with open_client(daemon.address), open_client(daemon.address):
        with pytest.raises(LimitExceeded) as refused:
            async with open_client(daemon.address):
                pytest.fail("a third connection was accepted")
    assert refused.value.message == (
        f"the queue manager at {daemon.address} refused the connection: too many connections "
        "from 127.0.0.1: at most 2 at once (limits.max_connections_per_address)"
    )


async def test_a_connection_the_daemon_closed_when_idle_is_lost_with_its_reason(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(extra_args=settings("server.idle_timeout=0.5"))
    async with open_client(daemon.address) as observer, open_client(daemon.address) as idle:
        # The observer keeps asking, so it never idles; the other one is closed.
        with trio.fail_after(10):
            while True:
                status = await observer.status()
                if status.connections == 1:
                    break
                await trio.sleep(0.01)
        await check_closed_by_daemon_async(
            idle, daemon.address, "closing a connection idle for 0.5 s"
        )


async def test_errors_in_the_block_propagate_unwrapped(shared_daemon: DaemonProcess) -> None:
    with pytest.raises(QueueNotFound):
        async with open_client(shared_daemon.address) as qm:
            await qm.receive(f"missing-{uuid.uuid4().hex}")


async def test_daemon_going_away(daemon: DaemonProcess) -> None:
    async with open_client(daemon.address) as qm:
        await qm.create_queue("q")

        async def wait_forever(client: AsyncQueueManager) -> BaseException | None:
            try:
                await client.receive("q", timeout=None)
            except Exception as exc:
                return exc
            return None

        outcome: list[BaseException | None] = []

        async def run() -> None:
            outcome.append(await wait_forever(qm))

        with trio.fail_after(15):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await trio.testing.wait_all_tasks_blocked()  # its request is out
                await qm.list_queues()  # and the daemon took it (one connection)
                await trio.to_thread.run_sync(daemon.stop)
        assert outcome
        assert outcome[0] is not None
        with pytest.raises(ConnectionLost):
            await qm.list_queues()


async def test_a_transaction_whose_receive_was_cancelled_goes_on(
    qm: AsyncQueueManager, queue_name: str
) -> None:
    tx = await qm.begin()
    with trio.move_on_after(0.1) as scope:
        await tx.receive(queue_name, timeout=None)
    assert scope.cancelled_caught
    # The daemon stopped the receive: it takes nothing, and the transaction goes on.
    await qm.send(queue_name, b"must not vanish")
    message = await tx.receive(queue_name, timeout=5)
    assert message is not None
    assert message.body == b"must not vanish"
    await tx.commit()
    assert await qm.peek_range(queue_name) == []


async def test_a_commit_in_a_cancelled_scope_is_not_sent_and_the_transaction_aborts(
    qm: AsyncQueueManager, queue_name: str
) -> None:
    """``Cancelled`` means it did not happen, as everywhere in trio: the block's
    commit is not sent, the transaction is aborted, and the message it received
    is back in its place, not held until a timeout."""
    await qm.send(queue_name, b"taken")
    with trio.CancelScope() as scope:
        async with qm.begin() as tx:
            assert await tx.receive(queue_name) is not None
            scope.cancel()  # the block ends normally, its scope cancelled
    assert scope.cancelled_caught
    assert tx.ended
    [back] = await qm.peek_range(queue_name)
    assert (back.body, back.abort_count) == (b"taken", 1)
    # An explicit commit in a cancelled scope: not sent, the transaction still open.
    tx = await qm.begin()
    assert await tx.receive(queue_name) is not None
    with trio.CancelScope() as scope:
        scope.cancel()
        await tx.commit()
    assert scope.cancelled_caught
    assert not tx.ended
    await tx.commit()
    assert await qm.peek_range(queue_name) == []
