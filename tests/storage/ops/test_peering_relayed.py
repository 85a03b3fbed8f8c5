"""The index of relayed outgoing entries (``relayed``): an entry appended with a
relay id is found by it (``Store.relayed_entry``) for exactly as long as the
entry is there, however it goes: forgotten, purged and erased, its queue
deleted; across a reopen; never for a failed unit; never prepared."""

from __future__ import annotations

import pytest
from store_kit import (
    BODY,
    ORDERS,
    Reopener,
    commit,
    commit_ok,
    erase_all,
    error,
    lookups,
    prepare,
    raw_items,
    run,
    send_outgoing,
    unit,
)

from storage import (
    AppendOutgoing,
    DeleteQueue,
    ForgetOutgoing,
    InvalidOperation,
    InvalidRecord,
    PurgeQueue,
    QueueMissing,
    Store,
    message_note,
)
from storage.keys import DB_RELAYED, relayed_key, u32, u64
from storage.records import message_relay_id

FIRST = bytes(range(33))
SECOND = bytes(range(1, 34))
OTHER_QUEUE = "outgoing$;tcp:127.0.0.1:1903\\orders"


def relayed(relay: bytes, name: str = ORDERS, body: bytes = BODY) -> AppendOutgoing:
    """Append ``body`` to ``name`` as a relayed entry named ``relay``."""
    return AppendOutgoing(name, name.upper(), body, len(body), relay=relay)


def queue_of(store: Store, name: str = ORDERS) -> int:
    record = store.get_queue(name)
    assert record is not None
    return record.queue_id


def test_an_entry_is_found_by_its_relay_id_until_it_is_forgotten(store: Store) -> None:
    run(store, relayed(FIRST), send_outgoing(), relayed(SECOND), relayed(FIRST, OTHER_QUEUE))
    queue_id, other = queue_of(store), queue_of(store, OTHER_QUEUE)
    assert store.relayed_entry(queue_id, FIRST) == 1
    assert store.relayed_entry(queue_id, SECOND) == 3
    assert store.relayed_entry(other, FIRST) == 1  # its own queue, its own lookup id
    assert store.relayed_entry(other, SECOND) is None
    assert store.relayed_entry(queue_id, bytes(33)) is None
    # The id is the record's note, flagged; a plain entry has neither.
    first = store.read_message(queue_id, 1)
    plain = store.read_message(queue_id, 2)
    assert first is not None
    assert plain is not None
    assert (message_relay_id(first), message_note(first)) == (FIRST, b"")  # not a note
    assert (message_relay_id(plain), message_note(plain)) == (b"", b"")

    run(store, ForgetOutgoing(queue_id, (1, 2)))
    assert store.relayed_entry(queue_id, FIRST) is None
    assert store.relayed_entry(queue_id, SECOND) == 3
    assert store.relayed_entry(other, FIRST) == 1
    store.close()
    assert [key for key, _ in raw_items(store.path, DB_RELAYED)] == [
        relayed_key(queue_id, SECOND, 3),
        relayed_key(other, FIRST, 1),
    ]
    assert relayed_key(queue_id, SECOND, 3) == u32(queue_id) + SECOND + u64(3)


def test_two_copies_are_indexed_each_and_the_first_still_there_is_found(store: Store) -> None:
    run(store, relayed(FIRST), relayed(FIRST))
    queue_id = queue_of(store)
    assert store.relayed_entry(queue_id, FIRST) == 1
    run(store, ForgetOutgoing(queue_id, (1,)))
    assert store.relayed_entry(queue_id, FIRST) == 2
    run(store, ForgetOutgoing(queue_id, (2,)))
    assert store.relayed_entry(queue_id, FIRST) is None


def test_the_index_is_read_back_after_a_reopen(store: Store, reopen: Reopener) -> None:
    run(store, relayed(FIRST), relayed(SECOND))
    queue_id = queue_of(store)
    store = reopen(store)
    assert (store.relayed_entry(queue_id, FIRST), store.relayed_entry(queue_id, SECOND)) == (1, 2)


def test_purged_entries_are_not_found_and_their_erasure_deletes_their_keys(store: Store) -> None:
    run(store, relayed(FIRST), relayed(SECOND))
    queue_id = queue_of(store)
    run(store, PurgeQueue(queue_id))
    assert store.relayed_entry(queue_id, FIRST) is None
    run(store, relayed(FIRST))  # relayed again after the purge: found again
    assert store.relayed_entry(queue_id, FIRST) == 3
    assert [step.messages for step in erase_all(store, queue_id, 10)] == [2]
    assert lookups(store, queue_id) == [3]
    store.close()
    assert [key for key, _ in raw_items(store.path, DB_RELAYED)] == [
        relayed_key(queue_id, FIRST, 3)
    ]


def test_a_deleted_queue_finds_nothing_and_its_erasure_deletes_its_keys(store: Store) -> None:
    run(store, relayed(FIRST), relayed(SECOND))
    queue_id = queue_of(store)
    run(store, DeleteQueue(queue_id))
    assert store.relayed_entry(queue_id, FIRST) is None
    erase_all(store, queue_id, 1)
    store.close()
    assert raw_items(store.path, DB_RELAYED) == []


def test_a_failed_unit_indexes_nothing(store: Store) -> None:
    [outcome] = commit(store, unit(relayed(FIRST), ForgetOutgoing(999, (1,))))
    assert isinstance(outcome.error, QueueMissing)
    assert store.get_queue(ORDERS) is None
    # Undone within a batch too: the key of the failed unit's entry is not written.
    commit_ok(store, unit(relayed(SECOND)))
    queue_id = queue_of(store)
    [failed, ok] = commit(
        store, unit(relayed(FIRST), ForgetOutgoing(999, (1,))), unit(relayed(FIRST))
    )
    assert failed.error is not None
    assert ok.error is None
    assert store.relayed_entry(queue_id, FIRST) == 2
    store.close()
    assert len(raw_items(store.path, DB_RELAYED)) == 2


@pytest.mark.parametrize("size", [1, 32, 34])
def test_a_relay_id_is_33_bytes(store: Store, size: int) -> None:
    assert isinstance(error(store, relayed(bytes(size))), InvalidRecord)
    with pytest.raises(InvalidRecord):
        store.relayed_entry(1, bytes(size))


def test_a_relayed_entry_is_not_a_send_of_a_prepared_transaction(store: Store) -> None:
    # A prepared send's record keeps no relay id: it would go unindexed.
    assert isinstance(error(store, prepare("x", (relayed(FIRST),))), InvalidOperation)
    assert store.prepared_transactions() == []
