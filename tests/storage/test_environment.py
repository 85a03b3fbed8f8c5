"""The environment (``storage.environment``): map growth, the limit of
``max_map_size``, the headroom kept for removals, the ballast file given up
when the disk is full, the directory lock, private files and durable commits."""

from __future__ import annotations

import errno
import gc
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from store_kit import (
    KIB,
    MIB,
    Reopener,
    StoreOpener,
    append,
    ballast_in_place,
    commit,
    commit_ok,
    counters,
    create_queue,
    drive,
    erase_all,
    fill,
    fill_until_full,
    lookups,
    payloads,
    remove,
    unit,
)

from storage import (
    SKIPPED,
    Appended,
    DeleteQueue,
    Failed,
    Plan,
    PurgeQueue,
    QueuePurged,
    QueueRecord,
    Removed,
    Store,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreLocked,
)

LIMIT = 4 * MIB


RESERVE = 512 * KIB


#: Where ordinary writes stop: the limit less the headroom kept for removals.


ORDINARY_LIMIT = LIMIT - RESERVE


BIG = b"B" * (256 * KIB)


@pytest.fixture
def limited(open_store: StoreOpener) -> Store:
    """A store of at most ``LIMIT`` bytes that keeps ``RESERVE`` for removals."""
    return open_store(initial_map_size=1 * MIB, max_map_size=LIMIT, reserve_size=RESERVE)


def oldest(store: Store, queue: QueueRecord, count: int = 1) -> list[int]:
    return lookups(store, queue, limit=count)


# --------------------------------------------------------------------------- growth


def test_map_grows_transparently_and_keeps_its_size_on_reopen(
    open_store: StoreOpener, reopen: Reopener
) -> None:
    store = open_store(initial_map_size=256 * KIB)
    assert store.map_size == 256 * KIB
    queue = create_queue(store, "q")
    for _ in range(20):
        fill(store, queue, 25, bytes(range(256)) * 16)  # 4 KiB each
    fill(store, queue, 1, b"L" * (3 * MIB))
    assert store.map_size > 4 * MIB
    assert counters(store, "q")[:2] == (502, 501)
    grown = store.map_size
    store = reopen(store, initial_map_size=256 * KIB)
    assert store.map_size == grown  # an existing store keeps its size
    assert lookups(store, queue) == list(range(1, 502))
    assert payloads(store, queue)[-1] == b"L" * (3 * MIB)


def test_a_new_store_starts_below_the_headroom(open_store: StoreOpener) -> None:
    store = open_store(initial_map_size=LIMIT, max_map_size=LIMIT, reserve_size=RESERVE)
    assert store.map_size == ORDINARY_LIMIT


def test_headroom_is_at_most_an_eighth_of_the_limit(open_store: StoreOpener) -> None:
    store = open_store(initial_map_size=LIMIT, max_map_size=LIMIT, reserve_size=LIMIT)
    assert store.map_size == LIMIT - LIMIT // 8


def test_units_that_do_not_fit_at_the_limit_fail_and_nothing_of_them_is_applied(
    open_store: StoreOpener, reopen: Reopener
) -> None:
    store = open_store(initial_map_size=256 * KIB, max_map_size=1 * MIB)
    queue = create_queue(store, "q")
    fill(store, queue, 10, b"s" * 1000)
    before = store.get_queue("q")
    huge = b"h" * (2 * MIB)
    outcomes = commit(
        store, unit(append(queue, b"s")), unit(append(queue, huge)), unit(append(queue, b"s"))
    )
    # The batch did not fit: every unit that adds data is refused.
    for outcome in outcomes:
        assert isinstance(outcome.error, StoreFull)
        assert "max_map_size" in str(outcome.error)
    assert store.map_size == 1 * MIB
    assert store.get_queue("q") == before
    assert lookups(store, queue) == list(range(1, 11))
    # Smaller writes still work and continue the lookup ids.
    assert fill(store, queue, 1) == [11]
    assert lookups(reopen(store), queue) == list(range(1, 12))


