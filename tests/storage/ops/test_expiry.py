"""The expiry index (``storage.ops.expiry``): the ``expiry`` database kept
exactly in step with the stored messages, due reads, and stale entries forgotten."""

from __future__ import annotations

from pathlib import Path

from store_kit import (
    BODY,
    NOW,
    Reopener,
    T,
    commit_ok,
    create_queue,
    due,
    erase_all,
    payloads,
    raw_lmdb,
    remove,
    timed,
    unit,
)

from storage import (
    AppendOutgoing,
    DeleteQueue,
    DueMessage,
    ForgetExpiry,
    ForgetOutgoing,
    PurgeQueue,
    RemoveMessage,
    Store,
    message_arrived_time,
    message_deadline,
    message_note,
    message_payload,
)
from storage.keys import DB_EXPIRY
from storage.ops.prepared import PrepareTransaction, ResolvePrepared


def index_size(path: Path) -> int:
    with raw_lmdb(path) as env:
        db = env.open_db(DB_EXPIRY, create=False)
        with env.begin() as txn:
            return int(txn.stat(db)["entries"])


# --------------------------------------------------------------------------- the index


def test_appends_with_deadlines_are_indexed_in_deadline_order(store: Store) -> None:
    q = create_queue(store, "q")
    commit_ok(store, unit(timed(q, T + 30), timed(q, None), timed(q, T + 10), timed(q, T + 20)))
    assert due(store) == [(T + 10, q.queue_id, 3), (T + 20, q.queue_id, 4), (T + 30, q.queue_id, 1)]
    assert due(store, before=T + 20) == [(T + 10, q.queue_id, 3), (T + 20, q.queue_id, 4)]
    assert due(store, before=T + 9.999) == []
    assert due(store, limit=1) == [(T + 10, q.queue_id, 3)]
    first = store.due_messages(before=T + 100, limit=1)[0]
    assert [tuple(e) for e in store.due_messages(before=T + 100, limit=5, after=first)] == [
        (T + 20, q.queue_id, 4),
        (T + 30, q.queue_id, 1),
    ]
    record = store.read_message(q.queue_id, 1)
    assert record is not None
    assert message_deadline(record) == T + 30


def test_removing_a_message_drops_its_entry(store: Store) -> None:
    q = create_queue(store, "q", journal=True)
    commit_ok(store, unit(timed(q, T + 1), timed(q, T + 2), timed(q, T + 3)))
    commit_ok(store, unit(remove(q, 1), RemoveMessage(q.queue_id, 2, True)))
    assert due(store) == [(T + 3, q.queue_id, 3)]
    # The journal copy keeps the message and its arrival time, not its deadline.
    assert q.journal_id is not None
    [(_, copy)] = store.read_range(q.journal_id)
    assert message_deadline(copy) is None
    assert message_arrived_time(copy) == NOW
    assert bytes(message_payload(copy)) == BODY


def test_purged_and_deleted_messages_leave_the_index_when_erased(
    store: Store, reopen: Reopener
) -> None:
    q = create_queue(store, "q")
    r = create_queue(store, "r")
    commit_ok(
        store,
        unit(*(timed(q, T + i) for i in range(1, 6)), *(timed(r, T + i) for i in range(1, 4))),
    )
    commit_ok(store, unit(PurgeQueue(q.queue_id)), unit(DeleteQueue(r.queue_id)))
    # Until erased, the entries point at invisible messages: the reader skips them.
    assert len(due(store)) == 8
    erase_all(store, q, 2)
    erase_all(store, r, 2)
    assert due(store) == []
    store.close()
    assert index_size(store.path) == 0


def test_stale_entries_can_be_forgotten(store: Store) -> None:
    q = create_queue(store, "q")
    commit_ok(store, unit(timed(q, T + 1), timed(q, T + 2)))
    entries = store.due_messages(before=T + 5, limit=10)
    commit_ok(store, unit(ForgetExpiry(tuple(entries[:1]))))
    assert due(store) == [(T + 2, q.queue_id, 2)]
    # The message is still there; removing it later discards nothing twice.
    commit_ok(store, unit(remove(q, 1)), unit(ForgetExpiry((DueMessage(T + 9, 9, 9),))))
    assert due(store) == [(T + 2, q.queue_id, 2)]


def test_outgoing_entries_with_deadlines_are_indexed_and_forgotten(store: Store) -> None:
    [outcome] = commit_ok(
        store,
        unit(
            AppendOutgoing("outgoing$;x", "x", b"a", 1, deadline=T + 7),
            AppendOutgoing("outgoing$;x", "x", b"b", 1),
        ),
    )
    queue_id = outcome.results[0].queue_id  # type: ignore[attr-defined]
    assert due(store) == [(T + 7, queue_id, 1)]
    commit_ok(store, unit(ForgetOutgoing(queue_id, (1, 2))))
    assert due(store) == []


def test_prepared_sends_keep_deadline_and_note_until_committed(
    store: Store, reopen: Reopener
) -> None:
    q = create_queue(store, "q")
    sends = (
        timed(q, T + 50, note=b"seq"),
        AppendOutgoing("outgoing$;y", "y", b"o", 1, deadline=T + 60),
        timed(q, None),
    )
    commit_ok(store, unit(PrepareTransaction("x", sends, (), created_at=NOW)))
    assert due(store) == []
    store = reopen(store)
    commit_ok(store, unit(ResolvePrepared("x", commit=True, resolved_at=NOW)))
    entries = due(store)
    assert [entry[0] for entry in entries] == [T + 50, T + 60]
    record = store.read_message(q.queue_id, 1)
    assert record is not None
    assert (message_deadline(record), message_note(record)) == (T + 50, b"seq")
    assert payloads(store, q) == [BODY, BODY]


def test_the_index_survives_reopening(store: Store, reopen: Reopener) -> None:
    q = create_queue(store, "q")
    commit_ok(store, unit(timed(q, T + 1, note=b"n")))
    store = reopen(store)
    assert due(store) == [(T + 1, q.queue_id, 1)]
