"""Queue permissions over a session: a denied request gets ACCESS_DENIED and runs
nothing, the connection goes on, a change applies to the next request, and nothing
is checked without auth.required."""

from __future__ import annotations

import structlog
import trio
import trio.testing
from kit import enable_permissions, error, make_queue, message, open_session, permissions

from qmgr.core.permissions import Right
from qmgr.server.client.authorization import Authorization
from qmgr.server.client.services import Services
from wire import client as cf


async def test_a_denied_request_runs_nothing_and_the_connection_goes_on(
    services: Services, authorization: Authorization, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_session(services, principal="alice") as alice:
        await make_queue(alice.client, "q")
        assert isinstance(await alice.client.call(cf.Send(message=message("q", b"kept"))), cf.Sent)
    with structlog.testing.capture_logs() as logs:
        async with open_session(services, principal="bob") as bob:
            for request in (cf.PurgeQueue(name="q"), cf.DeleteQueue(name="q")):
                denied = error(await bob.client.call(request), cf.ErrorCode.ACCESS_DENIED)
                assert "'bob' may not" in denied.message
            listed = await bob.client.call(cf.ListQueues())  # the connection goes on
            assert isinstance(listed, cf.QueueList)
    assert [e["request"] for e in logs if e["event"] == "access_denied"] == [
        "PurgeQueue",
        "DeleteQueue",
    ]
    async with open_session(services, principal="carol") as carol:
        change = cf.ChangePermissions(queue="q", entry="group:ops", grant=0x06)
        error(await carol.client.call(change), cf.ErrorCode.ACCESS_DENIED)
    async with open_session(services, principal="alice") as alice:
        changed = await alice.client.call(
            cf.ChangePermissions(queue="q", entry="group:ops", grant=0x06)
        )
        assert isinstance(changed, cf.Permissions)
        assert {e.name: e.rights for e in changed.entries} == {"alice": 0xFF, "group:ops": 6}
    async with open_session(services, principal="carol") as carol:
        got = await carol.client.call(cf.Receive(queue="q"))
        assert isinstance(got, cf.MessageReply)
        assert got.message.message.body == b"kept"


async def test_without_auth_required_nothing_is_checked(
    services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    enable_permissions(services, enabled=False)
    async with open_session(services, principal="alice") as alice:
        await make_queue(alice.client, "q")
    async with open_session(services) as anyone:
        assert isinstance(await anyone.client.call(cf.PurgeQueue(name="q")), cf.Ok)
        assert await permissions(anyone.client, "q") == [("alice", 0xFF)]


async def test_a_change_of_permissions_applies_to_the_next_send(
    services: Services, authorization: Authorization, autojump_clock: trio.testing.MockClock
) -> None:
    async with (
        open_session(services, principal="alice") as alice,
        open_session(services, principal="bob") as bob,
    ):
        await make_queue(alice.client, "q")
        send = cf.Send(message=message("q", b"from bob"))
        for _ in range(2):  # asked twice: the answer is kept
            error(await bob.client.call(send), cf.ErrorCode.ACCESS_DENIED)
        with structlog.testing.capture_logs() as logs:
            grant = cf.ChangePermissions(queue="q", entry="bob", grant=0x01)
            assert isinstance(await alice.client.call(grant), cf.Permissions)
        [event] = logs
        assert (event["event"], event["entry"], event["granted"]) == (
            "permissions_changed",
            "bob",
            ["send"],
        )
        assert isinstance(await bob.client.call(send), cf.Sent)
        revoke = cf.ChangePermissions(queue="q", entry="bob", revoke=0xFF)
        assert isinstance(await alice.client.call(revoke), cf.Permissions)
        error(await bob.client.call(send), cf.ErrorCode.ACCESS_DENIED)


async def test_a_change_must_name_an_entry(
    services: Services, authorization: Authorization, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_session(services, principal="root") as root:
        await make_queue(root.client, "q")
        for entry in ("  ", "x" * 257):
            change = cf.ChangePermissions(queue="q", entry=entry, grant=1)
            refused = error(await root.client.call(change), cf.ErrorCode.INVALID_ARGUMENT)
            assert "an entry is a principal, group:NAME, peer:NAME or everyone" in refused.message
        for entry in ("group:", "Peer:"):
            change = cf.ChangePermissions(queue="q", entry=entry, grant=1)
            refused = error(await root.client.call(change), cf.ErrorCode.INVALID_ARGUMENT)
            assert (
                refused.message
                == f"'{entry}' names no {entry[:-1].lower()}: write {entry.lower()}NAME"
            )


async def test_everyone_groups_and_peers_are_named_in_any_case(
    services: Services, authorization: Authorization, autojump_clock: trio.testing.MockClock
) -> None:
    async with (
        open_session(services, principal="root") as root,
        open_session(services, principal="bob") as bob,
    ):
        await make_queue(root.client, "q")
        for entry in ("Everyone", " GROUP:ops", "PEER:qm7"):
            change = cf.ChangePermissions(queue="q", entry=entry, grant=0x02)  # peek
            assert isinstance(await root.client.call(change), cf.Permissions)
        names = [name for name, _ in await permissions(root.client, "q")]
        assert names == ["everyone", "group:ops", "peer:qm7", "root"]
        assert isinstance(await bob.client.call(cf.Receive(queue="q", peek=True)), cf.NoMessage)


async def test_without_permissions_kept_the_requests_are_invalid(
    services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_session(services) as a:
        await make_queue(a.client, "q")
        for request in (
            cf.GetPermissions(queue="q"),
            cf.ChangePermissions(queue="q", entry="bob", grant=1),
        ):
            refused = error(await a.client.call(request), cf.ErrorCode.INVALID_ARGUMENT)
            assert refused.message == "this queue manager keeps no queue permissions"


async def test_unknown_rights_bits_are_refused_and_change_nothing(
    services: Services, authorization: Authorization, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_session(services, principal="root") as root:
        await make_queue(root.client, "q")
        for grant, revoke in ((0x100, 0), (0x01, 0x8000)):
            change = cf.ChangePermissions(queue="q", entry="bob", grant=grant, revoke=revoke)
            refused = error(await root.client.call(change), cf.ErrorCode.INVALID_ARGUMENT)
            assert refused.message == f"unknown rights bits {(grant | revoke) & ~0xFF:#x}"
        assert await permissions(root.client, "q") == [("root", 0xFF)]


async def test_a_revoke_ends_the_receives_already_waiting(
    services: Services, authorization: Authorization, autojump_clock: trio.testing.MockClock
) -> None:
    """A receive or peek that began waiting with the right stops, refused, once the
    right is revoked: a message sent after the revoke stays in the queue."""
    async with (
        open_session(services, principal="alice") as alice,
        open_session(services, principal="bob") as bob,
    ):
        await make_queue(alice.client, "q")
        grant = cf.ChangePermissions(queue="q", entry="bob", grant=int(Right.RECEIVE))
        assert isinstance(await alice.client.call(grant), cf.Permissions)
        waiting = await bob.client.send(
            cf.Receive(queue="q", timeout_ms=cf.INFINITE_TIMEOUT_MS),
            cf.Receive(queue="q", timeout_ms=cf.INFINITE_TIMEOUT_MS, peek=True),
        )
        await trio.sleep(1)  # (mock clock) both are waiting
        with structlog.testing.capture_logs() as logs:
            revoke = cf.ChangePermissions(queue="q", entry="bob", revoke=int(Right.RECEIVE))
            assert isinstance(await alice.client.call(revoke), cf.Permissions)
            with trio.fail_after(60):  # (mock clock) at once, not at a timeout
                frames = [await bob.client.reply(), await bob.client.reply()]
        assert sorted(f.request_id for f in frames if f is not None) == sorted(waiting)
        for frame in frames:
            assert frame is not None
            denied = error(frame.value, cf.ErrorCode.ACCESS_DENIED)
            assert "'bob' may not" in denied.message
        assert [e["request"] for e in logs if e["event"] == "access_denied"] == ["Receive"] * 2
        assert isinstance(await alice.client.call(cf.Send(message=message("q", b"kept"))), cf.Sent)
        kept = await alice.client.call(cf.Receive(queue="q"))
        assert isinstance(kept, cf.MessageReply)
        assert kept.message.message.body == b"kept"


async def test_a_journal_or_subqueue_takes_its_queues_permissions(
    services: Services, authorization: Authorization, autojump_clock: trio.testing.MockClock
) -> None:
    """A change on ``q;poison`` would be written and never read (the queue's list
    governs its journal and subqueues): it is refused, saying where to make it."""
    async with open_session(services, principal="alice") as alice:
        await make_queue(alice.client, "q")
        for part in ("q;poison", "q;retry", "q;journal"):
            change = cf.ChangePermissions(queue=part, entry="bob", grant=int(Right.PEEK))
            refused = error(await alice.client.call(change), cf.ErrorCode.INVALID_ARGUMENT)
            assert refused.message == (
                f"'{part}' takes the permissions of its queue 'q': change them there"
            )
        assert await permissions(alice.client, "q;poison") == [("alice", 0xFF)]
