"""A client session over memory streams: what the adapter does with the machine's
decisions (deadlines, framing, violations, authentication, versions), and how it
runs requests (errors contained, denials, flushing, disconnects).

Every test runs a real session, core, committer and store in-process, with
the client end of a ``memory_stream_pair`` in place of a socket and trio's
``MockClock`` jumping over timeouts, so nothing waits for real seconds. The
machine's own rules are tested without any of this in
``tests/protocol/test_client_connection.py``.
"""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
import trio.testing
from kit import (
    Connection,
    FrameClient,
    enable_permissions,
    error,
    limits,
    make_queue,
    message,
    open_connection,
    open_services,
    open_session,
    permissions,
)
from reply_kit import long_queue_list

from qmgr.protocol.client_connection import OUTBOX_FLUSH_BYTES
from qmgr.server.client.authorization import Authorization
from qmgr.server.client.services import Services
from qmgr.server.client.session import ClientSession
from wire import client as cf

#: A request of each kind that came after version 2, with the version it needs.
LATER_REQUESTS: list[tuple[cf.ClientRequest, int]] = [
    (cf.BeginGlobal(tx_id=1, xid="x"), 3),
    (cf.Prepare(tx_id=1), 3),
    (cf.Resolve(commit=True, xids=("x",)), 3),
    (cf.ListTransactions(), 3),
    (cf.RemoveThrough(queue="q", lookup_id=1), 3),
    (cf.MeasureRange(queue="q"), 3),
    (cf.TraceMessage(message_id="{00000000-0000-0000-0000-000000000001}\\1"), 4),
    (cf.CreateList(name="l", targets=("q",)), 4),
    (cf.ChangeList(name="l"), 4),
    (cf.DeleteList(name="l"), 4),
    (cf.GetLists(), 4),
    (cf.SetQueueProperties(name="q", retry_count=1), 5),
    (cf.MoveMessages(source="q;poison", target="q"), 5),
    (cf.GetPermissions(queue="q"), 6),
    (cf.ChangePermissions(queue="q", entry="bob", grant=1), 6),
    (cf.Authenticate(token="t"), 6),
    # A field of a later version: the quota of SetQueueProperties.
    (cf.SetQueueProperties(name="q", quota=10), 10),
    (cf.SetQueueProperties(name="q", no_quota=True), 10),
]


def test_the_later_requests_cover_every_request_of_a_later_version() -> None:
    sets = {
        3: cf.TWO_PHASE_REQUESTS,
        4: cf.OUTCOMES_REQUESTS,
        5: cf.POISON_REQUESTS,
        6: cf.SECURITY_REQUESTS,
    }
    for version, classes in sets.items():
        assert {type(r) for r, needed in LATER_REQUESTS if needed == version} == classes


@pytest.mark.parametrize(("request_", "needed"), LATER_REQUESTS, ids=lambda r: type(r).__name__)
async def test_an_older_connection_is_refused_the_requests_of_later_versions(
    services: Services,
    autojump_clock: trio.testing.MockClock,
    request_: cf.ClientRequest,
    needed: int,
) -> None:
    async with open_session(services, greet=False) as old:
        await old.client.hello(max_version=needed - 1)
        [request_id] = await old.client.send(request_)
        frame = await old.client.reply()
        assert frame is not None
        assert frame.request_id == request_id
        refused = error(frame.value, cf.ErrorCode.BAD_REQUEST)
        assert f"protocol version {needed}" in refused.message
        assert await old.client.reply() is None  # and the connection is closed
    assert services.core.two_phase.prepared_count == 0
    assert len(services.core.transactions) == 0


