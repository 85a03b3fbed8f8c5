"""Queue permissions in a client session over memory streams: a denied request gets
ACCESS_DENIED and runs nothing, the connection goes on, older protocol versions are
refused the permission requests, and nothing is checked without auth.required."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio.testing
from kit import FrameClient, limits, message, open_services, open_session

import storage
from qmgr.server.authorization import Authorization
from qmgr.server.services import Services
from qmgr.server.session import ClientSession
from wire import client as cf


def enable(services: Services, *, enabled: bool = True) -> None:
    services.authorization = Authorization(
        services.core,
        enabled=enabled,
        admins=frozenset({"root"}),
        groups={"ops": frozenset({"carol"})},
        default_acl={},
    )


async def test_a_denied_request_runs_nothing_and_the_connection_goes_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services:
        enable(services)
        async with open_session(services, principal="alice") as alice:
            assert isinstance(await alice.client.call(cf.CreateQueue(name="q")), cf.Ok)
            sent = await alice.client.call(cf.Send(message=message("q", b"kept")))
            assert isinstance(sent, cf.Sent)
        async with open_session(services, principal="bob") as bob:
            for request in (cf.PurgeQueue(name="q"), cf.DeleteQueue(name="q")):
                denied = await bob.client.call(request)
                assert isinstance(denied, cf.ErrorReply)
                assert denied.code == cf.ErrorCode.ACCESS_DENIED
                assert "'bob' may not" in denied.message
            listed = await bob.client.call(cf.ListQueues())  # the connection goes on
            assert isinstance(listed, cf.QueueList)
        async with open_session(services, principal="carol") as carol:
            change = cf.ChangePermissions(queue="q", entry="group:ops", grant=0x06)
            assert isinstance(await carol.client.call(change), cf.ErrorReply)
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
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services:
        enable(services, enabled=False)
        async with open_session(services, principal="alice") as alice:
            assert isinstance(await alice.client.call(cf.CreateQueue(name="q")), cf.Ok)
        async with open_session(services) as anyone:
            assert isinstance(await anyone.client.call(cf.PurgeQueue(name="q")), cf.Ok)
            acl = await anyone.client.call(cf.GetPermissions(queue="q"))
            assert isinstance(acl, cf.Permissions)
            assert [(e.name, e.rights) for e in acl.entries] == [("alice", 0xFF)]


async def test_older_connections_are_refused_the_permission_requests(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with (
        open_services(tmp_path / "s") as services,
        open_session(services, greet=False) as old,
    ):
        await old.client.send(cf.Hello(client_name="old", min_version=2, max_version=5))
        hello = await old.client.reply()
        assert hello is not None
        assert isinstance(hello.value, cf.HelloOk)
        await old.client.send(cf.GetPermissions(queue="q"))
        frame = await old.client.reply()
        assert frame is not None
        assert isinstance(frame.value, cf.ErrorReply)
        assert "protocol version 6" in frame.value.message


async def test_a_change_of_permissions_applies_to_the_next_send(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services:
        enable(services)
        async with (
            open_session(services, principal="alice") as alice,
            open_session(services, principal="bob") as bob,
        ):
            assert isinstance(await alice.client.call(cf.CreateQueue(name="q")), cf.Ok)
            send = cf.Send(message=message("q", b"from bob"))
            for _ in range(2):  # asked twice: the answer is kept
                denied = await bob.client.call(send)
                assert isinstance(denied, cf.ErrorReply)
                assert denied.code == cf.ErrorCode.ACCESS_DENIED
            grant = cf.ChangePermissions(queue="q", entry="bob", grant=0x01)
            assert isinstance(await alice.client.call(grant), cf.Permissions)
            assert isinstance(await bob.client.call(send), cf.Sent)
            revoke = cf.ChangePermissions(queue="q", entry="bob", revoke=0xFF)
            assert isinstance(await alice.client.call(revoke), cf.Permissions)
            assert isinstance(await bob.client.call(send), cf.ErrorReply)


async def test_an_unreadable_stored_list_leaves_the_queue_to_administrators(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services:
        enable(services)
        services.authorization = Authorization(
            services.core,
            enabled=True,
            admins=frozenset({"root"}),
            groups={},
            default_acl={"everyone": ["send"]},  # what must not apply to a damaged list
        )
        async with open_session(services, principal="root") as root:
            assert isinstance(await root.client.call(cf.CreateQueue(name="q")), cf.Ok)
        damaged = storage.SetSetting("acl:q", "not a list")
        [outcome] = services.core.store.commit([storage.Unit((damaged,))], now=0.0)
        assert outcome.error is None
        services.authorization._lists.clear()  # as after a restart
        async with open_session(services, principal="bob") as bob:
            denied = await bob.client.call(cf.Send(message=message("q", b"x")))
            assert isinstance(denied, cf.ErrorReply)
            assert denied.code == cf.ErrorCode.ACCESS_DENIED
        async with open_session(services, principal="root") as root:
            assert isinstance(await root.client.call(cf.Send(message=message("q", b"x"))), cf.Sent)


@asynccontextmanager
async def counted_session(
    services: Services, admitted: list[str], principal: str | None = None
) -> AsyncIterator[FrameClient]:
    """A session served in the background that notes in ``admitted`` when it
    counts as authenticated, and its client (not greeted)."""
    client_end, server_end = trio.testing.memory_stream_pair()
    session = ClientSession(
        services,
        server_end,
        conn_id=1,
        peer="memory",
        principal=principal,
        on_authenticated=lambda: admitted.append(principal or "anonymous"),
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(session.run)
        yield FrameClient(client_end)
        await client_end.aclose()


async def test_a_connection_that_never_authenticates_is_closed_at_the_hello_deadline(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s", limits=limits(hello_timeout=10.0)) as services:
        enable(services)
        admitted: list[str] = []
        async with counted_session(services, admitted) as client:
            started = trio.current_time()
            await client.hello()  # greeted, but not authenticated
            farewell = await client.error()
            assert trio.current_time() - started == 10.0
            assert "not authenticated within 10 s" in farewell.message
            assert await client.reply() is None  # closed
            assert admitted == []


async def test_a_connection_is_counted_authenticated_once_it_shows_who_it_is(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s", limits=limits(hello_timeout=10.0)) as services:
        enable(services)
        admitted: list[str] = []
        async with counted_session(services, admitted, principal="alice") as client:
            assert admitted == []
            await client.hello()
            assert admitted == ["alice"]
            await trio.sleep(60)  # past the Hello deadline: still served
            assert isinstance(await client.call(cf.ListQueues()), cf.QueueList)
