"""Removing an empty outgoing queue (``storage.ops.retired``): refused while it
holds entries, is paused, awaits confirmations or changed in the batch; the sequence it leaves is
taken over by the next outgoing queue of its name."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_kit import (
    ORDERS,
    STAMP,
    Reopener,
    appended_to,
    commit,
    commit_ok,
    erase_all,
    fill_outgoing,
    forget,
    lookups,
    put_raw,
    raw_items,
    raw_outgoing_keys,
    send_outgoing,
    stored_keys,
    unit,
)

from storage import (
    AddConfirmation,
    Confirmation,
    CreateQueue,
    InvalidOperation,
    OutgoingState,
    PurgeQueue,
    QueueDeleted,
    QueueMissing,
    RemoveEmptyOutgoing,
    SetOutgoingPaused,
    SettleConfirmation,
    Store,
    StoreCorrupt,
)
from storage.keys import DB_RETIRED, MAX_U32, queue_id_key


def retired_sequences(path: Path) -> dict[bytes, bytes]:
    """``retired_sequences`` of a closed store's file."""
    return dict(raw_items(path, DB_RETIRED))


def test_an_empty_outgoing_queue_is_removed_and_its_successor_takes_over_its_sequence(
    store: Store, reopen: Reopener
) -> None:
    queue_id = fill_outgoing(store, 2)
    keep = fill_outgoing(store, 1, "outgoing$;keep")
    forget(store, queue_id, 1, 2)  # emptied: rolled to ordinal 2
    [outcome] = commit_ok(store, unit(RemoveEmptyOutgoing(queue_id)))
    assert outcome.results == (QueueDeleted((queue_id,), 0),)
    assert store.get_queue(ORDERS) is None
    assert list(store.outgoing_states()) == [keep]
    # Nothing is left to erase; the sequence is kept under the queue's name.
    assert store.queues_to_erase() == []
    store.close()
    assert raw_outgoing_keys(store.path) == [queue_id_key(keep)]
    assert stored_keys(store.path, queue_id) == ([], [])
    assert retired_sequences(store.path) == {
        ORDERS.encode(): b"\x01" + STAMP.to_bytes(4, "big") + (2).to_bytes(4, "big")
    }
    store = reopen(store)
    assert [q.queue_id for q in store.list_queues()] == [keep]
    # The next message creates it again: a new id, the same timestamp, the next
    # ordinal (the receiver's same stream); the kept sequence is taken.
    [again] = commit_ok(store, unit(send_outgoing()))
    assert appended_to(again) == [(3, 1)]
    assert store.outgoing_state(3) == OutgoingState(3, STAMP, 3, 0, paused=False)
    # Another name takes a new timestamp, as ever.
    other = fill_outgoing(store, 1, "outgoing$;other")
    assert store.outgoing_state(other) == OutgoingState(other, STAMP + 2, 1, 0, paused=False)
    store.close()
    assert retired_sequences(store.path) == {}


def test_a_paused_outgoing_queue_is_not_removed_even_paused_in_the_same_batch(
    store: Store,
) -> None:
    queue_id = fill_outgoing(store, 1)
    forget(store, queue_id, 1)
    paused, refused = commit(
        store, unit(SetOutgoingPaused(queue_id, True)), unit(RemoveEmptyOutgoing(queue_id))
    )
    assert paused.error is None
    assert isinstance(refused.error, InvalidOperation)
    assert "is paused" in str(refused.error)
    state = store.outgoing_state(queue_id)
    assert state is not None
    assert state.paused


def test_an_outgoing_queue_whose_copies_await_confirmation_is_not_removed(store: Store) -> None:
    queue_id = fill_outgoing(store, 1)
    forget(store, queue_id, 1)
    kept = Confirmation(
        ordinal=9,
        index=0,
        delivered=True,
        last_class=0,
        deadline=1_800_000_000.0,
        destination=ORDERS,
        payload=b"message",
    )
    commit_ok(store, unit(AddConfirmation(kept)))
    [outcome] = commit(store, unit(RemoveEmptyOutgoing(queue_id)))
    assert isinstance(outcome.error, InvalidOperation)
    assert "await confirmation" in str(outcome.error)
    assert store.get_queue(ORDERS) is not None
    # Settled in the same batch, before the removal: it goes.
    [_, removed] = commit_ok(
        store, unit(SettleConfirmation(9, 0)), unit(RemoveEmptyOutgoing(queue_id))
    )
    assert isinstance(removed.results[0], QueueDeleted)
    assert store.get_queue(ORDERS) is None


