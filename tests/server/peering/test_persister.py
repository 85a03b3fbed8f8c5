"""What arrived over a peer connection, written in runs (``qmgr.server.peering.persister``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio
import trio.testing

import storage
from qmgr.protocol import Accepted
from qmgr.server.peering.close_reasons import PeerClosed
from qmgr.server.peering.parts import PeeringParts
from qmgr.server.peering.persister import MAX_RUN_BYTES, Persister, _Run


class Committer:
    """Writes each unit when the test lets it: the results are the ops' own
    names (``fail``: the whole unit fails, as on a full store)."""

    def __init__(self) -> None:
        self.units: list[storage.Unit] = []
        self.go = trio.Event()
        self.fail = False

    async def submit(self, unit: storage.Unit) -> storage.UnitOutcome:
        self.units.append(unit)
        await self.go.wait()
        if self.fail:
            return storage.UnitOutcome.failed(unit, storage.StoreFull("commit: disk full"))
        results = tuple(cast(storage.Result, f"done {op}") for op in unit.ops)
        return storage.UnitOutcome(results)


def persister_of(committer: Committer) -> tuple[Persister, list[Accepted]]:
    rolled_back: list[Accepted] = []
    parts = cast(PeeringParts, SimpleNamespace(committer=committer))
    return Persister(parts, rolled_back.extend), rolled_back


def op(name: str) -> storage.Operation:
    return cast(storage.Operation, name)


def accepted(name: str) -> Accepted:
    return cast(Accepted, name)


def _record(sequence: int, number: int, follows: tuple[int, int] | None) -> storage.RecordIncoming:
    return storage.RecordIncoming(b"\x01" * 16, "q", sequence, number, 0, 0.0, follows=follows)


def test_a_write_stores_each_stream_once_where_its_last_message_left_it() -> None:
    # The write checks where the stream stood before the run's first message
    # of it, and records where its last one left it.
    run, done = _Run(), lambda _: None
    first, second = ("q", b"\x01" * 16, 1), ("q", b"\x02" * 16, 1)
    run.add((), done, accepted=None, stream=first, record=_record(7, 5, (7, 4)))
    run.add((), done, accepted=None, stream=second, record=_record(9, 1, None))
    run.add((), done, accepted=None, stream=first, record=_record(7, 6, (7, 5)))
    run.add((), done, accepted=None, stream=None, record=None)
    records = run.records()
    assert [(r.last_number, r.follows) for r in records] == [(1, None), (6, (7, 4))]
    assert len(run) == 4


async def test_what_arrives_during_a_write_goes_in_the_next_one_and_follow_ups_wait_for_theirs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    committer = Committer()
    persister, _ = persister_of(committer)
    followed: list[tuple[str, list[Any]]] = []
    persister.store((op("a1"), op("a2")), lambda results: followed.append(("a", results)))
    persister.read(100)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(persister.run)
        await trio.testing.wait_all_tasks_blocked()
        # Stored while the first write is on its way: the next write's.
        persister.store((), lambda results: followed.append(("b", results)))
        persister.store((op("c1"),), lambda results: followed.append(("c", results)))
        persister.read(100)
        assert followed == []  # nothing follows before its write is synced
        committer.go.set()
        await trio.testing.wait_all_tasks_blocked()
        persister.close()
    assert [unit.ops for unit in committer.units] == [("a1", "a2"), ("c1",)]
    assert followed == [
        ("a", ["done a1", "done a2"]),
        ("b", []),
        ("c", ["done c1"]),
    ]


async def test_a_failed_write_rolls_its_acceptances_back_and_ends_the_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    committer = Committer()
    committer.fail = True
    committer.go.set()
    persister, rolled_back = persister_of(committer)
    followed: list[object] = []
    persister.store((op("a1"),), followed.append, accepted=accepted("a"))
    persister.store((op("b1"),), followed.append, accepted=accepted("b"))
    persister.read(100)
    with pytest.raises(PeerClosed, match="could not store arrived messages: commit: disk full"):
        await persister.run()
    assert persister.failed
    assert rolled_back == ["a", "b"]
    assert followed == []  # nothing acknowledged


async def test_what_no_write_took_is_rolled_back_when_the_connection_ends() -> None:
    persister, rolled_back = persister_of(Committer())
    persister.store((op("a1"),), lambda _: None, accepted=accepted("a"))
    persister.abandon()
    assert rolled_back == ["a"]
    assert not persister.failed
    persister.abandon()  # once
    assert rolled_back == ["a"]


async def test_the_reader_waits_while_a_run_holds_max_run_bytes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    committer = Committer()
    persister, _ = persister_of(committer)
    persister.store((op("big"),), lambda _: None)
    persister.read(MAX_RUN_BYTES - 1)
    with trio.move_on_after(1):
        await persister.room()  # under the bound: at once
    assert trio.current_time() == 0
    persister.store((op("more"),), lambda _: None)
    persister.read(1)
    waited = False
    async with trio.open_nursery() as nursery:

        async def reader() -> None:
            nonlocal waited
            await persister.room()
            waited = trio.current_time() >= 5

        nursery.start_soon(reader)
        await trio.sleep(5)
        nursery.start_soon(persister.run)  # takes the run: room again
        await trio.testing.wait_all_tasks_blocked()
        committer.go.set()
        await trio.testing.wait_all_tasks_blocked()
        persister.close()
    assert waited
