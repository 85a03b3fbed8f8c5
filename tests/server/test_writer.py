"""The writer (``qmgr.server.writer``) over a store that records what it is given: where a
plan is applied (its own thread, or the caller's), what comes back when applying fails,
that the event loop runs on while the thread applies, that a cancelled caller still gets
the result of a write that started, and that closing stops the thread.

(The writer with a real store, under the committer: ``tests/server/test_committer.py``.)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import pytest
import trio
import trio.testing

import storage
from qmgr.server.writer import Writer
from storage import Plan, Store

#: Seconds a test waits for the writer's thread at most (it answers at once).
PATIENCE = 10.0


class RecordingStore:
    """Stands for the store: records the plans it applies, and on which thread.

    ``fail`` is raised by every apply; with ``gate`` set, an apply waits for it
    (``entered`` says one has begun).
    """

    def __init__(self) -> None:
        self.applied: list[Plan] = []
        self.threads: list[threading.Thread] = []
        self.fail: BaseException | None = None
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def apply(self, plan: Plan) -> None:
        self.threads.append(threading.current_thread())
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(PATIENCE)
        if self.fail is not None:
            raise self.fail
        self.applied.append(plan)


@pytest.fixture
def store() -> RecordingStore:
    return RecordingStore()


@contextmanager
def writing(store: RecordingStore, *, thread: bool) -> Iterator[Writer]:
    writer = Writer(cast(Store, store), thread=thread)
    try:
        yield writer
    finally:
        writer.close()


def plan() -> Plan:
    """A plan the recording store takes as it is."""
    return cast(Plan, object())


@pytest.mark.parametrize("thread", [True, False], ids=["threaded", "inline"])
async def test_plans_are_applied_in_order_where_configured(
    store: RecordingStore, thread: bool
) -> None:
    plans = [plan() for _ in range(3)]
    with writing(store, thread=thread) as writer:
        assert writer.threaded is thread
        for each in plans:
            assert await writer.apply(each) is None
    assert store.applied == plans
    if thread:
        [writer_thread] = set(store.threads)
        assert writer_thread is not threading.current_thread()
        assert writer_thread.name == "qmgr-writer"
        assert writer_thread.daemon
    else:
        assert set(store.threads) == {threading.current_thread()}


@pytest.mark.parametrize("thread", [True, False], ids=["threaded", "inline"])
async def test_a_store_error_comes_back_as_it_is(store: RecordingStore, thread: bool) -> None:
    store.fail = error = storage.StoreFull("disk full (simulated)")
    with writing(store, thread=thread) as writer:
        assert await writer.apply(plan()) is error
        store.fail = None
        assert await writer.apply(plan()) is None  # and the writer goes on
    assert len(store.applied) == 1


@pytest.mark.parametrize("thread", [True, False], ids=["threaded", "inline"])
async def test_any_other_error_fails_the_batch_as_a_store_error(
    store: RecordingStore, thread: bool
) -> None:
    store.fail = RuntimeError("a bug in the write path")
    with writing(store, thread=thread) as writer:
        result = await writer.apply(plan())
        assert type(result) is storage.StoreError
        assert str(result) == "the writer failed: RuntimeError: a bug in the write path"
        store.fail = None
        assert await writer.apply(plan()) is None
    assert len(store.applied) == 1


async def test_the_event_loop_runs_on_while_the_thread_applies(store: RecordingStore) -> None:
    store.gate = threading.Event()
    results: list[storage.StoreError | None] = []
    with writing(store, thread=True) as writer, trio.fail_after(PATIENCE):
        async with trio.open_nursery() as nursery:

            async def apply() -> None:
                results.append(await writer.apply(plan()))

            nursery.start_soon(apply)
            assert await trio.to_thread.run_sync(store.entered.wait, PATIENCE)
            await trio.testing.wait_all_tasks_blocked()
            assert results == []  # still applying, and this task runs
            store.gate.set()
    assert results == [None]


async def test_a_cancelled_caller_still_gets_the_result_of_its_write(
    store: RecordingStore,
) -> None:
    store.gate = threading.Event()
    results: list[storage.StoreError | None] = []
    cancelled: list[bool] = []
    with writing(store, thread=True) as writer, trio.fail_after(PATIENCE):
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def apply() -> None:
                with scope:
                    results.append(await writer.apply(plan()))
                    await trio.lowlevel.checkpoint()  # where the cancellation lands
                cancelled.append(scope.cancelled_caught)

            nursery.start_soon(apply)
            assert await trio.to_thread.run_sync(store.entered.wait, PATIENCE)
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert results == []  # the wait is shielded: it goes on
            store.gate.set()
    assert results == [None]
    assert cancelled == [True]
    assert len(store.applied) == 1


async def test_close_stops_the_thread_and_may_be_repeated(store: RecordingStore) -> None:
    writer = Writer(cast(Store, store), thread=True)
    assert await writer.apply(plan()) is None
    [writer_thread] = store.threads
    assert writer_thread.is_alive()
    writer.close()
    assert not writer_thread.is_alive()
    writer.close()
    inline = Writer(cast(Store, store), thread=False)
    inline.close()
    inline.close()
