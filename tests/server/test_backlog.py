"""The backlog of a background task (``qmgr.server.backlog``)."""

from __future__ import annotations

import trio
import trio.testing

from qmgr.server.backlog import Backlog


async def test_the_task_takes_everything_that_came_while_it_waited(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backlog: Backlog[int] = Backlog()
    taken: list[list[int]] = []

    async def task() -> None:
        while True:
            taken.append(await backlog.take())
            await trio.sleep(1.0)  # one write at a time

    async with trio.open_nursery() as nursery:
        nursery.start_soon(task)
        await trio.sleep(0.5)
        assert taken == []  # nothing yet: it waits
        backlog.add(1)
        await trio.sleep(0.1)
        backlog.add(2, 3)  # while the first is being written
        backlog.add()  # a wake-up alone changes nothing
        assert 2 in backlog
        assert len(backlog) == 2
        await trio.sleep(2.0)
        nursery.cancel_scope.cancel()
    assert taken == [[1], [2, 3]]


async def test_taking_what_is_there_does_not_wait() -> None:
    backlog: Backlog[str] = Backlog()
    backlog.add("a")
    with trio.CancelScope() as scope:
        scope.cancel()  # any checkpoint would raise Cancelled
        assert await backlog.take() == ["a"]
    assert len(backlog) == 0
