"""The trio client's I/O over an in-memory stream: a peer task that answers as scripted,
the reader task, cancellation, and what a broken stream does to waiting tasks."""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing
from client_kit import replies
from wire_samples import QUEUED

from qmgr.client import (
    ConnectionLost,
    InvalidArgument,
    Message,
    QueueNotFound,
    TransactionAborted,
)
from qmgr.client._transaction import TransactionState
from qmgr.client._trio_io import CANCEL_REPLY_SECONDS, StreamConnection, open_stream
from qmgr.client.calls import queues, transactions
from wire import client as cf

#: A scripted answer to a request: its reply, a frame (an answer to another
#: request, such as the receive a CancelReceive names), or None.
Answer = Callable[[cf.FrameValue], cf.ServerReply | cf.Frame | None]


class Peer:
    """The daemon's end of the stream: records each request and answers with ``answer``."""

    def __init__(self, stream: trio.abc.Stream, answer: Answer) -> None:
        self.stream = stream
        self.answer = answer
        self.requests: list[cf.FrameValue] = []
        self.seen = trio.Event()

    async def serve(self) -> None:
        with contextlib.suppress(trio.ClosedResourceError):  # a test closed the peer's end
            await self._serve()

    async def _serve(self) -> None:
        decoder = cf.ClientFrameDecoder()
        while data := await self.stream.receive_some():
            decoder.receive_data(data)
            while (frame := decoder.next_frame()) is not None:
                self.requests.append(frame.value)
                self.seen.set()
                reply = self.answer(frame.value)
                if isinstance(reply, cf.Frame):
                    await self.stream.send_all(cf.encode_frame(reply.request_id, reply.value))
                elif reply is not None:
                    await self.stream.send_all(cf.encode_frame(frame.request_id, reply))


@asynccontextmanager
async def connected(answer: Answer) -> AsyncIterator[tuple[StreamConnection, Peer]]:
    """A connection with its reader task, and the peer answering it."""
    ours, theirs = trio.testing.memory_stream_pair()
    conn = StreamConnection(ours, "memory:1")
    peer = Peer(theirs, answer)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.read_loop)
        nursery.start_soon(peer.serve)
        yield conn, peer
        nursery.cancel_scope.cancel()


async def cancel_once_blocked(work: Callable[[], Awaitable[object]]) -> None:
    """Run ``work`` until every task waits, then cancel it (no clock involved)."""
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(work)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()


def ok_to_all(value: cf.FrameValue) -> cf.ServerReply | None:
    if isinstance(value, cf.Begin | cf.Send) and getattr(value, "tx_id", 0):
        return None  # pipelined: answered only if it fails
    if isinstance(value, cf.Receive):
        return None  # a receive that waits for ever
    return cf.Ok(value=5)


async def test_a_call_gets_its_reply_or_its_error() -> None:
    def answer(value: cf.FrameValue) -> cf.ServerReply:
        if isinstance(value, cf.DeleteQueue):
            return cf.ErrorReply(code=int(cf.ErrorCode.QUEUE_NOT_FOUND), message="no 'q'")
        return cf.Ok(value=5)

    async with connected(answer) as (conn, peer):
        assert await conn.run(queues.purge_queue, "q") == 5
        with pytest.raises(QueueNotFound, match="no 'q'"):
            await conn.run(queues.delete_queue, "q")
    assert peer.requests == [cf.PurgeQueue(name="q"), cf.DeleteQueue(name="q")]


async def test_a_cancelled_receive_in_a_transaction_leaves_only_abort() -> None:
    async with connected(ok_to_all) as (conn, peer):
        state = TransactionState(conn.proto.next_tx_id())
        conn.proto.begin(state)
        # The receive waits for ever: the peer never answers it.
        await cancel_once_blocked(lambda: conn.receive(state, "q", None, False, None))
        with pytest.raises(TransactionAborted, match="a receive in transaction 1 failed"):
            state.check()
        with pytest.raises(TransactionAborted, match="must not be committed unseen"):
            await conn.run(transactions.end, state, commit=True)
    assert [type(r) for r in peer.requests] == [cf.Begin, cf.Receive, cf.Abort]


async def test_a_cancelled_peek_leaves_the_transaction_usable() -> None:
    async with connected(ok_to_all) as (conn, _):
        state = TransactionState(conn.proto.next_tx_id())
        conn.proto.begin(state)
        await cancel_once_blocked(lambda: conn.receive(state, "q", None, True, None))
        state.check()


