"""A store restored from a backup (``storage.ops.restore``): every outgoing queue
goes on as a new stream, kept sequences of removed queues are dropped, every
incoming stream is flagged for a resync, and message ids move half the
ordinal space on."""

from __future__ import annotations

import dataclasses
import shutil
import struct
from pathlib import Path

import pytest
from store_kit import (
    NOW,
    ORDERS,
    SOURCE_A,
    SOURCE_B,
    Reopener,
    StoreOpener,
    append,
    appended,
    commit,
    commit_ok,
    create_queue,
    fill_outgoing,
    forget,
    lookups,
    put_raw,
    raw_items,
    send_outgoing,
    unit,
)

from storage import (
    LOOKUP_JUMP,
    ORDINAL_JUMP,
    RENEWED,
    ClearSetting,
    IncomingState,
    RecordIncoming,
    RemoveEmptyOutgoing,
    RenewAfterRestore,
    Renewed,
    ReserveOrdinals,
    SetOutgoingPaused,
    Store,
    StoreCorrupt,
)
from storage.keys import DB_INCOMING, incoming_key
from storage.ops.peering import INCOMING_FORMAT_VERSION, INCOMING_RESYNC_VERSION
from storage.ops.restore import STAMP_MARGIN, STAMP_SPREAD

LATER = NOW + 3600.0


def renew(store: Store, now: float = LATER) -> Renewed:
    [outcome] = commit_ok(store, unit(RenewAfterRestore(now)))
    [result] = outcome.results
    assert isinstance(result, Renewed)
    return result


def test_outgoing_queues_go_on_as_new_streams_with_what_they_hold(
    store: Store, reopen: Reopener
) -> None:
    orders = fill_outgoing(store, 3)
    other = fill_outgoing(store, 1, "outgoing$;other")
    forget(store, orders, 1)
    commit_ok(store, unit(SetOutgoingPaused(other, True)))
    before = store.outgoing_states()
    result = renew(store)
    assert (result.outgoing, result.retired, result.streams) == (2, 0, 0)
    after = store.outgoing_states()
    # A new timestamp each, past any given before and a day past the wall
    # clock (that stamp no queue takes); the ordinal, the numbering base and a
    # pause are kept.
    assert [after[q].sequence_timestamp for q in (orders, other)] == [
        int(LATER + STAMP_MARGIN) + 1,
        int(LATER + STAMP_MARGIN) + 2,
    ]
    for queue_id in (orders, other):
        assert dataclasses.replace(after[queue_id], sequence_timestamp=0) == dataclasses.replace(
            before[queue_id], sequence_timestamp=0
        )
    assert lookups(store, orders) == [2, 3]
    store = reopen(store)
    assert store.outgoing_states() == after
    # A queue created afterwards takes the next timestamp, as ever.
    new = fill_outgoing(store, 1, "outgoing$;new")
    stamp = store.outgoing_state(new).sequence_timestamp  # type: ignore[union-attr]
    assert stamp == int(LATER + STAMP_MARGIN) + 3


def test_a_queue_created_again_after_a_restore_does_not_take_its_old_sequence(
    store: Store,
) -> None:
    queue_id = fill_outgoing(store, 1)
    forget(store, queue_id, 1)
    commit_ok(store, unit(RemoveEmptyOutgoing(queue_id)))
    assert renew(store).retired == 1
    [again] = commit_ok(store, unit(send_outgoing()))
    [state] = store.outgoing_states().values()
    # Not STAMP, the removed queue's, nor one the original may have given since.
    assert state.sequence_timestamp == int(LATER + STAMP_MARGIN) + 1
    assert state.sequence_ordinal == 1
    assert again.error is None


def test_incoming_streams_are_flagged_for_a_resync_until_their_next_write(
    store: Store, reopen: Reopener
) -> None:
    commit_ok(
        store,
        unit(
            RecordIncoming(SOURCE_A, ORDERS, 7 << 32 | 1, 50, 2, 10.0),
            RecordIncoming(SOURCE_B, "q", 9 << 32 | 3, 4, 0, 11.0),
        ),
    )
    assert renew(store).streams == 2
    flagged = [
        IncomingState(SOURCE_A, ORDERS, 7 << 32 | 1, 50, 2, 10.0, resync=True),
        IncomingState(SOURCE_B, "q", 9 << 32 | 3, 4, 0, 11.0, resync=True),
    ]
    assert store.incoming_states() == flagged
    store = reopen(store)
    assert store.incoming_states() == flagged
    # The next message's write (a state without the flag) ends the resync.
    commit_ok(
        store,
        unit(
            RecordIncoming(SOURCE_A, ORDERS, 7 << 32 | 1, 101, 0, 12.0, follows=(7 << 32 | 1, 50))
        ),
    )
    assert store.incoming_states()[0] == IncomingState(SOURCE_A, ORDERS, 7 << 32 | 1, 101, 0, 12.0)
    store.close()
    values = dict(raw_items(store.path, DB_INCOMING))
    assert values[incoming_key(SOURCE_A, 7, ORDERS)][0] == INCOMING_FORMAT_VERSION
    assert values[incoming_key(SOURCE_B, 9, "q")] == struct.pack(
        ">BQIIdB", INCOMING_RESYNC_VERSION, 9 << 32 | 3, 4, 0, 11.0, 1
    )