def test_refused_atomic_unit_reports_store_full_once_and_skips_the_rest(
    open_store: StoreOpener,
) -> None:
    store = open_store(initial_map_size=256 * KIB, max_map_size=512 * KIB)
    queue = create_queue(store, "q")
    [outcome] = commit(store, unit(append(queue), append(queue, b"h" * MIB), append(queue)))
    assert isinstance(outcome.results[0], Failed)
    assert isinstance(outcome.results[0].error, StoreFull)
    assert outcome.results[1:] == (SKIPPED, SKIPPED)


# --------------------------------------------------------------------------- headroom


def test_ordinary_writes_never_take_the_headroom(limited: Store) -> None:
    queue = create_queue(limited, "q", transactional=True)
    assert fill_until_full(limited, queue) > 10_000
    assert limited.map_size <= ORDINARY_LIMIT


def test_at_the_limit_appends_fail_while_removals_in_the_same_batch_commit(
    limited: Store,
) -> None:
    queue = create_queue(limited, "q", transactional=True)
    stored = fill_until_full(limited, queue)
    for round_ in range(20):
        [first] = oldest(limited, queue)
        outcomes = commit(
            limited,
            unit(append(queue, BIG)),
            unit(remove(queue, first)),
            unit(append(queue)),
        )
        assert isinstance(outcomes[0].error, StoreFull), round_
        assert outcomes[0].results[0] == Failed(outcomes[0].error)
        assert outcomes[1].results == (Removed(queue.queue_id, first),), round_
        assert isinstance(outcomes[2].error, StoreFull), round_
        assert limited.map_size <= LIMIT
    assert counters(limited, "q")[1] == stored - 20


def test_a_store_past_a_limit_lowered_since_opens_and_can_be_emptied(
    open_store: StoreOpener, reopen: Reopener
) -> None:
    store = open_store(initial_map_size=1 * MIB)
    queue = create_queue(store, "q", transactional=True)
    fill(store, queue, 48, BIG)  # 12 MiB in use
    lowered = reopen(store, initial_map_size=1 * MIB, max_map_size=2 * MIB, reserve_size=RESERVE)
    [refused] = commit(lowered, unit(append(queue)))
    assert isinstance(refused.error, StoreFull)
    commit_ok(lowered, unit(PurgeQueue(queue.queue_id)))
    erase_all(lowered, queue, 500)
    assert counters(lowered, "q")[1] == 0
    # Room again under the new limit, once the freed pages can be used.
    for lookup_id in range(49, 54):
        assert fill(lowered, queue, 1, b"y" * (64 * KIB)) == [lookup_id]