def answering_cancels_with(reply: cf.ServerReply) -> Answer:
    """A daemon of version 8 whose receives wait until cancelled, then get ``reply``."""
    receives: list[int] = []

    def answer(value: cf.FrameValue) -> cf.ServerReply | cf.Frame | None:
        if isinstance(value, cf.CancelReceive):
            receives.append(value.request_id)
            return cf.Frame(request_id=value.request_id, value=reply)
        return ok_to_all(value)

    return answer


async def test_a_cancelled_receive_asks_the_daemon_to_stop_and_raises_when_it_took_nothing() -> (
    None
):
    async with connected(answering_cancels_with(cf.NoMessage())) as (conn, peer):
        conn.proto.version = cf.CANCEL_VERSION
        state = TransactionState(conn.proto.next_tx_id())
        conn.proto.begin(state)
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(conn.receive, state, "q", None, False, None)
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
        assert scope.cancelled_caught
        # The daemon said it took nothing: the transaction can still commit.
        state.check()
        assert await conn.run(transactions.end, state, commit=True) is None
    receive = peer.requests[1]
    assert isinstance(receive, cf.Receive)
    assert [type(r) for r in peer.requests] == [cf.Begin, cf.Receive, cf.CancelReceive, cf.Commit]
    assert peer.requests[2] == cf.CancelReceive(request_id=2)


async def test_a_cancelled_receive_that_had_taken_a_message_returns_it() -> None:
    async with connected(answering_cancels_with(cf.MessageReply(message=QUEUED))) as (conn, _):
        conn.proto.version = cf.CANCEL_VERSION
        got: list[Message | None] = []
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:

                async def receive() -> None:
                    got.append(await conn.receive(None, "q", None, False, None))

                nursery.start_soon(receive)
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
        # The receive returned the message its daemon had taken, cancelled or not.
        [message] = got
        assert message is not None
        assert (message.lookup_id, message.body) == (QUEUED.lookup_id, QUEUED.message.body)


async def test_a_cancelled_peek_asks_the_daemon_to_stop_without_waiting_for_it() -> None:
    async with connected(ok_to_all) as (conn, peer):
        conn.proto.version = cf.CANCEL_VERSION
        await cancel_once_blocked(lambda: conn.receive(None, "q", None, True, None))
        await trio.testing.wait_all_tasks_blocked()
    assert [type(r) for r in peer.requests] == [cf.Receive, cf.CancelReceive]


