"""Distribution lists over a session: create, change, read and delete, each change an
event; changing them is an administrator's, reading them is open."""

from __future__ import annotations

import structlog
import trio
import trio.testing
from kit import Connection, error, make_queue, message, open_session

from qmgr.server.client.authorization import Authorization
from qmgr.server.client.services import Services
from wire import client as cf


async def test_a_list_is_created_changed_read_and_deleted(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    for name in ("a", "b", "c"):
        await make_queue(conn.client, name)
    with structlog.testing.capture_logs() as logs:
        assert await conn.client.call(cf.CreateList(name="l", targets=("a", "b"))) == cf.Ok(value=2)
        changed = await conn.client.call(cf.ChangeList(name="l", add=("c",), remove=("a",)))
        assert changed == cf.Ok(value=2)
        got = await conn.client.call(cf.GetLists(name="l"))
        assert isinstance(got, cf.ListInfoList)
        [found] = got.lists
        assert sorted(found.targets) == ["b", "c"]
        sent = await conn.client.call(cf.Send(message=message("DL=l", b"x")))
        assert isinstance(sent, cf.Sent)
        assert await conn.client.call(cf.DeleteList(name="l")) == cf.Ok(value=0)
    events = [e["event"] for e in logs if e["event"].startswith("list_")]
    assert events == ["list_created", "list_changed", "list_deleted"]
    assert await conn.client.call(cf.GetLists()) == cf.ListInfoList(lists=())
    error(await conn.client.call(cf.DeleteList(name="l")), cf.ErrorCode.QUEUE_NOT_FOUND)


async def test_only_administrators_change_lists(
    services: Services, authorization: Authorization, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_session(services, principal="root") as root:
        await make_queue(root.client, "a")
        assert isinstance(await root.client.call(cf.CreateList(name="l", targets=("a",))), cf.Ok)
    async with open_session(services, principal="bob") as bob:
        for request in (
            cf.CreateList(name="m", targets=("a",)),
            cf.ChangeList(name="l", add=("a",)),
            cf.DeleteList(name="l"),
        ):
            denied = error(await bob.client.call(request), cf.ErrorCode.ACCESS_DENIED)
            assert denied.message == "'bob' is not an administrator (auth.admins)"
        assert isinstance(await bob.client.call(cf.GetLists()), cf.ListInfoList)


async def test_a_target_naming_no_queue_is_refused(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "a")
    created = await conn.client.call(cf.CreateList(name="l", targets=("a", "nosuch")))
    assert error(created, cf.ErrorCode.QUEUE_NOT_FOUND).message == "queue 'nosuch' does not exist"
    assert await conn.client.call(cf.GetLists()) == cf.ListInfoList(lists=())
    assert await conn.client.call(cf.CreateList(name="l", targets=("a",))) == cf.Ok(value=1)
    changed = await conn.client.call(cf.ChangeList(name="l", add=("nosuch",)))
    assert error(changed, cf.ErrorCode.QUEUE_NOT_FOUND).message == "queue 'nosuch' does not exist"
    got = await conn.client.call(cf.GetLists(name="l"))
    assert got == cf.ListInfoList(lists=(cf.ListInfo(name="l", targets=("a",)),))