@pytest.mark.parametrize("transactional", [True, False])
def test_a_full_store_can_be_purged_erased_and_filled_again_and_again(
    limited: Store, transactional: bool
) -> None:
    queue = create_queue(limited, "q", transactional=transactional)
    for _ in range(3):
        stored = fill_until_full(limited, queue)
        assert stored > 1000
        [refused] = commit(limited, unit(append(queue)))
        assert isinstance(refused.error, StoreFull)
        [purged] = commit_ok(limited, unit(PurgeQueue(queue.queue_id)))
        assert purged.results == (QueuePurged(queue.queue_id, stored),)
        steps = erase_all(limited, queue, 500)
        assert sum(step.messages for step in steps) == stored
        assert len(steps) == -(-stored // 500)
        assert limited.map_size <= LIMIT
        assert limited.queues_to_erase() == []
        [again] = commit_ok(limited, unit(append(queue, BIG)))
        assert isinstance(again.results[0], Appended)
        commit_ok(limited, unit(remove(queue, again.results[0].lookup_id)))


def test_a_full_store_can_delete_a_queue_and_erase_it(limited: Store) -> None:
    queue = create_queue(limited, "q")
    other = create_queue(limited, "other")
    stored = fill_until_full(limited, queue)
    commit_ok(limited, unit(DeleteQueue(queue.queue_id)))
    assert sum(step.messages for step in erase_all(limited, queue, 1000)) == stored
    assert fill(limited, other, 1, BIG) == [1]


def test_headroom_survives_removals_alternating_with_refills(limited: Store) -> None:
    queue = create_queue(limited, "q", transactional=True)
    fill_until_full(limited, queue)
    for _ in range(150):
        commit_ok(limited, unit(*(remove(queue, lookup) for lookup in oldest(limited, queue, 3))))
        fill_until_full(limited, queue)


# --------------------------------------------------------------------------- a full disk


def test_disk_full_on_a_removal_gives_it_the_ballast_space(open_store: StoreOpener) -> None:
    store = open_store(reserve_size=64 * KIB)
    ballast = store.path / "reserve"
    queue = create_queue(store, "q")
    fill(store, queue, 2)
    disk_full = StoreFull("commit: no space left on device")
    removal = unit(remove(queue, 1))
    plans: list[Plan] = []

    def respond(plan: Plan) -> StoreError | None:
        plans.append(plan)
        return disk_full if store.has_ballast else None

    outcomes = drive(store, [unit(append(queue)), removal], respond)
    assert outcomes[0].error is disk_full
    assert outcomes[1].results == (Removed(queue.queue_id, 1),)
    # The removal was planned again on its own, with privilege; the full disk
    # gave up the ballast and the same plan was applied in its space.
    assert plans[-1] is plans[-2]
    assert plans[-1].privileged
    assert list(plans[-1].units) == [removal]
    assert not ballast.exists()
    assert not ballast_in_place(store)
    assert lookups(store, queue) == [2]
    assert store.restore_ballast()
    assert ballast_in_place(store)
    assert ballast.stat().st_blocks * 512 >= 64 * KIB


def test_disk_full_on_a_removal_without_ballast_fails_the_batch(store: Store) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 2)
    disk_full = StoreFull("commit: no space left on device")
    with pytest.raises(StoreFull) as caught:
        drive(store, [unit(append(queue)), unit(remove(queue, 1))], lambda plan: disk_full)
    assert caught.value is disk_full
    assert lookups(store, queue) == [1, 2]
    assert counters(store, "q") == (3, 2, 200)


def test_disk_full_on_appends_only_refuses_them(store: Store) -> None:
    queue = create_queue(store, "q")
    disk_full = StoreFull("commit: no space left on device")
    outcomes = drive(store, [unit(append(queue)), unit(append(queue))], lambda plan: disk_full)
    assert [outcome.error for outcome in outcomes] == [disk_full, disk_full]
    assert lookups(store, queue) == []


def test_at_the_limit_a_journaled_removal_is_refused_and_spoils_no_plain_one(
    limited: Store,
) -> None:
    """A removal that copies its message to a journal needs as much room as it
    frees: it is refused like an append, and the plain removals in its batch
    go on (they alone may use the headroom)."""
    queue = create_queue(limited, "q", journal=True)
    big = b"j" * (RESERVE * 2)  # its journal copy would not fit in the headroom
    [big_id] = fill(limited, queue, 1, big)
    fill_until_full(limited, queue)
    plain_id = lookups(limited, queue)[1]
    outcomes = limited.commit(
        [unit(remove(queue, plain_id)), unit(remove(queue, big_id, journal=True))], now=1.0
    )
    assert outcomes[0].results == (Removed(queue.queue_id, plain_id),)
    assert isinstance(outcomes[1].error, StoreFull)
    assert big_id in lookups(limited, queue)  # untouched, still there to receive


def test_new_store_directory_and_files_are_private(store: Store) -> None:
    assert stat.S_IMODE(store.path.stat().st_mode) & 0o077 == 0
    for name in ("data.mdb", "store.lock"):
        assert stat.S_IMODE((store.path / name).stat().st_mode) & 0o077 == 0, name


def test_a_file_that_is_not_lmdb_is_corrupt(open_store: StoreOpener, store_dir: Path) -> None:
    store_dir.mkdir()
    (store_dir / "data.mdb").write_bytes(b"this is not an LMDB file" * 1000)
    with pytest.raises(StoreCorrupt):
        open_store()
    # The failed open released the directory lock.
    with pytest.raises(StoreCorrupt):
        open_store()


def test_second_open_of_one_directory_is_refused_until_closed(
    store: Store, open_store: StoreOpener
) -> None:
    with pytest.raises(StoreLocked):
        open_store()
    store.close()
    open_store().close()