def test_message_ids_move_half_the_ordinal_space_on_once(store: Store, reopen: Reopener) -> None:
    commit_ok(store, unit(ReserveOrdinals(5000)))
    result = renew(store)
    assert result.ordinal_limit == 5000 + ORDINAL_JUMP
    store = reopen(store)
    assert store.ordinal_limit == 5000 + ORDINAL_JUMP
    assert store.get_setting(RENEWED) == str(5000 + ORDINAL_JUMP)
    # Again before a start clears the setting: nothing changes.
    again = renew(store, LATER + 60)
    assert (again.already, again.ordinal_limit) == (True, 5000 + ORDINAL_JUMP)
    assert store.ordinal_limit == 5000 + ORDINAL_JUMP
    # Once cleared (a start), a renewal is a new one.
    commit_ok(store, unit(ClearSetting(RENEWED)))
    assert renew(store).ordinal_limit == 5000 + 2 * ORDINAL_JUMP


def test_two_restores_of_one_backup_take_stamps_and_ids_of_their_own(
    store: Store, open_store: StoreOpener, tmp_path: Path
) -> None:
    # A first restored run may have used the stamps and ids a second restore of
    # the same backup would start from: each renewal moves them on by its own
    # spread, so the second run's streams and ids are not the first's.
    fill_outgoing(store, 2)
    commit_ok(store, unit(ReserveOrdinals(5000)))
    store.close()
    shutil.copytree(store.path, tmp_path / "again")
    first, second = open_store(store.path), open_store(tmp_path / "again")
    results = []
    for copy, spread in ((first, 0), (second, 12_345 | (678 << 24))):
        [outcome] = commit_ok(copy, unit(RenewAfterRestore(LATER, spread)))
        [result] = outcome.results
        assert isinstance(result, Renewed)
        [state] = copy.outgoing_states().values()
        results.append((state.sequence_timestamp, result.ordinal_limit))
    (stamp1, limit1), (stamp2, limit2) = results
    assert stamp2 - stamp1 == 12_345
    assert limit2 - limit1 == 678
    assert stamp1 >= LATER + STAMP_MARGIN
    assert stamp2 < LATER + STAMP_MARGIN + STAMP_SPREAD < 2**32
    assert limit1 == 5000 + ORDINAL_JUMP


def test_a_corrupt_incoming_state_fails_it_and_changes_nothing(
    store: Store, reopen: Reopener
) -> None:
    fill_outgoing(store, 1)
    commit_ok(store, unit(RecordIncoming(SOURCE_A, "q", 7 << 32 | 1, 1, 0, 1.0)))
    before = (store.outgoing_states(), store.ordinal_limit)
    store.close()
    put_raw(store.path, DB_INCOMING, incoming_key(SOURCE_B, 9, "q"), b"\x03garbage")
    store = reopen(store)
    with pytest.raises(StoreCorrupt):
        commit(store, unit(RenewAfterRestore(LATER)))
    assert (store.outgoing_states(), store.ordinal_limit) == before


@pytest.mark.parametrize("value", [b"", struct.pack(">BQIId", 2, 1, 1, 0, 1.0)])
def test_an_incoming_state_of_neither_format_is_corrupt(
    store: Store, reopen: Reopener, value: bytes
) -> None:
    store.close()
    put_raw(store.path, DB_INCOMING, incoming_key(SOURCE_A, 0, "q"), value)
    with pytest.raises(StoreCorrupt):
        reopen(store).incoming_states()


def test_a_resync_keeps_the_router_a_stream_came_through(store: Store) -> None:
    router = bytes(range(16))
    commit_ok(store, unit(RecordIncoming(SOURCE_A, ORDERS, 7 << 32 | 1, 50, 2, 10.0, via=router)))
    assert renew(store).streams == 1
    assert store.incoming_states() == [
        IncomingState(SOURCE_A, ORDERS, 7 << 32 | 1, 50, 2, 10.0, resync=True, via=router)
    ]


def test_every_queue_numbers_its_next_messages_past_what_the_original_gave(
    store: Store, reopen: Reopener
) -> None:
    """A reader that remembers the last lookup id it read (a Spark query's
    checkpoint) reads only above it: after a restore, new messages must not take
    the numbers the original gave since the backup. An outgoing queue's entries
    are numbered from its sequence's base (and go on as a new stream): left as is."""
    orders = create_queue(store, "orders", transactional=True)
    [first] = appended(commit_ok(store, unit(append(orders, b"before")))[0])
    outgoing = fill_outgoing(store, 2)
    before = store.get_queue_by_id(outgoing)
    assert before is not None
    others = [q for q in store.list_queues() if q.queue_id != outgoing]
    result = renew(store)
    assert result.queues == len(others) >= 1
    store = reopen(store)
    [after] = appended(commit_ok(store, unit(append(orders, b"after")))[0])
    assert after == first + 1 + LOOKUP_JUMP
    assert lookups(store, orders) == [first, after]  # what it held stays where it was
    unchanged = store.get_queue_by_id(outgoing)
    assert unchanged is not None
    assert unchanged.next_lookup_id == before.next_lookup_id
