"""Two-phase transactions, remove_through and measure_range against real daemons."""

from __future__ import annotations

import json
import time

import pytest
import trio
from helpers import DaemonProcess, bodies, prepare_sends, qmgr

from qmgr.client import (
    Resolution,
    TransactionAborted,
    TransactionCommitted,
    TransactionNotFound,
    TransactionStatus,
    connect,
    open_client,
)


def test_a_prepared_transaction_survives_a_crash_and_is_committed_from_another_connection(
    daemon: DaemonProcess,
) -> None:
    with connect(daemon.address) as qm:
        qm.create_queue("in", transactional=True)
        qm.create_queue("out", transactional=True)
        qm.send("in", b"order")
        tx = qm.begin(xid="job-1:part-0")
        assert tx.xid == "job-1:part-0"
        received = tx.receive("in", timeout=5)
        assert received is not None
        tx.send("out", b"shipped")
        tx.prepare()
    daemon.kill()  # SIGKILL: only what was synced survives
    daemon.start()
    with connect(daemon.address) as qm:
        assert bodies(qm, "in") == []  # still held by the prepared transaction
        assert bodies(qm, "out") == []  # not visible before the commit
        assert qm.receive("in", timeout=0) is None
        [info] = qm.transactions()
        assert info.xid == "job-1:part-0"
        assert info.state is TransactionStatus.PREPARED
        assert (info.sends, info.receives) == (1, 1)
    with connect(daemon.address) as other:
        assert other.commit_prepared("job-1:part-0") is Resolution.COMMITTED
        assert other.commit_prepared("job-1:part-0") is Resolution.ALREADY_COMMITTED
        with pytest.raises(TransactionCommitted):
            other.abort_prepared("job-1:part-0")
        assert bodies(other, "out") == [b"shipped"]
        assert bodies(other, "in") == []
        assert other.transactions() == []
        [kept] = other.transactions(resolved=True)
        assert kept.state is TransactionStatus.COMMITTED


def test_an_aborted_prepared_transaction_gives_its_messages_back(daemon: DaemonProcess) -> None:
    with connect(daemon.address) as qm:
        qm.create_queue("in", transactional=True)
        qm.create_queue("out", transactional=True)
        qm.send("in", b"order")
        with qm.begin(xid="x") as tx:
            tx.receive("in", timeout=5)
            tx.send("out", b"shipped")
            tx.prepare()
            assert qm.abort_prepared("x") is Resolution.ABORTED
            assert qm.abort_prepared("x") is Resolution.ALREADY_ABORTED
            with pytest.raises(TransactionAborted):
                qm.commit_prepared("x")
            tx.abort()
        assert bodies(qm, "in") == [b"order"]
        assert bodies(qm, "out") == []
        with pytest.raises(TransactionNotFound):
            qm.commit_prepared("never-prepared")


def test_a_disconnect_aborts_an_unprepared_transaction_but_not_a_prepared_one(
    daemon: DaemonProcess,
) -> None:
    with connect(daemon.address) as qm:
        qm.create_queue("q", transactional=True)
        qm.send("q", b"one")
        qm.send("q", b"two")
    first = connect(daemon.address)
    unprepared = first.begin(xid="open")
    unprepared.receive("q", timeout=5)
    second = connect(daemon.address)
    prepared = second.begin(xid="prepared")
    prepared.receive("q", timeout=5)
    prepared.prepare()
    first.close()
    second.close()
    with connect(daemon.address) as qm:
        deadline = time.monotonic() + 10
        while bodies(qm, "q") != [b"one"] and time.monotonic() < deadline:
            pass  # the daemon aborts the transaction when it sees the connection close
        assert bodies(qm, "q") == [b"one"]
        assert [info.xid for info in qm.transactions()] == ["prepared"]
        assert qm.commit_prepared_all(["prepared"]) == [Resolution.COMMITTED]


