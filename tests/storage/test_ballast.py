"""The ballast (``storage.ballast``), through the store that keeps it: the space
held back so that removals work on a full disk, given up when one needs it,
and put back as far as the file system has room (its free space faked)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from store_kit import (
    KIB,
    MIB,
    StoreOpener,
    append,
    ballast_in_place,
    create_queue,
    drive,
    fill,
    lookups,
    remove,
    unit,
)

import storage.ballast
from storage import (
    Plan,
    Removed,
    Store,
    StoreError,
    StoreFull,
)
from storage.ballast import BALLAST_MARGIN


def test_ballast_file_holds_the_reserve_and_is_restored(
    open_store: StoreOpener, store_dir: Path
) -> None:
    store = open_store(reserve_size=100 * KIB)
    ballast = store_dir / "reserve"
    assert store.has_ballast
    assert ballast.stat().st_blocks * 512 >= 100 * KIB
    ballast.unlink()
    assert not ballast_in_place(store)
    assert store.restore_ballast()
    assert ballast_in_place(store)
    assert ballast.stat().st_blocks * 512 >= 100 * KIB


class Disk:
    """``disk_room`` of ``storage.ballast``, told how much room the file system has."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, room: int) -> None:
        self.room = room
        self.asked = 0
        monkeypatch.setattr(storage.ballast, "disk_room", self._disk_room)

    def _disk_room(self, path: Path) -> int:
        self.asked += 1
        return self.room


@pytest.fixture
def spent_store(open_store: StoreOpener) -> Store:
    """A store with a 512 KiB reserve whose ballast file is gone (given up on a
    full disk), for the tests of putting it back."""
    store = open_store(reserve_size=512 * KIB)
    store.path.joinpath("reserve").unlink()
    return store


def test_a_ballast_short_of_room_is_made_as_large_as_the_room_allows_and_grown_back(
    spent_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = Disk(monkeypatch, BALLAST_MARGIN + 128 * KIB)
    # Some room: a ballast of that room, the margin left free.
    assert not spent_store.restore_ballast()
    assert spent_store.ballast_size == 128 * KIB
    assert not ballast_in_place(spent_store)
    # No more room (the ballast took it): it stays as it is.
    disk.room = BALLAST_MARGIN
    assert not spent_store.restore_ballast()
    assert spent_store.ballast_size == 128 * KIB
    # A little room: it grows by that much.
    disk.room = BALLAST_MARGIN + 64 * KIB
    assert not spent_store.restore_ballast()
    assert spent_store.ballast_size == 192 * KIB
    # Room for all of it: it grows to reserve_size and no further.
    disk.room = 4 * MIB
    assert spent_store.restore_ballast()
    assert ballast_in_place(spent_store)
    assert spent_store.ballast_size == 512 * KIB
    asked = disk.asked
    assert spent_store.restore_ballast()
    assert disk.asked == asked  # in place: the disk is not even looked at


@pytest.mark.parametrize("room", [0, BALLAST_MARGIN - 1, BALLAST_MARGIN, BALLAST_MARGIN + 100])
def test_no_ballast_is_made_in_the_margin(
    spent_store: Store, monkeypatch: pytest.MonkeyPatch, room: int
) -> None:
    ballast = spent_store.path / "reserve"
    Disk(monkeypatch, room)
    assert not spent_store.restore_ballast()
    assert not ballast.exists()
    assert spent_store.ballast_size == 0


def test_a_store_opened_on_a_nearly_full_disk_holds_a_smaller_ballast(
    open_store: StoreOpener, monkeypatch: pytest.MonkeyPatch
) -> None:
    Disk(monkeypatch, BALLAST_MARGIN + 256 * KIB)
    store = open_store(reserve_size=1 * MIB)
    assert not store.has_ballast
    assert store.ballast_size == 256 * KIB


def test_a_ballast_that_cannot_grow_after_all_is_left_as_it_was(
    spent_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    ballast = spent_store.path / "reserve"
    disk = Disk(monkeypatch, BALLAST_MARGIN + 128 * KIB)
    assert not spent_store.restore_ballast()
    disk.room = 4 * MIB

    def taken_meanwhile(fd: int, offset: int, length: int) -> None:
        os.ftruncate(fd, length)  # a partial allocation, then no room
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", taken_meanwhile)
    assert not spent_store.restore_ballast()
    assert ballast.stat().st_size == 128 * KIB
    assert spent_store.ballast_size == 128 * KIB
    # With no ballast before, none is left.
    ballast.unlink()
    assert not spent_store.restore_ballast()
    assert not ballast.exists()


def test_a_ballast_the_file_system_does_not_fit_is_tried_smaller_then_left_alone(
    spent_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = Disk(monkeypatch, 4 * MIB)  # reported free, but some is kept back
    allocate = os.posix_fallocate
    tried: list[int] = []

    def kept_back(fd: int, offset: int, length: int) -> None:
        tried.append(length)
        if length > 200 * KIB:
            raise OSError(errno.ENOSPC, "No space left on device")
        allocate(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", kept_back)
    assert not spent_store.restore_ballast()
    assert tried == [512 * KIB, 256 * KIB, 128 * KIB]  # half the growth each time
    assert spent_store.ballast_size == 128 * KIB
    tried.clear()
    assert not spent_store.restore_ballast()
    assert tried == [512 * KIB, 320 * KIB, 224 * KIB, 192 * KIB]
    assert spent_store.ballast_size == 192 * KIB
    tried.clear()
    assert not spent_store.restore_ballast()
    down_to_the_smallest_step = [512 * KIB, 352 * KIB, 272 * KIB, 256 * KIB]
    assert tried == down_to_the_smallest_step
    assert spent_store.ballast_size == 192 * KIB
    tried.clear()
    assert not spent_store.restore_ballast()
    assert tried == []  # nothing changed since it last did not fit
    disk.room += 64 * KIB
    assert not spent_store.restore_ballast()
    assert tried == down_to_the_smallest_step


def test_a_partial_ballast_is_given_up_on_a_full_disk_and_that_is_told(
    spent_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    ballast = spent_store.path / "reserve"
    Disk(monkeypatch, BALLAST_MARGIN + 64 * KIB)
    assert not spent_store.restore_ballast()
    assert spent_store.ballast_size == 64 * KIB
    released: list[int] = []
    spent_store.on_ballast_released = lambda: released.append(spent_store.ballast_size)
    queue = create_queue(spent_store, "q")
    fill(spent_store, queue, 2)
    disk_full = StoreFull("commit: no space left on device")

    def respond(plan: Plan) -> StoreError | None:
        return disk_full if ballast.exists() else None

    outcomes = drive(spent_store, [unit(append(queue)), unit(remove(queue, 1))], respond)
    assert outcomes[0].error is disk_full
    assert outcomes[1].results == (Removed(queue.queue_id, 1),)
    assert released == [0]  # told once, after the ballast was gone
    assert lookups(spent_store, queue) == [2]


def test_no_ballast_without_a_reserve(store: Store) -> None:
    assert store.has_ballast
    assert store.restore_ballast()
    assert not (store.path / "reserve").exists()
