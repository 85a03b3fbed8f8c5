"""Outgoing queues (``storage.ops.peering``): created by their first
``AppendOutgoing`` with a sequence state; ``ForgetOutgoing`` removes entries and
rolls the sequence when the queue is left empty; pausing; deleting and purging;
removing an empty one."""

from __future__ import annotations

import pytest
from store_kit import (
    BODY,
    NOW,
    ORDERS,
    STAMP,
    Reopener,
    append,
    appended_to,
    commit,
    commit_ok,
    create_queue,
    erase_all,
    fill_outgoing,
    forget,
    lookups,
    payloads,
    raw_lmdb,
    raw_outgoing_keys,
    send_outgoing,
    stored_keys,
    unit,
)

from storage import (
    Appended,
    AppendOutgoing,
    CreateQueue,
    DeleteQueue,
    Done,
    ForgetOutgoing,
    Forgotten,
    InvalidOperation,
    InvalidRecord,
    OutgoingState,
    PurgeQueue,
    QueueDeleted,
    QueueKind,
    QueueMissing,
    QueuePurged,
    SetOutgoingPaused,
    Skipped,
    Store,
    message_header,
)
from storage.keys import DB_OUTGOING, queue_id_key
from storage.peering_state import encode_outgoing

# --------------------------------------------------------------------------- creation


def test_first_append_creates_the_outgoing_queue_and_its_state(store: Store) -> None:
    [outcome] = commit_ok(store, unit(send_outgoing(body=b"abc")), now=NOW + 0.75)
    assert outcome.results == (Appended(1, 1),)
    queue = store.get_queue(ORDERS)
    assert queue is not None
    assert (queue.queue_id, queue.name, queue.display_name) == (1, ORDERS, ORDERS.upper())
    assert (queue.kind, queue.transactional, queue.journal, queue.quota) == (
        QueueKind.OUTGOING,
        True,
        False,
        None,
    )
    assert (queue.parent_id, queue.journal_id, queue.created_at) == (None, None, NOW + 0.75)
    assert (queue.next_lookup_id, queue.depth, queue.bytes) == (2, 1, 3)
    state = OutgoingState(1, STAMP, 1, 0, paused=False)
    assert store.outgoing_state(1) == state
    assert store.outgoing_states() == {1: state}
    assert payloads(store, 1) == [b"abc"]
    record = store.read_message(1, 1)
    assert record is not None
    assert message_header(record) == (0, 3)
    # FIFO by lookup id: no priority index entries.
    store.close()
    assert stored_keys(store.path, 1) == ([1], [])


def test_later_appends_go_to_the_same_queue_and_keep_its_state(store: Store) -> None:
    commit_ok(store, unit(send_outgoing(body=b"one")))
    [outcome] = commit_ok(
        store, unit(AppendOutgoing(ORDERS, "Other", (b"t", b"w", b"o"), 3)), now=NOW + 50
    )
    assert outcome.results == (Appended(1, 2),)
    queue = store.get_queue(ORDERS)
    assert queue is not None
    assert (queue.display_name, queue.created_at, queue.depth, queue.bytes) == (
        ORDERS.upper(),
        NOW,
        2,
        6,
    )
    assert payloads(store, 1) == [b"one", b"two"]
    assert store.outgoing_states() == {1: OutgoingState(1, STAMP, 1, 0, paused=False)}
    assert [q.name for q in store.list_queues()] == [ORDERS]


@pytest.mark.parametrize("atomic", [True, False])
def test_two_units_of_one_batch_create_the_queue_once(store: Store, atomic: bool) -> None:
    first, second = commit_ok(
        store, unit(send_outgoing(), send_outgoing(), atomic=atomic), unit(send_outgoing())
    )
    assert appended_to(first) == [(1, 1), (1, 2)]
    assert appended_to(second) == [(1, 3)]
    assert store.outgoing_states() == {1: OutgoingState(1, STAMP, 1, 0, paused=False)}
    assert [(q.name, q.depth) for q in store.list_queues()] == [(ORDERS, 3)]
    # One creation took one stamp: the next queue gets the next one.
    fill_outgoing(store, 1, "outgoing$;b")
    b = store.get_queue("outgoing$;b")
    assert b is not None
    assert store.outgoing_state(b.queue_id) == OutgoingState(2, STAMP + 1, 1, 0, paused=False)