def test_the_tx_command_lists_and_resolves_in_doubt_transactions(daemon: DaemonProcess) -> None:
    with connect(daemon.address) as qm:
        qm.create_queue("q", transactional=True)
        prepare_sends(qm, "q", ["a", "b"])
    listed = qmgr(daemon, "tx", "list")
    assert listed.returncode == 0, listed.stderr
    assert "a" in listed.stdout
    assert "prepared" in listed.stdout.lower()
    as_json = qmgr(daemon, "tx", "list", "--json")
    assert [row["xid"] for row in json.loads(as_json.stdout)] == ["a", "b"]
    committed = qmgr(daemon, "tx", "commit", "a")
    assert committed.returncode == 0, committed.stderr
    aborted = qmgr(daemon, "tx", "abort", "b")
    assert aborted.returncode == 0, aborted.stderr
    again = qmgr(daemon, "tx", "abort", "a")
    assert again.returncode == 1
    assert "committed" in (again.stdout + again.stderr)
    with connect(daemon.address) as qm:
        assert bodies(qm, "q") == [b"a"]
        assert qm.transactions() == []


def test_a_queue_in_use_by_a_prepared_transaction_cannot_be_deleted(daemon: DaemonProcess) -> None:
    from qmgr.client import AccessDenied

    with connect(daemon.address) as qm:
        qm.create_queue("q", transactional=True)
        tx = qm.begin(xid="pin")
        tx.send("q", b"m")
        tx.prepare()
        with pytest.raises(AccessDenied, match="prepared"):
            qm.delete_queue("q")
        qm.commit_prepared("pin")
        qm.delete_queue("q")


def test_remove_through_and_measure_range(daemon: DaemonProcess) -> None:
    with connect(daemon.address) as qm:
        qm.create_queue("q", transactional=True, journal=True)
        for start in range(0, 5000, 1000):  # one synced commit per thousand
            with qm.begin() as tx:
                for i in range(start, start + 1000):
                    tx.send("q", f"m{i}".encode())
        ids = [message.lookup_id for message in qm.peek_range("q", max=10_000)]
        assert len(ids) == 5000
        info = qm.measure_range("q", after=0, max_count=1000)
        assert (info.count, info.last) == (1000, ids[999])
        assert qm.measure_range("q", after=ids[-1], max_count=10).count == 0
        assert qm.remove_through("q", ids[4499]) == 4500
        assert qm.remove_through("q", ids[4499]) == 0
        remaining = qm.peek_range("q", max=10_000)
        assert [message.lookup_id for message in remaining] == ids[4500:]
        journal = qm.measure_range("q;journal", after=0, max_count=100_000)
        assert journal.count == 4500


async def test_ending_a_transaction_whose_prepare_was_cancelled_aborts_it_if_prepared(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    """A cancelled prepare() may have been done: abort(), commit() and the block's exit
    must abort the transaction by xid too, not leave it prepared and in doubt."""
    async with open_client(shared_daemon.address) as qm:
        await qm.create_queue(queue_name, transactional=True)
        for body in (b"a", b"b", b"c"):
            await qm.send(queue_name, body)

        tx = qm.begin(xid=f"{queue_name}-abort")
        assert await tx.receive(queue_name) is not None
        with trio.move_on_after(0):  # the Prepare goes out; its reply is never read
            await tx.prepare()
        await tx.abort()

        tx = qm.begin(xid=f"{queue_name}-commit")
        assert await tx.receive(queue_name) is not None
        with trio.move_on_after(0):
            await tx.prepare()
        with pytest.raises(TransactionAborted, match="interrupted"):
            await tx.commit()

        with trio.CancelScope() as scope:
            async with qm.begin(xid=f"{queue_name}-block") as tx:
                assert await tx.receive(queue_name) is not None
                scope.cancel()
                await tx.prepare()

        assert await qm.transactions(queue_name) == []
        kept = await qm.transactions(queue_name, resolved=True)
        assert {t.state for t in kept} == {TransactionStatus.ABORTED}
        assert len(kept) == 3
        assert [m.body for m in await qm.peek_range(queue_name)] == [b"a", b"b", b"c"]


async def test_aborting_after_a_cancelled_prepare_says_it_was_committed_meanwhile(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    async with open_client(shared_daemon.address) as qm:
        await qm.create_queue(queue_name, transactional=True)
        await qm.send(queue_name, b"a")
        tx = qm.begin(xid=queue_name)
        assert await tx.receive(queue_name) is not None
        with trio.move_on_after(0):
            await tx.prepare()
        # Someone else commits it by xid meanwhile: the abort says so.
        assert await qm.commit_prepared(queue_name) is Resolution.COMMITTED
        with pytest.raises(TransactionCommitted):
            await tx.abort()
        assert await qm.peek_range(queue_name) == []