def test_an_outgoing_queue_with_entries_is_not_removed(store: Store) -> None:
    queue_id = fill_outgoing(store, 1)
    before = store.outgoing_state(queue_id)
    [outcome] = commit(store, unit(RemoveEmptyOutgoing(queue_id)))
    assert isinstance(outcome.error, InvalidOperation)
    assert "is not empty" in str(outcome.error)
    assert lookups(store, queue_id) == [1]
    assert store.outgoing_state(queue_id) == before
    # Purged entries not yet erased still count.
    commit_ok(store, unit(PurgeQueue(queue_id)))
    [outcome] = commit(store, unit(RemoveEmptyOutgoing(queue_id)))
    assert isinstance(outcome.error, InvalidOperation)
    erase_all(store, queue_id, 10)
    commit_ok(store, unit(RemoveEmptyOutgoing(queue_id)))
    assert store.outgoing_states() == {}


def test_an_append_before_the_removal_in_its_batch_keeps_the_queue_one_after_makes_a_new_one(
    store: Store,
) -> None:
    queue_id = fill_outgoing(store, 1)
    forget(store, queue_id, 1)
    sent, kept = commit(store, unit(send_outgoing()), unit(RemoveEmptyOutgoing(queue_id)))
    assert appended_to(sent) == [(queue_id, 2)]
    assert isinstance(kept.error, InvalidOperation)
    forget(store, queue_id, 2)
    removed, sent = commit(store, unit(RemoveEmptyOutgoing(queue_id)), unit(send_outgoing()))
    assert removed.results == (QueueDeleted((queue_id,), 0),)
    [(new_id, lookup_id)] = appended_to(sent)
    assert (lookup_id, new_id != queue_id) == (1, True)
    assert list(store.outgoing_states()) == [new_id]
    # Created after the removal in one batch: it takes over the sequence (rolled
    # to ordinal 3 by the two forgets that emptied the queue) at the next ordinal.
    assert store.outgoing_state(new_id) == OutgoingState(new_id, STAMP, 4, 0, paused=False)


def test_only_outgoing_queues_are_removed_this_way(store: Store) -> None:
    commit_ok(store, unit(CreateQueue("orders", "Orders", transactional=True)))
    [outcome] = commit(store, unit(RemoveEmptyOutgoing(1)))
    assert isinstance(outcome.error, InvalidOperation)
    assert store.get_queue("orders") is not None
    [outcome] = commit(store, unit(RemoveEmptyOutgoing(99)))
    assert isinstance(outcome.error, QueueMissing)


def _retire(store: Store, name: str = ORDERS) -> int:
    """An outgoing queue ``name`` with one entry, acknowledged and removed; its id."""
    queue_id = fill_outgoing(store, 1, name)
    forget(store, queue_id, 1)
    commit_ok(store, unit(RemoveEmptyOutgoing(queue_id)))
    return queue_id


def test_a_sequence_at_the_last_ordinal_is_not_taken_over(store: Store, reopen: Reopener) -> None:
    _retire(store)
    store.close()
    put_raw(
        store.path,
        DB_RETIRED,
        ORDERS.encode(),
        b"\x01" + STAMP.to_bytes(4, "big") + MAX_U32.to_bytes(4, "big"),
    )
    store = reopen(store)
    [again] = commit_ok(store, unit(send_outgoing()))
    [(new_id, _)] = appended_to(again)
    # No ordinal is left under the old timestamp: the new queue takes a new one,
    # and the record is gone all the same.
    state = store.outgoing_state(new_id)
    assert state is not None
    assert (state.sequence_ordinal, state.sequence_timestamp != STAMP) == (1, True)
    store.close()
    assert retired_sequences(store.path) == {}


@pytest.mark.parametrize(
    "record",
    [b"\x02" + bytes(8), b"\x01" + bytes(7), b""],
    ids=["unknown-version", "short", "empty"],
)
def test_a_corrupt_retired_sequence_fails_the_batch_and_changes_nothing(
    store: Store, reopen: Reopener, record: bytes
) -> None:
    _retire(store)
    store.close()
    put_raw(store.path, DB_RETIRED, ORDERS.encode(), record)
    store = reopen(store)
    with pytest.raises(
        StoreCorrupt, match=rf"retired sequence of .* is corrupt \({len(record)} bytes\)"
    ):
        commit(store, unit(send_outgoing()))
    # The batch is not written: no queue, and the record stays for an operator to see.
    assert store.outgoing_states() == {}
    assert store.get_queue(ORDERS) is None
    store.close()
    assert retired_sequences(store.path) == {ORDERS.encode(): record}