def test_outgoing_queues_are_listed_with_the_others_and_told_apart_by_kind(
    store: Store,
) -> None:
    create_queue(store, "orders")
    fill_outgoing(store, 2)
    listed = store.list_queues()
    assert [(q.name, q.kind) for q in listed] == [
        ("orders", QueueKind.NORMAL),
        ("orders;journal", QueueKind.JOURNAL),
        (ORDERS, QueueKind.OUTGOING),
    ]
    assert [q.name for q in listed if q.kind is not QueueKind.OUTGOING] == [
        "orders",
        "orders;journal",
    ]
    assert store.get_queue_by_id(3) == listed[2]


def test_name_of_another_kind_of_queue_is_invalid_operation(store: Store) -> None:
    create_queue(store, "orders")
    [outcome] = commit(store, unit(send_outgoing("outgoing$;ok"), send_outgoing("orders")))
    assert isinstance(outcome.error, InvalidOperation)
    assert outcome.results[0] == Skipped()
    assert [q.name for q in store.list_queues()] == ["orders", "orders;journal"]
    assert store.outgoing_states() == {}
    assert lookups(store, 1) == []


@pytest.mark.parametrize(
    "op",
    [
        AppendOutgoing("", "x", BODY, 100),
        AppendOutgoing("q" * 512, "x", BODY, 100),
        AppendOutgoing("é" * 256, "x", BODY, 100),
        AppendOutgoing("q", "d" * 0x10000, BODY, 100),
        AppendOutgoing("q", "q", BODY, -1),
        AppendOutgoing("q", "q", BODY, 1 << 32),
    ],
    ids=["empty", "too long", "utf8 too long", "display name", "negative size", "huge size"],
)
def test_bad_name_or_size_is_invalid_record(store: Store, op: AppendOutgoing) -> None:
    [outcome] = commit(store, unit(op))
    assert isinstance(outcome.error, InvalidRecord)
    assert store.list_queues() == []
    assert store.outgoing_states() == {}


def test_longest_name_is_accepted(store: Store) -> None:
    fill_outgoing(store, 1, "q" * 511)
    assert [len(q.name) for q in store.list_queues()] == [511]


def test_create_queue_refuses_the_outgoing_kind(store: Store) -> None:
    [outcome] = commit(store, unit(CreateQueue(ORDERS, ORDERS, kind=QueueKind.OUTGOING)))
    assert isinstance(outcome.error, InvalidOperation)
    assert store.list_queues() == []


# --------------------------------------------------------------------------- forgetting


def test_forget_removes_entries_and_rolls_when_the_queue_is_left_empty(store: Store) -> None:
    queue_id = fill_outgoing(store, 3)
    first = forget(store, queue_id, 1, 2)
    assert first == Forgotten(queue_id, 2, OutgoingState(queue_id, STAMP, 1, 0, paused=False))
    assert lookups(store, queue_id) == [3]
    assert store.outgoing_state(queue_id) == first.state

    last = forget(store, queue_id, 3)
    rolled = OutgoingState(queue_id, STAMP, 2, 3, paused=False)
    assert last == Forgotten(queue_id, 1, rolled)
    assert store.outgoing_state(queue_id) == rolled
    queue = store.get_queue(ORDERS)
    assert queue is not None
    assert (queue.next_lookup_id, queue.depth, queue.bytes) == (4, 0, 0)

    # The next entry is number 1 of the new sequence: lookup id 4 - base 3.
    [outcome] = commit_ok(store, unit(send_outgoing()))
    assert appended_to(outcome) == [(queue_id, 4)]
    again = forget(store, queue_id, 4)
    assert again == Forgotten(queue_id, 1, OutgoingState(queue_id, STAMP, 3, 4, paused=False))