async def test_a_cancelled_receive_no_daemon_answers_is_abandoned_after_a_while(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with connected(ok_to_all) as (conn, peer):
        conn.proto.version = cf.CANCEL_VERSION
        state = TransactionState(conn.proto.next_tx_id())
        conn.proto.begin(state)
        started = trio.current_time()
        await cancel_once_blocked(lambda: conn.receive(state, "q", None, False, None))
        assert trio.current_time() - started == pytest.approx(CANCEL_REPLY_SECONDS)
        with pytest.raises(TransactionAborted, match="must not be committed unseen"):
            state.check()
    assert [type(r) for r in peer.requests] == [cf.Begin, cf.Receive, cf.CancelReceive]


async def test_a_receive_cancelled_with_the_reader_waits_for_no_reply(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    conn = StreamConnection(ours, "memory:1")
    conn.proto.version = cf.CANCEL_VERSION
    peer = Peer(theirs, ok_to_all)  # answers neither the receive nor its cancel
    started = trio.current_time()
    with trio.CancelScope() as scope:  # around the whole client, its reader too
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.read_loop)
            nursery.start_soon(peer.serve)
            nursery.start_soon(conn.receive, None, "q", None, False, None)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert trio.current_time() == started  # nobody reads replies: none is waited for
    assert conn.proto.broken is not None
    assert "its reader was cancelled" in conn.proto.broken.message


async def test_the_end_of_a_transaction_is_written_even_when_cancelled() -> None:
    async with connected(lambda value: None) as (conn, peer):
        state = TransactionState(conn.proto.next_tx_id())
        conn.proto.begin(state)
        with trio.CancelScope() as scope:
            scope.cancel()
            await conn.run(transactions.end, state, commit=True)
        await trio.testing.wait_all_tasks_blocked()  # the peer has read what was written
    assert peer.requests == [cf.Begin(tx_id=1), cf.Commit(tx_id=1)]


@pytest.mark.parametrize("ends", [False, True])
async def test_a_write_the_daemon_does_not_take_is_bounded_by_the_callers_deadline(
    autojump_clock: trio.testing.MockClock, ends: bool
) -> None:
    ours, theirs = trio.testing.lockstep_stream_pair()  # nobody reads ``theirs``
    conn = StreamConnection(ours, "memory:1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.read_loop)
        started = trio.current_time()
        with trio.move_on_after(2):
            if ends:
                # A commit is written even once cancelled, but not for ever; its
                # outcome is unknown (here: not written, so not done).
                state = TransactionState(conn.proto.next_tx_id())
                conn.proto.begin(state)
                with pytest.raises(ConnectionLost):
                    await conn.run(transactions.end, state, commit=True)
            else:
                await conn.run(queues.purge_queue, "q")
        assert trio.current_time() - started == pytest.approx(2 + CANCEL_REPLY_SECONDS)
        broken = conn.proto.broken
        assert broken is not None
        assert "could not be written" in broken.message
        with pytest.raises(ConnectionLost, match="could not be written"):
            await conn.run(queues.list_queues)
    await theirs.aclose()


async def test_a_commit_behind_a_write_the_daemon_does_not_take_is_bounded_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = trio.testing.lockstep_stream_pair()  # nobody reads ``theirs``
    conn = StreamConnection(ours, "memory:1")
    other: list[BaseException] = []

    async def purge_without_deadline() -> None:
        try:
            await conn.run(queues.purge_queue, "q")
        except ConnectionLost as exc:
            other.append(exc)

    with trio.fail_after(1000):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.read_loop)
            nursery.start_soon(purge_without_deadline)  # holds the turn to write
            await trio.testing.wait_all_tasks_blocked()
            started = trio.current_time()
            with trio.move_on_after(2):
                state = TransactionState(conn.proto.next_tx_id())
                conn.proto.begin(state)
                with pytest.raises(ConnectionLost, match="could not be written"):
                    await conn.run(transactions.end, state, commit=True)
            assert trio.current_time() - started == pytest.approx(2 + CANCEL_REPLY_SECONDS)
    assert len(other) == 1  # the connection is broken for every task on it
    await theirs.aclose()


async def test_a_request_cancelled_before_its_write_never_goes_out() -> None:
    async with connected(ok_to_all) as (conn, peer), trio.open_nursery() as nursery:
        release = trio.Event()

        async def another_writer(task_status: trio.TaskStatus[None]) -> None:
            async with conn._send_lock:
                task_status.started()
                await release.wait()

        await nursery.start(another_writer)
        await cancel_once_blocked(lambda: conn.run(queues.purge_queue, "q"))  # waits for the lock
        release.set()
        assert await conn.run(queues.delete_queue, "q") == 5
    assert peer.requests == [cf.DeleteQueue(name="q")]


async def test_waiting_tasks_learn_that_the_daemon_closed_the_connection() -> None:
    async with connected(lambda value: None) as (conn, peer):
        async with trio.open_nursery() as nursery:

            async def close_when_asked() -> None:
                await peer.seen.wait()
                await peer.stream.aclose()

            nursery.start_soon(close_when_asked)
            with pytest.raises(ConnectionLost, match="the queue manager closed the connection"):
                await conn.run(queues.list_queues)
    assert conn.proto.closed


async def test_a_malformed_stream_names_the_address() -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    conn = StreamConnection(ours, "memory:1")
    await theirs.send_all(replies((1, cf.Ok())) + b"\xff" * 12)
    await conn.read_loop()
    assert conn.proto.broken is not None
    assert conn.proto.broken.message.startswith(
        "lost the connection to the queue manager at memory:1: the queue manager sent a malformed"
    )


async def test_an_ipv6_address_is_named_in_brackets_and_needs_them_for_a_port() -> None:
    with socket.socket(socket.AF_INET6) as bound:  # bound, not listening: refused
        bound.bind(("::1", 0))
        port = bound.getsockname()[1]
        with pytest.raises(ConnectionLost, match=re.escape(f"at [::1]:{port}: ")):
            await open_stream(f"[::1]:{port}")
    with pytest.raises(
        InvalidArgument, match=re.escape("write an IPv6 address with a port as [addr]:port")
    ):
        await open_stream("[::1:28002")