def test_dropping_an_unclosed_store_releases_the_directory(
    store_dir: Path, open_store: StoreOpener
) -> None:
    dropped = Store(store_dir, durable=False)
    create_queue(dropped, "q")
    del dropped
    gc.collect()
    assert open_store().get_queue("q") is not None


def test_durable_store_commits_survive_reopen(open_store: StoreOpener, reopen: Reopener) -> None:
    store = open_store(durable=True)
    queue = create_queue(store, "q")
    fill(store, queue, 2)
    assert lookups(reopen(store, durable=True), queue) == [1, 2]


@pytest.mark.parametrize(
    "options",
    [
        {"initial_map_size": 0},
        {"initial_map_size": 1 << 20, "max_map_size": 1 << 10},
        {"reserve_size": -1},
    ],
)
def test_bad_sizes_are_value_errors(store_dir: Path, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Store(store_dir, **options)
    assert not store_dir.exists()


# --------------------------------------------------------------------------- opening


def test_a_truncated_data_file_is_refused_not_mapped(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Store(path, initial_map_size=1 * MIB, durable=False) as store:
        fill(store, create_queue(store, "q"), 50, b"x" * 4096)
    data = path / "data.mdb"
    whole = data.stat().st_size
    (path / "lock.mdb").unlink()
    with data.open("r+b") as handle:
        handle.truncate(whole // 2)
    # LMDB would map the missing pages and die of SIGBUS: open it in a process
    # of its own, so that a regression fails this test and not the whole run.
    opener = (
        "import sys, storage\n"
        "try:\n"
        f"    store = storage.Store({str(path)!r}, initial_map_size=1 << 20)\n"
        "    queue = store.get_queue('q')\n"
        "    for lookup_id in range(1, 51):\n"
        "        store.read_message(queue.queue_id, lookup_id)\n"
        "except storage.StoreCorrupt as exc:\n"
        "    print(exc)\n"
        "    sys.exit(3)\n"
    )
    opened = subprocess.run(
        [sys.executable, "-c", opener], capture_output=True, text=True, timeout=60, check=False
    )
    assert opened.returncode == 3, opened
    assert f"data.mdb is {whole // 2} bytes" in opened.stdout
    assert "the file is truncated" in opened.stdout


def test_an_empty_data_file_is_refused_not_taken_for_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Store(path, initial_map_size=1 * MIB, durable=False) as store:
        create_queue(store, "q")
    data = path / "data.mdb"
    data.write_bytes(b"")  # `cp` onto a full disk: the file made, nothing in it
    with pytest.raises(StoreCorrupt) as refused:
        Store(path, initial_map_size=1 * MIB, durable=False)
    assert str(refused.value) == (
        f"store {path}: {data} is empty (0 bytes), as a copy or restore cut short leaves "
        "it; it is not taken for a new store: restore a whole copy again (mdb_copy makes "
        f"one of a running store), or remove {data} to start a new, empty queue manager "
        "(a new GUID, no queues, no messages)"
    )
    assert data.stat().st_size == 0  # nothing written in its place
    # Removed, as the message says: a new store.
    data.unlink()
    with Store(path, initial_map_size=1 * MIB, durable=False) as store:
        assert store.get_queue("q") is None


def test_no_room_for_a_new_lock_file_is_a_full_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_room(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_room)
    with pytest.raises(StoreFull):
        Store(tmp_path / "store", initial_map_size=1 * MIB, durable=False)
    assert not (tmp_path / "store" / "lock.mdb").exists()


# --------------------------------------------------------------------------- readers


def test_the_reader_slot_of_a_dead_hot_copy_is_freed(store: Store) -> None:
    # A process reading the store as ``mdb_copy -c`` does, killed mid-copy.
    reader = (
        "import lmdb, os, signal, sys\n"
        "env = lmdb.open(sys.argv[1], readonly=True, lock=True, max_dbs=64)\n"
        "txn = env.begin()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", reader, str(store.path)], check=False)
    assert done.returncode == -9
    assert store.clear_stale_readers() == 1
    assert store.clear_stale_readers() == 0