def test_forgetting_again_removes_nothing(store: Store) -> None:
    queue_id = fill_outgoing(store, 3)
    first = forget(store, queue_id, 2, 2, 99, 0)
    assert first == Forgotten(queue_id, 1, OutgoingState(queue_id, STAMP, 1, 0, paused=False))
    second = forget(store, queue_id, 2)
    assert second == Forgotten(queue_id, 0, first.state)
    assert lookups(store, queue_id) == [1, 3]
    emptied = forget(store, queue_id, 1, 2, 3)
    assert emptied.removed == 2
    assert emptied.state == OutgoingState(queue_id, STAMP, 2, 3, paused=False)
    # A forget that finds the queue empty rolls it again; the base stays.
    repeated = forget(store, queue_id, 1, 2, 3)
    assert repeated == Forgotten(queue_id, 0, OutgoingState(queue_id, STAMP, 3, 3, paused=False))
    assert store.outgoing_state(queue_id) == repeated.state


def test_forget_then_append_in_one_batch_rolls_before_the_append(store: Store) -> None:
    queue_id = fill_outgoing(store, 2)
    forgot, sent = commit_ok(store, unit(ForgetOutgoing(queue_id, (1, 2))), unit(send_outgoing()))
    rolled = OutgoingState(queue_id, STAMP, 2, 2, paused=False)
    assert forgot.results == (Forgotten(queue_id, 2, rolled),)
    assert appended_to(sent) == [(queue_id, 3)]  # number 3 - 2 = 1 of the new sequence
    assert store.outgoing_state(queue_id) == rolled
    assert lookups(store, queue_id) == [3]


def test_append_then_forget_in_one_batch_does_not_roll(store: Store) -> None:
    queue_id = fill_outgoing(store, 2)
    sent, forgot = commit_ok(store, unit(send_outgoing()), unit(ForgetOutgoing(queue_id, (1, 2))))
    unrolled = OutgoingState(queue_id, STAMP, 1, 0, paused=False)
    assert appended_to(sent) == [(queue_id, 3)]
    assert forgot.results == (Forgotten(queue_id, 2, unrolled),)
    assert store.outgoing_state(queue_id) == unrolled
    assert lookups(store, queue_id) == [3]


def test_forget_in_the_batch_that_creates_the_queue_rolls_after_it(store: Store) -> None:
    # Nothing of the queue is committed yet: the forget sees it, with its entry.
    sent, forgot = commit_ok(store, unit(send_outgoing()), unit(ForgetOutgoing(1, (1,))))
    assert appended_to(sent) == [(1, 1)]
    assert forgot.results == (Forgotten(1, 0, OutgoingState(1, STAMP, 1, 0, paused=False)),)
    assert lookups(store, 1) == [1]


def test_two_forgets_in_one_batch_roll_once_the_queue_is_empty(store: Store) -> None:
    queue_id = fill_outgoing(store, 2)
    first, second = commit_ok(
        store,
        unit(ForgetOutgoing(queue_id, (1,)), atomic=False),
        unit(ForgetOutgoing(queue_id, (1, 2))),
    )
    assert first.results == (
        Forgotten(queue_id, 1, OutgoingState(queue_id, STAMP, 1, 0, paused=False)),
    )
    rolled = OutgoingState(queue_id, STAMP, 2, 2, paused=False)
    assert second.results == (Forgotten(queue_id, 1, rolled),)
    assert store.outgoing_state(queue_id) == rolled


