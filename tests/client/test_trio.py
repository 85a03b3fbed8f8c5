"""The trio client against a scripted daemon: the messaging calls, transactions (global
ones too), tasks sharing a client, and what an older daemon refuses."""

from __future__ import annotations

import pytest
import trio
from facade_cases import ADMIN, CORE, TWO_BLOCKS, XID, Case, call_trio, new_frames
from fake_daemon import FakeDaemon
from sdk_kit import check_closed_by_daemon_async

from qmgr.client import (
    AsyncQueueManager,
    ConnectionLost,
    InvalidArgument,
    LimitExceeded,
    NotSupported,
    QueueNotFound,
    TransactionNotFound,
    TransactionUsageError,
    open_client,
)
from wire import client as cf


@pytest.mark.parametrize("case", CORE + ADMIN, ids=lambda case: case.id)
async def test_each_call_sends_its_request_and_converts_the_reply(
    fake_daemon: FakeDaemon, case: Case
) -> None:
    await call_trio(fake_daemon, case)


async def test_open_client_says_who_answered_and_its_end_is_final(fake_daemon: FakeDaemon) -> None:
    async with open_client(fake_daemon.address, client_name="tester") as qm:
        assert isinstance(qm, AsyncQueueManager)
        assert (qm.qm_name, qm.server_version) == ("fake", "0.test")
        assert repr(qm) == f"<AsyncQueueManager 'fake' at {fake_daemon.address} (open)>"
    assert qm.closed
    with pytest.raises(ConnectionLost, match="the connection was closed"):
        await qm.status()


async def test_a_transaction_commits_at_the_end_of_its_block(fake_daemon: FakeDaemon) -> None:
    async with open_client(fake_daemon.address) as qm:
        async with qm.begin() as tx:
            await tx.send("orders", b"one")
            assert await tx.receive("orders") is None
            assert repr(tx) == f"<AsyncTransaction {tx.id} (open)>"
        with pytest.raises(RuntimeError):
            async with await qm.begin() as failed:
                await failed.send("orders", b"two")
                raise RuntimeError
        assert failed.ended
        broken = qm.begin()
        await broken.send("missing", b"x")
        with pytest.raises(QueueNotFound, match="aborted because a send in it failed"):
            await broken.commit()
        with pytest.raises(TransactionNotFound):
            await broken.abort()
    # The last Commit is refused: the send's failure had not been read when it went.
    assert [type(r) for r in fake_daemon.requests] == [*TWO_BLOCKS, cf.Begin, cf.Send, cf.Commit]


async def test_tasks_share_one_client(fake_daemon: FakeDaemon) -> None:
    async with open_client(fake_daemon.address) as qm, trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(qm.outgoing)
    assert len(fake_daemon.requests_of(cf.ListOutgoing)) == 3


async def test_begin_send_prepare_commit(fake_daemon: FakeDaemon) -> None:
    async with open_client(fake_daemon.address) as qm:
        tx = qm.begin(xid=XID)
        assert tx.xid == XID
        await tx.send("orders", b"one")
        await tx.prepare()
        assert tx.prepared
        with pytest.raises(TransactionUsageError, match="is prepared"):
            await tx.send("orders", b"late")
        with pytest.raises(TransactionUsageError, match="is prepared"):
            await tx.receive("orders")
        with pytest.raises(TransactionUsageError, match="is prepared"):
            await tx.prepare()
        await tx.commit()
        assert tx.ended
        assert not tx.prepared
        async with qm.begin(xid="block") as block:
            await block.prepare()
        plain = await qm.begin()
        with pytest.raises(TransactionUsageError, match="has no xid"):
            await plain.prepare()
        await plain.abort()
    assert new_frames(fake_daemon) == [
        cf.BeginGlobal(tx_id=tx.id, xid=XID),
        cf.Prepare(tx_id=tx.id),
        cf.Resolve(commit=True, xids=(XID,)),
        cf.BeginGlobal(tx_id=block.id, xid="block"),
        cf.Prepare(tx_id=block.id),
        cf.Resolve(commit=True, xids=("block",)),
    ]


async def test_failed_prepares(fake_daemon: FakeDaemon) -> None:
    async with open_client(fake_daemon.address) as qm:
        tx = qm.begin(xid="f")
        await tx.send("missing", b"x")
        with pytest.raises(QueueNotFound, match="was aborted because a send in it failed"):
            await tx.prepare()
        assert tx.ended
        full = qm.begin(xid="full-2")
        with pytest.raises(LimitExceeded):
            await full.prepare()
        await full.abort()
    assert not fake_daemon.two_phase.open


async def test_an_older_daemon_is_told_apart() -> None:
    daemon = FakeDaemon(version=2)
    try:
        async with open_client(daemon.address) as qm:
            with pytest.raises(NotSupported, match=r"begin\(xid=\.\.\.\) needs"):
                qm.begin(xid="x")
            with pytest.raises(NotSupported, match=r"commit_prepared\(\) needs"):
                await qm.commit_prepared("x")
            with pytest.raises(NotSupported, match=r"transactions\(\) needs"):
                await qm.transactions()
            with pytest.raises(NotSupported, match=r"remove_through\(\) needs"):
                await qm.remove_through("orders", 1)
            with pytest.raises(NotSupported, match=r"measure_range\(\) needs"):
                await qm.measure_range("orders")
        assert not new_frames(daemon)
    finally:
        daemon.close()


async def test_close_ends_the_client_before_its_block_and_twice_is_harmless(
    fake_daemon: FakeDaemon,
) -> None:
    async with open_client(fake_daemon.address) as qm:
        await qm.close()
        await qm.close()
        assert qm.closed
        with pytest.raises(ConnectionLost, match="the connection was closed"):
            await qm.status()
    assert qm.closed


REFUSAL = "too many connections from 127.0.0.1: at most 2 at once"


async def test_a_token_that_cannot_be_sent_is_refused_before_connecting() -> None:
    with pytest.raises(InvalidArgument, match=r"^token is not valid Unicode text \(position 2"):
        async with open_client("127.0.0.1:1", token="ab\udcff"):  # nothing listens there
            pytest.fail("the token was sent")


async def test_a_refused_connection_raises_the_daemons_error(fake_daemon: FakeDaemon) -> None:
    fake_daemon.refusal = cf.ErrorReply(code=int(cf.ErrorCode.LIMIT_EXCEEDED), message=REFUSAL)
    with pytest.raises(LimitExceeded) as refused:
        async with open_client(fake_daemon.address):
            pytest.fail("the connection was refused")
    assert refused.value.message == (
        f"the queue manager at {fake_daemon.address} refused the connection: {REFUSAL}"
    )


async def test_a_connection_the_daemon_closes_is_lost_with_its_reason(
    fake_daemon: FakeDaemon,
) -> None:
    async with open_client(fake_daemon.address) as qm:
        assert fake_daemon.farewell("closing a connection idle for 3 s") == 1
        await check_closed_by_daemon_async(
            qm, fake_daemon.address, "closing a connection idle for 3 s"
        )
