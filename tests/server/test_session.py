"""A client session over memory streams: requests, transactions, bounds and faults.

Every test runs a real session, core, committer and store in-process, with
the client end of a ``memory_stream_pair`` in place of a socket and trio's
``MockClock`` jumping over timeouts, so nothing waits for real seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kit import FrameClient, limits, message, open_services, open_session

from qmgr.core.engine import Limits
from qmgr.server.session import OUTBOX_FLUSH_BYTES, ClientSession
from wire import client as cf


async def make_queue(client: Any, name: str, **options: Any) -> None:
    reply = await client.call(cf.CreateQueue(name=name, **options))
    assert isinstance(reply, cf.Ok), reply


async def test_a_transaction_commits_whole_and_a_waiting_receive_wakes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services, open_session(services) as a:
        await make_queue(a.client, "q", transactional=True)
        async with open_session(services) as b:
            [waiting] = await b.client.send(cf.Receive(queue="q", timeout_ms=60_000))
            # Begin and sends in a transaction are answered only if they fail.
            await a.client.send(
                cf.Begin(tx_id=1),
                cf.Send(tx_id=1, message=message("q", b"one")),
                cf.Send(tx_id=1, message=message("q", b"two")),
            )
            assert isinstance(await a.client.call(cf.Commit(tx_id=1)), cf.Ok)
            frame = await b.client.reply()
            assert frame is not None
            assert frame.request_id == waiting
            assert isinstance(frame.value, cf.MessageReply)
            assert frame.value.message.message.body == b"one"
            assert frame.value.message.lookup_id == 1


async def test_an_internal_error_in_a_send_dooms_its_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """A pipelined commit must never commit the rest of a transaction whose
    send failed, whatever the failure."""
    async with open_services(tmp_path / "s") as services, open_session(services) as a:
        await make_queue(a.client, "q", transactional=True)
        prepare = services.core.prepare_send

        def flaky(message_: Any, **kwargs: Any) -> Any:
            if message_.body == b"boom":
                raise RuntimeError("simulated bug")
            return prepare(message_, **kwargs)

        monkeypatch.setattr(services.core, "prepare_send", flaky)
        ids = await a.client.send(
            cf.Begin(tx_id=7),
            cf.Send(tx_id=7, message=message("q", b"fine")),
            cf.Send(tx_id=7, message=message("q", b"boom")),
            cf.Send(tx_id=7, message=message("q", b"after")),
            cf.Commit(tx_id=7),
        )
        replies = {}
        while len(replies) < 2:
            frame = await a.client.reply()
            assert frame is not None
            replies[frame.request_id] = frame.value
        failed, commit = replies[ids[2]], replies[ids[4]]
        assert isinstance(failed, cf.ErrorReply)
        assert failed.code == cf.ErrorCode.INTERNAL
        assert isinstance(commit, cf.ErrorReply)
        assert commit.code == cf.ErrorCode.INTERNAL
        assert "aborted because an operation in it failed" in commit.message
        peek = await a.client.call(cf.Receive(queue="q", peek=True))
        assert isinstance(peek, cf.NoMessage)
        assert services.core.uncommitted.in_use == 0


async def test_exceeding_a_quota_in_a_transaction_says_quota_exceeded(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services, open_session(services) as a:
        await make_queue(a.client, "small", transactional=True, quota=10)
        await a.client.send(
            cf.Begin(tx_id=1),
            cf.Send(tx_id=1, message=message("small", b"x" * 8)),
            cf.Send(tx_id=1, message=message("small", b"y" * 8)),
        )
        reply = await a.client.call(cf.Commit(tx_id=1))
        assert isinstance(reply, cf.ErrorReply)
        assert reply.code == cf.ErrorCode.QUOTA_EXCEEDED, reply


async def test_a_silent_new_connection_is_told_why_it_is_closed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with (
        open_services(tmp_path / "s", limits=limits(hello_timeout=5)) as services,
        open_session(services, greet=False) as a,
    ):
        started = trio.current_time()
        frame = await a.client.reply()
        assert frame is not None
        assert frame.request_id == 0
        assert isinstance(frame.value, cf.ErrorReply)
        assert frame.value.code == cf.ErrorCode.LIMIT_EXCEEDED
        assert "Hello" in frame.value.message
        assert await a.client.reply() is None
        assert trio.current_time() - started == pytest.approx(5, abs=0.5)


async def test_an_idle_connection_is_closed_after_the_idle_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with (
        open_services(tmp_path / "s", limits=limits(idle_timeout=60)) as services,
        open_session(services) as a,
    ):
        error = await a.client.error()
        assert "idle" in error.message
        assert await a.client.reply() is None


async def test_a_connection_with_an_open_transaction_is_not_idle(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with (
        open_services(tmp_path / "s", limits=limits(idle_timeout=60)) as services,
        open_session(services) as a,
    ):
        await a.client.send(cf.Begin(tx_id=1))
        with trio.move_on_after(600) as scope:
            await a.client.reply()
        assert scope.cancelled_caught


async def test_a_frame_trickling_in_is_dropped_at_the_frame_deadline(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with (
        open_services(tmp_path / "s", limits=limits(frame_timeout=5)) as services,
        open_session(services) as a,
    ):
        frame_bytes = cf.encode_frame(5, cf.ListQueues())
        started = trio.current_time()
        closed = False
        for byte in frame_bytes[:-1]:  # one byte a second, never the last one
            await a.client.send_raw(bytes([byte]))
            with trio.move_on_after(1):
                frame = await a.client.reply()
                closed = True
                break
        assert closed
        assert frame is not None
        assert isinstance(frame.value, cf.ErrorReply)
        assert "did not arrive whole" in frame.value.message
        assert 5 <= trio.current_time() - started <= 6.5


async def test_large_frames_in_progress_are_bounded_daemon_wide(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    budget = 1 << 20
    async with open_services(tmp_path / "s", frame_budget=budget) as services:
        async with open_session(services) as a, open_session(services) as b:
            big = cf.encode_frame(9, cf.Send(message=message("q", b"x" * 700_000)))
            await a.client.send_raw(big[: len(big) // 2])  # half of it, then nothing
            await trio.testing.wait_all_tasks_blocked()
            assert services.frames.in_use > 0
            await b.client.send_raw(big)
            error = await b.client.error()
            assert error.code == cf.ErrorCode.LIMIT_EXCEEDED
            assert "frames being received" in error.message
            assert await b.client.reply() is None
        assert services.frames.in_use == 0


async def test_open_transactions_per_connection_are_bounded(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with (
        open_services(tmp_path / "s", limits=limits(max_transactions=2)) as services,
        open_session(services) as a,
    ):
        assert isinstance(await a.client.call(cf.Begin()), cf.Ok)
        assert isinstance(await a.client.call(cf.Begin()), cf.Ok)
        reply = await a.client.call(cf.Begin())
        assert isinstance(reply, cf.ErrorReply)
        assert reply.code == cf.ErrorCode.LIMIT_EXCEEDED


async def test_waiting_receives_per_connection_are_bounded(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with (
        open_services(tmp_path / "s", limits=limits(max_waiting_receives=2)) as services,
        open_session(services) as a,
    ):
        await make_queue(a.client, "q")
        await a.client.send(*(cf.Receive(queue="q", timeout_ms=60_000) for _ in range(2)))
        reply = await a.client.call(cf.Receive(queue="q", timeout_ms=60_000))
        assert isinstance(reply, cf.ErrorReply)
        assert reply.code == cf.ErrorCode.LIMIT_EXCEEDED


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
            assert isinstance(reply, cf.ErrorReply)
            assert reply.code == cf.ErrorCode.LIMIT_EXCEEDED
            assert isinstance(await a.client.call(cf.Commit(tx_id=1)), cf.Ok)


async def test_a_disconnect_aborts_open_transactions(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services:
        async with open_session(services) as a:
            await make_queue(a.client, "q", transactional=True)
            await a.client.call(cf.Send(message=message("q", b"held")))
            async with open_session(services) as b:
                await b.client.send(cf.Begin(tx_id=1))
                reply = await b.client.call(cf.Receive(tx_id=1, queue="q"))
                assert isinstance(reply, cf.MessageReply)
            await trio.testing.wait_all_tasks_blocked()
            assert len(services.core.transactions) == 0
            again = await a.client.call(cf.Receive(queue="q", peek=True))
            assert isinstance(again, cf.MessageReply)
            assert again.message.message.body == b"held"


async def test_malformed_bytes_get_bad_request_and_a_close(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services, open_session(services) as a:
        await a.client.send_raw(b"\x05\x00\x00\x00\x0a\x00\x00\x00\x01\x00\x00\x00junk!")
        error = await a.client.error()
        assert error.code == cf.ErrorCode.BAD_REQUEST
        assert "Send" in error.message
        assert await a.client.reply() is None


async def test_a_transaction_the_daemon_aborted_no_longer_keeps_the_connection(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with (
        open_services(tmp_path / "s", limits=limits(idle_timeout=60)) as services,
        open_session(services) as a,
    ):
        await a.client.send(cf.Begin(tx_id=1))
        await trio.testing.wait_all_tasks_blocked()
        [tx] = a.session._transactions.values()
        assert a.session.idle_since is None
        # What the idle-transaction sweeper does.
        a.session.end_transaction(tx, "idle timeout: no activity for more than 1 s")
        assert a.session.idle_since is not None  # it may be evicted now
        # The client is told why when it names the transaction again ...
        reply = await a.client.call(cf.Commit(tx_id=1))
        assert isinstance(reply, cf.ErrorReply)
        assert reply.code == cf.ErrorCode.TRANSACTION_ABORTED
        assert "idle timeout" in reply.message
        # ... and the connection closes at its own idle timeout.
        started = trio.current_time()
        error = await a.client.error()
        assert "idle" in error.message
        assert trio.current_time() - started == pytest.approx(60, abs=1)


async def test_a_client_that_does_not_read_its_large_replies_holds_back_only_itself(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services:
        client_end, server_end = trio.testing.lockstep_stream_pair()
        writes: list[int] = []
        send_all = server_end.send_all

        async def recording_send_all(data: bytes | bytearray | memoryview) -> None:
            writes.append(len(data))
            await send_all(data)

        server_end.send_all = recording_send_all  # type: ignore[method-assign]
        session = ClientSession(services, server_end, conn_id=99, peer="lockstep")
        client = FrameClient(client_end)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.run)
            await client.hello()
            await make_queue(client, "q")
            big = message("q", b"x" * (1 << 20))
            reply = await client.call(cf.Send(mode=1, message=big))
            assert isinstance(reply, cf.Sent)
            # 200 peeks of a 1 MiB message in one write (8 KB): 200 MiB of replies
            # if the session handled them all before writing any.
            peek = cf.Receive(queue="q", peek=True, timeout_ms=0)
            nursery.start_soon(client.send, *([peek] * 200))
            await trio.testing.wait_all_tasks_blocked()
            # The client reads nothing: the session waits to write, holding little
            # (a write as large as all the replies would be 200 MiB).
            assert max(writes) <= OUTBOX_FLUSH_BYTES + (2 << 20)
            # Reading lets it go on: every peek is answered.
            for _ in range(200):
                frame = await client.reply()
                assert frame is not None
                assert isinstance(frame.value, cf.MessageReply)
            assert max(writes) <= OUTBOX_FLUSH_BYTES + (2 << 20)
            await client_end.aclose()


async def test_a_transaction_waiting_for_a_message_is_not_idle(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services, open_session(services) as a:
        await make_queue(a.client, "q", transactional=True)
        ids = await a.client.send(
            cf.Begin(tx_id=1), cf.Receive(tx_id=1, queue="q", timeout_ms=600_000)
        )
        waiting = ids[1]
        await trio.sleep(500)  # a worker waiting on an empty queue
        core = services.core
        assert core.transactions.idle(trio.current_time(), timeout=1) == []
        async with open_session(services) as b:
            reply = await b.client.call(cf.Send(mode=2, message=message("q", b"work")))
            assert isinstance(reply, cf.Sent)
        frame = await a.client.reply()
        assert frame is not None
        assert frame.request_id == waiting
        assert isinstance(frame.value, cf.MessageReply)
        # Its idle time counts from the end of the wait, not from the Begin.
        now = trio.current_time()
        assert core.transactions.idle(now + 0.5, timeout=1) == []
        assert len(core.transactions.idle(now + 2, timeout=1)) == 1


@pytest.mark.parametrize("in_transaction", [False, True])
async def test_a_receive_waiting_on_a_journal_wakes_when_a_copy_arrives(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, in_transaction: bool
) -> None:
    async with open_services(tmp_path / "s") as services, open_session(services) as a:
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