def test_forget_in_a_failed_unit_changes_nothing(store: Store) -> None:
    queue_id = fill_outgoing(store, 2)
    [outcome] = commit(store, unit(ForgetOutgoing(queue_id, (1, 2)), append(99)))
    assert isinstance(outcome.error, QueueMissing)
    assert outcome.results[0] == Skipped()
    assert lookups(store, queue_id) == [1, 2]
    assert store.outgoing_state(queue_id) == OutgoingState(queue_id, STAMP, 1, 0, paused=False)


def test_forget_on_a_missing_or_other_queue_fails(store: Store) -> None:
    normal = create_queue(store, "orders")
    queue_id = fill_outgoing(store, 1)
    commit_ok(store, unit(DeleteQueue(queue_id)))
    missing, other, deleted = commit(
        store,
        unit(ForgetOutgoing(99, (1,))),
        unit(ForgetOutgoing(normal.queue_id, (1,))),
        unit(ForgetOutgoing(queue_id, (1,))),
    )
    assert isinstance(missing.error, QueueMissing)
    assert isinstance(other.error, InvalidOperation)
    assert isinstance(deleted.error, QueueMissing)


def test_forget_may_use_the_headroom_kept_for_removals() -> None:
    assert ForgetOutgoing(1, (1,)).frees_space
    assert not send_outgoing().frees_space
    assert not SetOutgoingPaused(1, True).frees_space


def test_sequence_ordinal_that_would_overflow_is_invalid_record(
    store: Store, reopen: Reopener
) -> None:
    queue_id = fill_outgoing(store, 1)
    store.close()
    with raw_lmdb(store.path) as env:
        db = env.open_db(DB_OUTGOING)
        top = OutgoingState(queue_id, STAMP, 0xFFFFFFFF, 0, paused=False)
        with env.begin(write=True) as txn:
            txn.put(queue_id_key(queue_id), encode_outgoing(top), db=db)
    store = reopen(store)
    assert store.outgoing_state(queue_id) == top
    [outcome] = commit(store, unit(ForgetOutgoing(queue_id, (1,))))
    assert isinstance(outcome.error, InvalidRecord)
    assert lookups(store, queue_id) == [1]
    assert store.outgoing_state(queue_id) == top


# --------------------------------------------------------------------------- pausing


def test_pausing_is_stored_and_kept_across_reopen(store: Store, reopen: Reopener) -> None:
    queue_id = fill_outgoing(store, 1)
    [outcome] = commit_ok(store, unit(SetOutgoingPaused(queue_id, True)))
    assert outcome.results == (Done(),)
    paused = OutgoingState(queue_id, STAMP, 1, 0, paused=True)
    assert store.outgoing_state(queue_id) == paused
    store = reopen(store)
    assert store.outgoing_states() == {queue_id: paused}
    commit_ok(store, unit(SetOutgoingPaused(queue_id, False)))
    assert store.outgoing_state(queue_id) == OutgoingState(queue_id, STAMP, 1, 0, paused=False)


def test_a_forget_keeps_the_pause_and_a_pause_keeps_the_roll(store: Store) -> None:
    queue_id = fill_outgoing(store, 1)
    commit_ok(store, unit(SetOutgoingPaused(queue_id, True), ForgetOutgoing(queue_id, (1,))))
    assert store.outgoing_state(queue_id) == OutgoingState(queue_id, STAMP, 2, 1, paused=True)
    commit_ok(store, unit(SetOutgoingPaused(queue_id, False)))
    assert store.outgoing_state(queue_id) == OutgoingState(queue_id, STAMP, 2, 1, paused=False)


def test_pausing_a_queue_created_in_the_same_batch(store: Store) -> None:
    commit_ok(store, unit(send_outgoing()), unit(SetOutgoingPaused(1, True)))
    assert store.outgoing_states() == {1: OutgoingState(1, STAMP, 1, 0, paused=True)}


