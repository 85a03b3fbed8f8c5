"""Wake-ups (``qmgr.server.signals``): a queue's event is shared by its waiting readers
until a notification sets and forgets it; listeners hear every notification; a
:class:`Wakeup` set while nobody waits is not lost, and its wait ends after at most the
time given (trio's mock clock)."""

from __future__ import annotations

from collections.abc import Iterable

import trio
import trio.testing

from qmgr.server.signals import QueueSignals, Wakeup

# --------------------------------------------------------------------------- QueueSignals


def test_readers_of_a_queue_share_its_event_until_a_notification() -> None:
    signals = QueueSignals()
    first = signals.event(1)
    assert signals.event(1) is first
    other = signals.event(2)
    assert other is not first
    signals.notify([1])
    assert first.is_set()
    assert not other.is_set()
    fresh = signals.event(1)
    assert fresh is not first  # the next reader waits for the next change
    assert not fresh.is_set()
    signals.notify([1, 3])  # a queue nobody waits on: nothing
    assert fresh.is_set()
    assert not signals.event(3).is_set()


async def test_a_notification_wakes_every_waiting_reader() -> None:
    signals = QueueSignals()
    woken: list[str] = []

    async def reader(name: str, queue_id: int) -> None:
        await signals.event(queue_id).wait()
        woken.append(name)

    async with trio.open_nursery() as nursery:
        for name, queue_id in [("a", 1), ("b", 1), ("c", 2)]:
            nursery.start_soon(reader, name, queue_id)
        await trio.testing.wait_all_tasks_blocked()
        signals.notify(iter([1]))
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(woken) == ["a", "b"]
        signals.notify_all()
    assert sorted(woken) == ["a", "b", "c"]


def test_listeners_hear_every_notification_and_the_readers_are_still_woken() -> None:
    signals = QueueSignals()
    heard: list[tuple[str, Iterable[int]]] = []
    signals.listeners.append(lambda ids: heard.append(("first", ids)))
    signals.listeners.append(lambda ids: heard.append(("second", ids)))
    waiting = signals.event(7)
    signals.notify(queue_id for queue_id in (7, 8))  # a generator is read once
    assert heard == [("first", (7, 8)), ("second", (7, 8))]
    assert waiting.is_set()
    signals.notify([])
    assert heard[-1] == ("second", ())


def test_notify_all_wakes_every_queue_and_tells_the_listeners() -> None:
    signals = QueueSignals()
    heard: list[Iterable[int]] = []
    signals.listeners.append(heard.append)
    events = [signals.event(queue_id) for queue_id in (4, 5, 6)]
    signals.notify_all()
    assert all(event.is_set() for event in events)
    assert heard == [(4, 5, 6)]
    signals.notify_all()  # nobody waits now
    assert heard[-1] == ()


# --------------------------------------------------------------------------- Wakeup


async def test_a_wakeup_set_while_nobody_waits_is_not_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    wakeup = Wakeup()
    wakeup.set()
    wakeup.set()  # twice is once
    start = trio.current_time()
    await wakeup.wait()
    assert trio.current_time() == start
    # Re-armed: the next wait waits for the next set, or its limit.
    await wakeup.wait(30)
    assert trio.current_time() == start + 30


async def test_a_wait_ends_at_its_limit(autojump_clock: trio.testing.MockClock) -> None:
    wakeup = Wakeup()
    start = trio.current_time()
    await wakeup.wait(5)
    assert trio.current_time() == start + 5
    await wakeup.wait(0)
    assert trio.current_time() == start + 5


async def test_a_set_wakes_the_waiting_task_at_once(mock_clock: trio.testing.MockClock) -> None:
    wakeup = Wakeup()
    woken_at: list[float] = []

    async def waiter() -> None:
        await wakeup.wait(60)
        woken_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert woken_at == []  # the mock clock stands still: only a set wakes it
        wakeup.set()
    assert woken_at == [trio.current_time()]