async def test_an_internal_error_in_a_send_dooms_its_transaction(
    conn: Connection,
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A pipelined commit must never commit the rest of a transaction whose
    send failed, whatever the failure."""
    await make_queue(conn.client, "q", transactional=True)
    prepare = services.core.prepare_send

    def flaky(message_: Any, **kwargs: Any) -> Any:
        if message_.body == b"boom":
            raise RuntimeError("simulated bug")
        return prepare(message_, **kwargs)

    monkeypatch.setattr(services.core, "prepare_send", flaky)
    ids = await conn.client.send(
        cf.Begin(tx_id=7),
        cf.Send(tx_id=7, message=message("q", b"fine")),
        cf.Send(tx_id=7, message=message("q", b"boom")),
        cf.Send(tx_id=7, message=message("q", b"after")),
        cf.Commit(tx_id=7),
    )
    replies = {}
    while len(replies) < 3:
        frame = await conn.client.reply()
        assert frame is not None
        replies[frame.request_id] = frame.value
    error(replies[ids[2]], cf.ErrorCode.INTERNAL)
    after = error(replies[ids[3]], cf.ErrorCode.INTERNAL)
    assert after.message == (
        "transaction 7 can only abort: an earlier operation in it failed: "
        f"{error(replies[ids[2]], cf.ErrorCode.INTERNAL).message}"
    )
    commit = error(replies[ids[4]], cf.ErrorCode.INTERNAL)
    assert "aborted because an operation in it failed" in commit.message
    peek = await conn.client.call(cf.Receive(queue="q", peek=True))
    assert isinstance(peek, cf.NoMessage)
    assert services.core.uncommitted.in_use == 0


async def test_a_transaction_doomed_by_a_failed_receive_hands_out_nothing_more(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    """A client that goes on after a failed receive learns at its next receive
    that the transaction can only abort, before it takes a message."""
    await make_queue(conn.client, "q", transactional=True)
    for body in (b"work-1", b"work-2"):
        assert isinstance(await conn.client.call(cf.Send(message=message("q", body))), cf.Sent)
    await conn.client.send(cf.Begin(tx_id=3))
    first = await conn.client.call(cf.Receive(queue="q", tx_id=3))
    assert isinstance(first, cf.MessageReply)
    assert first.message.message.body == b"work-1"
    missing = await conn.client.call(cf.Receive(queue="typo", tx_id=3))
    assert error(missing, cf.ErrorCode.QUEUE_NOT_FOUND).message == "queue 'typo' does not exist"
    for request in (
        cf.Receive(queue="q", tx_id=3),
        cf.Receive(queue="q", tx_id=3, timeout_ms=1_000),
        cf.MoveMessages(source="q", target="q;poison", tx_id=3),
    ):
        refused = error(await conn.client.call(request), cf.ErrorCode.QUEUE_NOT_FOUND)
        assert refused.message == (
            "transaction 3 can only abort: an earlier operation in it failed: "
            "queue 'typo' does not exist"
        )
    # work-2 was never taken: another reader finds it at once.
    peek = await conn.client.call(cf.Receive(queue="q", peek=True, lookup_id=2))
    assert isinstance(peek, cf.MessageReply)
    assert peek.message.message.body == b"work-2"
    assert isinstance(await conn.client.call(cf.Abort(tx_id=3)), cf.Ok)
    for body in (b"work-1", b"work-2"):
        again = await conn.client.call(cf.Receive(queue="q"))
        assert isinstance(again, cf.MessageReply)
        assert again.message.message.body == body


async def test_a_silent_new_connection_is_told_why_it_is_closed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_connection(tmp_path, greet=False, hello_timeout=5) as a:
        started = trio.current_time()
        frame = await a.client.reply()
        assert frame is not None
        assert frame.request_id == 0
        farewell = error(frame.value, cf.ErrorCode.LIMIT_EXCEEDED)
        assert "Hello" in farewell.message
        assert await a.client.reply() is None
        assert trio.current_time() - started == pytest.approx(5, abs=0.5)


async def test_an_idle_connection_is_closed_after_the_idle_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_connection(tmp_path, idle_timeout=60) as a:
        with structlog.testing.capture_logs() as logs:
            farewell = await a.client.error()
            assert "idle" in farewell.message
            assert await a.client.reply() is None
    [deadline] = [entry for entry in logs if entry["event"] == "connection_deadline"]
    assert deadline["reason"] == "closing a connection idle for 60 s"


async def test_a_connection_with_an_open_transaction_is_not_idle(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_connection(tmp_path, idle_timeout=60) as a:
        await a.client.send(cf.Begin(tx_id=1))
        with trio.move_on_after(600) as scope:
            await a.client.reply()
        assert scope.cancelled_caught


async def test_a_frame_trickling_in_is_dropped_at_the_frame_deadline(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_connection(tmp_path, frame_timeout=5) as a:
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
        assert "did not arrive whole" in error(frame.value, cf.ErrorCode.LIMIT_EXCEEDED).message
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
            refused = error(await b.client.error(), cf.ErrorCode.LIMIT_EXCEEDED)
            assert "frames being received" in refused.message
            assert await b.client.reply() is None
        assert services.frames.in_use == 0


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (cf.FrameKind.HELLO, "limit of a frame before the connection is admitted"),
        (cf.FrameKind.SEND, "the first frame must be Hello, not Send"),
    ],
    ids=["Hello", "Send"],
)
async def test_connections_that_never_say_hello_cannot_spend_the_budget_for_frames(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, kind: cf.FrameKind, expected: str
) -> None:
    # 64 connections each declare a frame of 4 MiB + 64 KiB and send nothing
    # more: together more than the daemon's default limits.max_frame_bytes.
    header = struct.pack("<IHHI", cf.MAX_FRAME_BODY, kind, 0, 1)
    async with open_services(tmp_path / "s", frame_budget=256 << 20) as services:
        enable_permissions(services)
        async with contextlib.AsyncExitStack() as stack:
            silent = [
                await stack.enter_async_context(open_session(services, greet=False))
                for _ in range(64)
            ]
            for each in silent:
                await each.client.send_raw(header)
            await trio.testing.wait_all_tasks_blocked()
            async with open_session(services) as a:
                assert await a.client.call(cf.Authenticate(token="alice-token")) == cf.Ok()
                await make_queue(a.client, "q")
                big = cf.Send(mode=1, message=message("q", b"x" * (1 << 20)))
                assert isinstance(await a.client.call(big), cf.Sent)
            for each in silent:
                refused = error(await each.client.error(), cf.ErrorCode.BAD_REQUEST)
                assert expected in refused.message
                assert await each.client.reply() is None
        assert services.frames.in_use == 0


async def test_a_large_frame_that_arrives_whole_gives_its_reservation_back(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q")
    big = cf.Send(mode=1, message=message("q", b"x" * 700_000))
    [request_id] = await conn.client.send(big)
    frame = await conn.client.reply()
    assert frame is not None
    assert frame.request_id == request_id
    assert isinstance(frame.value, cf.Sent)
    assert services.frames.in_use == 0


async def test_a_disconnect_aborts_open_transactions(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q", transactional=True)
    await conn.client.call(cf.Send(message=message("q", b"held")))
    async with open_session(services) as b:
        await b.client.send(cf.Begin(tx_id=1))
        reply = await b.client.call(cf.Receive(tx_id=1, queue="q"))
        assert isinstance(reply, cf.MessageReply)
    await trio.testing.wait_all_tasks_blocked()
    assert len(services.core.transactions) == 0
    again = await conn.client.call(cf.Receive(queue="q", peek=True))
    assert isinstance(again, cf.MessageReply)
    assert again.message.message.body == b"held"


async def test_malformed_bytes_get_bad_request_and_a_close(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    with structlog.testing.capture_logs() as logs:
        await conn.client.send_raw(b"\x05\x00\x00\x00\x0a\x00\x00\x00\x01\x00\x00\x00junk!")
        refused = error(await conn.client.error(), cf.ErrorCode.BAD_REQUEST)
        assert "Send" in refused.message
        assert await conn.client.reply() is None
        await trio.testing.wait_all_tasks_blocked()
    events = {entry["event"]: entry for entry in logs}
    assert events["bad_frame"]["error"] == refused.message
    assert events["connection_closed"]["reason"] == f"malformed frame: {refused.message}"


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        (cf.ListQueues(), "the first frame must be Hello, not ListQueues"),
        (cf.Hello(min_version=11, max_version=12), "this queue manager speaks 2..10"),
    ],
)
async def test_a_connection_that_does_not_begin_with_a_usable_hello_is_closed(
    services: Services,
    autojump_clock: trio.testing.MockClock,
    first: cf.ClientRequest,
    expected: str,
) -> None:
    async with open_session(services, greet=False) as a:
        await a.client.send(first)
        refused = await a.client.error()
        assert expected in refused.message
        assert await a.client.reply() is None


async def test_a_client_that_does_not_read_its_large_replies_holds_back_only_itself(
    services: Services, autojump_clock: trio.testing.MockClock
) -> None:
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


async def test_an_evicted_connection_is_told_why(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    conn.session.close_soon("closing this idle connection to make room")
    farewell = error(await conn.client.error(), cf.ErrorCode.LIMIT_EXCEEDED)
    assert farewell.message == "closing this idle connection to make room"
    assert await conn.client.reply() is None


async def test_a_stopping_daemon_refuses_requests_and_dooms_their_transaction(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    await conn.client.send(cf.Begin(tx_id=1))
    await trio.testing.wait_all_tasks_blocked()
    services.stopping = True
    refused = await conn.client.call(cf.Send(tx_id=1, message=message("q", b"x")))
    assert (
        error(refused, cf.ErrorCode.SHUTTING_DOWN).message == "the queue manager is shutting down"
    )
    [tx] = conn.session.context.transactions.values()
    assert tx.failure is not None


# ---------------------------------------------------------------------- who the client is


@pytest.mark.parametrize("principal", [None, "alice"])
async def test_the_hello_deadline_binds_a_connection_until_it_shows_who_it_is(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, principal: str | None
) -> None:
    admitted: list[str | None] = []
    async with open_services(tmp_path / "s", limits=limits(hello_timeout=10.0)) as services:
        enable_permissions(services)
        async with open_session(
            services,
            greet=False,
            principal=principal,
            on_authenticated=lambda: admitted.append(principal),
        ) as a:
            started = trio.current_time()
            await a.client.hello()
            if principal is None:  # greeted, but not authenticated
                farewell = await a.client.error()
                assert trio.current_time() - started == 10.0
                assert "not authenticated within 10 s" in farewell.message
                assert await a.client.reply() is None  # closed
                assert admitted == []
                return
            assert admitted == ["alice"]
            await trio.sleep(60)  # past the Hello deadline: still served
            assert isinstance(await a.client.call(cf.ListQueues()), cf.QueueList)


async def test_a_request_before_authenticating_is_denied_and_closes_the_connection(
    services: Services, authorization: Authorization, autojump_clock: trio.testing.MockClock
) -> None:
    with structlog.testing.capture_logs() as logs:
        async with open_session(services) as a:
            denied = error(await a.client.call(cf.ListQueues()), cf.ErrorCode.ACCESS_DENIED)
            assert denied.message.startswith("authenticate first")
            assert await a.client.reply() is None
            await trio.testing.wait_all_tasks_blocked()
    [event] = [entry for entry in logs if entry["event"] == "access_denied"]
    assert event["request"] == "ListQueues"
    assert (authorization.tally.denied, authorization.tally.authentication_failures) == (1, 0)


async def test_a_token_authenticates_the_connection(
    services: Services, authorization: Authorization, autojump_clock: trio.testing.MockClock
) -> None:
    admitted: list[str] = []
    with structlog.testing.capture_logs() as logs:
        async with open_session(services, on_authenticated=lambda: admitted.append("x")) as a:
            assert admitted == []
            assert await a.client.call(cf.Authenticate(token="alice-token")) == cf.Ok()
            assert admitted == ["x"]
            assert a.session.principal == "alice"
            assert isinstance(await a.client.call(cf.CreateQueue(name="mine")), cf.Ok)
            assert await permissions(a.client, "mine") == [("alice", 0xFF)]
    [event] = [entry for entry in logs if entry["event"] == "client_authenticated"]
    assert (event["method"], event["principal"]) == ("token", "alice")


@pytest.mark.parametrize(
    ("principal", "token", "expected"),
    [
        (None, "wrong", "the token is not accepted"),
        ("bob", "alice-token", "this connection is authenticated as 'bob'"),
    ],
)
async def test_a_token_not_accepted_ends_the_connection(
    services: Services,
    authorization: Authorization,
    autojump_clock: trio.testing.MockClock,
    principal: str | None,
    token: str,
    expected: str,
) -> None:
    failed: list[str] = []
    services.authentication_failed = failed.append
    async with open_session(services, principal=principal) as a:
        denied = error(
            await a.client.call(cf.Authenticate(token=token)), cf.ErrorCode.ACCESS_DENIED
        )
        assert denied.message == expected
        assert await a.client.reply() is None
    assert failed == ([] if principal else ["memory"])
    assert authorization.tally.authentication_failures == (0 if principal else 1)


async def test_without_permissions_a_token_is_not_accepted(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    denied = await conn.client.call(cf.Authenticate(token="alice-token"))
    assert error(denied, cf.ErrorCode.ACCESS_DENIED).message == "the token is not accepted"


async def test_a_stopping_daemon_says_it_ended_the_connection_and_its_transactions(
    services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    with structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as nursery:

            async def serve() -> None:
                async with open_session(services) as b:
                    await b.client.send(cf.Begin(tx_id=1))
                    await trio.sleep_forever()

            nursery.start_soon(serve)
            await trio.testing.wait_all_tasks_blocked()
            services.stopping = True
            nursery.cancel_scope.cancel()  # as the daemon stops its sessions
    events = {entry["event"]: entry for entry in logs}
    assert events["connection_closed"]["reason"] == "the queue manager is shutting down"
    assert events["transaction_aborted"]["reason"] == "the queue manager is shutting down"


async def test_a_stopping_daemon_tells_an_idle_client_why_it_closes(
    services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    """Its next request finds the reason waiting (not only "broken pipe")."""
    said: list[cf.ErrorReply] = []
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            async with open_session(services) as idle:
                try:
                    await trio.sleep_forever()
                finally:
                    with trio.CancelScope(shield=True):
                        said.append(await idle.client.error())

        nursery.start_soon(serve)
        await trio.testing.wait_all_tasks_blocked()
        services.stopping = True
        nursery.cancel_scope.cancel()  # as the daemon stops its sessions
    [farewell] = said
    assert farewell == cf.ErrorReply(
        code=cf.ErrorCode.SHUTTING_DOWN, message="the queue manager is shutting down"
    )


async def test_a_stopping_daemon_answers_a_commit_the_client_sent_already_shutting_down(
    services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    """A commit on its way as the daemon stops is answered SHUTTING_DOWN (not
    carried out: its transaction is aborted), not left to a closed connection,
    which would leave its outcome unknown."""
    said: list[cf.Frame | None] = []
    commit_id: list[int] = []
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            async with open_session(services) as conn:
                await conn.client.call(cf.CreateQueue(name="q", transactional=True))
                await conn.client.send(
                    cf.Begin(tx_id=1), cf.Send(tx_id=1, message=message("q", b"x"))
                )
                try:
                    await trio.sleep_forever()
                finally:
                    with trio.CancelScope(shield=True):
                        await trio.testing.wait_all_tasks_blocked()  # the session stops
                        commit_id.extend(await conn.client.send(cf.Commit(tx_id=1)))
                        said.extend([await conn.client.reply(), await conn.client.reply()])

        nursery.start_soon(serve)
        await trio.testing.wait_all_tasks_blocked()
        services.stopping = True
        nursery.cancel_scope.cancel()  # as the daemon stops its sessions
    answer, farewell = said
    assert answer is not None
    assert answer.request_id == commit_id[0]
    assert error(answer.value, cf.ErrorCode.SHUTTING_DOWN).message == (
        "the queue manager is shutting down"
    )
    assert farewell is not None
    assert (farewell.request_id, error(farewell.value, cf.ErrorCode.SHUTTING_DOWN).message) == (
        0,
        "the queue manager is shutting down",
    )


@pytest.mark.parametrize("budget", [64 << 20, 1 << 20], ids=["room", "no-room"])
async def test_a_large_reply_takes_room_in_the_daemon_wide_budget_until_written(
    tmp_path: Path, budget: int, autojump_clock: trio.testing.MockClock
) -> None:
    """A whole list over 4 MiB is held while it is written: the daemon-wide
    budget of large replies bounds that memory, and a request finding no room
    left is answered LIMIT_EXCEEDED (the connection goes on)."""
    queues = long_queue_list(20_000)
    async with open_services(tmp_path, reply_budget=budget) as services:
        services.queue_infos = lambda: queues
        async with open_session(services) as conn:
            reply = await conn.client.call(cf.ListQueues())
            if budget > 8 << 20:
                assert reply == cf.QueueList(queues=queues)
            else:
                refused = error(reply, cf.ErrorCode.LIMIT_EXCEEDED)
                assert "large replies being written" in refused.message
            assert services.replies.in_use == 0  # written, or never held
            assert isinstance(await conn.client.call(cf.ListQueues()), cf.QueueList | cf.ErrorReply)
        assert services.replies.in_use == 0


async def test_a_client_that_does_not_read_its_large_reply_loses_the_connection_not_others(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its reply holds room in the daemon-wide budget while it is written: past the
    frame timeout and a slow reader's time for its size, the connection closes and
    the room comes back, so that other clients' lists are answered."""
    monkeypatch.setattr("qmgr.server.client.session._ENCODE_AWAY", 1_000_000)  # on the loop
    queues = long_queue_list(20_000)
    async with open_services(tmp_path, reply_budget=8 << 20) as services:
        services.queue_infos = lambda: queues
        client_end, server_end = trio.testing.lockstep_stream_pair()
        session = ClientSession(services, server_end, conn_id=999, peer="slow")
        slow = FrameClient(client_end)
        with structlog.testing.capture_logs() as logs:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.run)
                await slow.hello()
                await slow.send(cf.ListQueues())  # and never reads the reply
                await trio.testing.wait_all_tasks_blocked()
                assert services.replies.in_use > 4 << 20
                async with open_session(services) as other:
                    busy = error(
                        await other.client.call(cf.ListQueues()), cf.ErrorCode.LIMIT_EXCEEDED
                    )
                    assert "retry later" in busy.message
                await trio.sleep(120)  # (mock clock) past the slow client's time
                assert services.replies.in_use == 0
                async with open_session(services) as other:
                    assert await other.client.call(cf.ListQueues()) == cf.QueueList(queues=queues)
                nursery.cancel_scope.cancel()
    [event] = [e for e in logs if e["event"] == "reply_not_read"]
    assert event["within_seconds"] > 30