def test_pausing_a_missing_or_other_queue_fails(store: Store) -> None:
    normal = create_queue(store, "orders")
    missing, other = commit(
        store,
        unit(SetOutgoingPaused(99, True)),
        unit(SetOutgoingPaused(normal.queue_id, True)),
    )
    assert isinstance(missing.error, QueueMissing)
    assert isinstance(other.error, InvalidOperation)
    assert store.outgoing_states() == {}


# --------------------------------------------------------------------------- reopen, delete, purge


def test_state_survives_reopen(store: Store, reopen: Reopener) -> None:
    a = fill_outgoing(store, 3, "outgoing$;a")
    b = fill_outgoing(store, 1, "outgoing$;b")
    forget(store, b, 1)
    before = store.outgoing_states()
    assert before == {
        a: OutgoingState(a, STAMP, 1, 0, paused=False),
        b: OutgoingState(b, STAMP + 1, 2, 1, paused=False),
    }
    queues = store.list_queues()
    store = reopen(store)
    assert store.outgoing_states() == before
    assert store.list_queues() == queues
    assert lookups(store, a) == [1, 2, 3]
    # The returned mapping is a copy.
    store.outgoing_states().clear()
    assert store.outgoing_state(a) == before[a]


def test_deleting_an_outgoing_queue_deletes_its_state(store: Store, reopen: Reopener) -> None:
    queue_id = fill_outgoing(store, 2)
    keep = fill_outgoing(store, 1, "outgoing$;keep")
    [outcome] = commit_ok(store, unit(DeleteQueue(queue_id)))
    assert outcome.results == (QueueDeleted((queue_id,), 2),)
    assert store.outgoing_state(queue_id) is None
    assert list(store.outgoing_states()) == [keep]
    assert [step.messages for step in erase_all(store, queue_id, 10)] == [2]
    store.close()
    assert raw_outgoing_keys(store.path) == [queue_id_key(keep)]
    assert stored_keys(store.path, queue_id) == ([], [])
    store = reopen(store)
    assert list(store.outgoing_states()) == [keep]
    # The name makes a new queue, with a new id and a new stamp.
    [again] = commit_ok(store, unit(send_outgoing()))
    assert appended_to(again) == [(3, 1)]
    assert store.outgoing_state(3) == OutgoingState(3, STAMP + 2, 1, 0, paused=False)


def test_queue_created_and_deleted_in_one_batch_leaves_no_state(
    store: Store, reopen: Reopener
) -> None:
    sent, deleted, paused = commit(
        store, unit(send_outgoing()), unit(DeleteQueue(1)), unit(SetOutgoingPaused(1, True))
    )
    assert appended_to(sent) == [(1, 1)]
    assert deleted.results == (QueueDeleted((1,), 1),)
    assert isinstance(paused.error, QueueMissing)
    assert store.outgoing_states() == {}
    assert store.queues_to_erase() == [1]
    store.close()
    assert raw_outgoing_keys(store.path) == []
    store = reopen(store)
    assert store.outgoing_states() == {}
    assert store.list_queues() == []


def test_purging_and_erasing_an_outgoing_queue(store: Store) -> None:
    queue_id = fill_outgoing(store, 3)
    [outcome] = commit_ok(store, unit(PurgeQueue(queue_id)))
    assert outcome.results == (QueuePurged(queue_id, 3),)
    assert lookups(store, queue_id) == []
    # A purged entry still in the file can be forgotten; the queue is empty: roll.
    result = forget(store, queue_id, 1)
    assert result == Forgotten(queue_id, 1, OutgoingState(queue_id, STAMP, 2, 3, paused=False))
    assert [step.messages for step in erase_all(store, queue_id, 10)] == [2]
    queue = store.get_queue(ORDERS)
    assert queue is not None
    assert (queue.next_lookup_id, queue.depth, queue.purged_below, queue.erasing) == (
        4,
        0,
        4,
        False,
    )
    store.close()
    assert stored_keys(store.path, queue_id) == ([], [])
