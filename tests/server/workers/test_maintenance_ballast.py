"""A removal on a full disk gets the room of the ballast it gave up, also with a
writer thread (``store.writer_thread``): the eraser, woken to put the ballast
back, must not take that room while the batch is being written on the thread
(the batch would find no room again, and again)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio
import trio.testing
from core.harness import WALL, CoreHarness
from server.committer_kit import running_committer

import storage
import storage.ballast
import storage.environment
import storage.store
from qmgr.core.engine import QueueManagerCore
from qmgr.server.signals import QueueSignals, Wakeup
from qmgr.server.workers.maintenance import Eraser
from storage import Store

KIB = 1024
RESERVE = 512 * KIB
#: What the disk holds besides data.mdb: the reserve, plus a little.
CAPACITY = RESERVE + 128 * KIB
#: Disk bytes the removal batch needs (it fits in the released ballast, not in the margin).
NEED = 300 * KIB


class Harness(CoreHarness):
    """A core over a store that keeps a ballast of ``RESERVE`` bytes."""

    def _open(self) -> None:
        from core.harness import ReadOnlyStore

        self.store = Store(self.path, initial_map_size=1 << 22, durable=False, reserve_size=RESERVE)
        self.core = QueueManagerCore(ReadOnlyStore(self.store), limits=self.limits)
        for unit in self.core.queues.system_queue_units(WALL):
            self.write(unit)
        self.reserve_ordinals()


@pytest.mark.parametrize("thread", [False, True])
async def test_a_removal_gets_the_ballast_it_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thread: bool
) -> None:
    qm = Harness(tmp_path / "store")
    qm.create("q", transactional=True)
    for i in range(3):
        qm.send_tx("q", b"%d" % i)
    store = qm.store
    assert store.ballast_size == RESERVE

    def room(path: object = None) -> int:
        """Free bytes of a disk that holds ``CAPACITY`` besides ``data.mdb``."""
        return CAPACITY - store.ballast_size

    monkeypatch.setattr(storage.ballast, "disk_room", room)
    real_apply = storage.store.apply_plan
    attempts: list[int] = []

    def apply_plan(env: storage.environment.Environment, plan: storage.Plan) -> None:
        time.sleep(0.05)  # a slow sync: with a thread, the event loop runs meanwhile
        attempts.append(room())
        if room() < NEED and len(attempts) < 40:  # past 40 attempts, let it through
            raise storage.StoreFull("commit: no space left on device (simulated)")
        return real_apply(env, plan)

    monkeypatch.setattr(storage.store, "apply_plan", apply_plan)
    released: list[int] = []
    signals = QueueSignals()
    async with running_committer(store, thread=thread) as committer:
        eraser = Eraser(store, qm.core, 2, Wakeup(), committer=committer, signals=signals)
        hook = store.on_ballast_released

        def counting() -> None:
            released.append(1)
            hook()

        store.on_ballast_released = counting
        async with trio.open_nursery() as nursery:
            nursery.start_soon(eraser.run)
            await trio.testing.wait_all_tasks_blocked()
            _, unit = qm.core.queues.purge("q")
            outcome = None
            with trio.move_on_after(5):
                outcome = await committer.submit(unit)
            nursery.cancel_scope.cancel()
    assert outcome is not None, "the removal never got written (5 s)"
    assert outcome.error is None, outcome.error
    assert len(released) == 1
