"""Poison handling (``storage.ops.poison``): message counters (aborts, moves),
moves between a queue and its subqueues, poison settings, and the retry index."""

from __future__ import annotations

import pytest
from store_kit import (
    BODY,
    NOW,
    SETTINGS,
    Reopener,
    abort,
    commit,
    commit_ok,
    counters_of,
    create_queue,
    erase_all,
    family,
    fill,
    lookups,
    move,
    payloads,
    raw_keys,
    remove,
    unit,
)

from storage import (
    NO_COUNTERS,
    DropRetryEntry,
    InvalidOperation,
    InvalidRecord,
    MessageCounters,
    MessageMissing,
    Moved,
    MoveMessage,
    MoveReason,
    PoisonSet,
    PurgeQueue,
    QueueKind,
    QueueRecord,
    QuotaExceeded,
    RecordAbort,
    SetPoisonSettings,
    Store,
    StoreCorrupt,
    message_arrived_time,
    message_deadline,
    message_header,
    message_payload,
)
from storage.keys import DB_MESSAGE_COUNTERS, DB_RETRY_DUE
from storage.ops.poison import (
    decode_message_counters,
    due_milliseconds,
    encode_message_counters,
    split_retry_key,
)


def test_counters_records_round_trip_and_garbage_is_corrupt() -> None:
    counters = MessageCounters(3, 4, 1, 12.5, 99)
    data = encode_message_counters(counters)
    assert len(data) == 30
    assert decode_message_counters(data) == counters
    for bad in (data[:-1], b"\x02" + data[1:], data[:1] + b"\x01" + data[2:]):
        with pytest.raises(StoreCorrupt):
            decode_message_counters(bad)
    with pytest.raises(InvalidRecord):
        encode_message_counters(MessageCounters(abort_count=1 << 32))


def test_poison_settings_are_set_cleared_and_kept(store: Store, reopen: Reopener) -> None:
    queue, _, _ = family(store, "q", transactional=True)
    fill(store, queue, 2)
    [outcome] = commit_ok(store, unit(SetPoisonSettings("q", SETTINGS)))
    [result] = outcome.results
    assert isinstance(result, PoisonSet)
    assert result.record.poison == SETTINGS
    assert result.record.depth == 2
    store = reopen(store)
    record = store.get_queue("q")
    assert record is not None
    assert (record.poison, record.depth, record.next_lookup_id) == (SETTINGS, 2, 3)
    commit_ok(store, unit(SetPoisonSettings("q", None)))
    store = reopen(store)
    assert store.get_queue("q").poison is None  # type: ignore[union-attr]
    [outcome] = commit(store, unit(SetPoisonSettings("q;poison", SETTINGS)))
    assert isinstance(outcome.error, InvalidOperation)


# --------------------------------------------------------------------------- counters


def test_aborts_count_and_two_in_one_batch_both_count(store: Store, reopen: Reopener) -> None:
    queue = create_queue(store, "q", transactional=True)
    fill(store, queue, 2)
    assert counters_of(store, queue, 1) == NO_COUNTERS
    assert abort(store, queue, 1) == 1
    outcomes = commit_ok(
        store, unit(RecordAbort(queue.queue_id, 1)), unit(RecordAbort(queue.queue_id, 1))
    )
    assert [o.results[0].abort_count for o in outcomes] == [2, 3]  # type: ignore[attr-defined]
    store = reopen(store)
    assert counters_of(store, queue, 1) == MessageCounters(abort_count=3)
    assert store.message_counters(queue.queue_id, [1, 2, 3]) == {1: MessageCounters(3)}
    # The message itself was never rewritten.
    assert payloads(store, queue) == [BODY, BODY]


def test_an_abort_of_a_message_that_is_gone_is_passed_over(store: Store) -> None:
    queue = create_queue(store, "q", transactional=True)
    fill(store, queue, 3)
    commit_ok(store, unit(remove(queue, 1)))
    assert abort(store, queue, 1) is None
    # Removed in the same batch, before or after: nothing of it stays.
    outcomes = commit_ok(
        store,
        unit(RecordAbort(queue.queue_id, 2)),
        unit(remove(queue, 2)),
        unit(RecordAbort(queue.queue_id, 2)),
    )
    assert outcomes[0].results[0].abort_count == 1  # type: ignore[attr-defined]
    assert outcomes[2].results[0].abort_count is None  # type: ignore[attr-defined]
    commit_ok(store, unit(PurgeQueue(queue.queue_id)))
    assert abort(store, queue, 3) is None
    assert raw_keys(store, DB_MESSAGE_COUNTERS) == []


def test_counters_are_erased_with_their_messages(store: Store) -> None:
    queue = create_queue(store, "q", transactional=True)
    fill(store, queue, 4)
    for lookup_id in (1, 2, 3, 4):
        abort(store, queue, lookup_id)
    assert len(raw_keys(store, DB_MESSAGE_COUNTERS)) == 4
    commit_ok(store, unit(remove(queue, 1)))
    assert len(raw_keys(store, DB_MESSAGE_COUNTERS)) == 3
    commit_ok(store, unit(PurgeQueue(queue.queue_id)))
    erase_all(store, queue, 2)
    assert raw_keys(store, DB_MESSAGE_COUNTERS) == []


# --------------------------------------------------------------------------- moves


def test_a_move_keeps_the_message_and_counts_it(store: Store) -> None:
    queue, retry, _ = family(store, "q", transactional=True)
    fill(store, queue, 2)
    abort(store, queue, 2)
    before = store.read_message(queue.queue_id, 2)
    assert before is not None
    result = move(store, queue, 2, retry)
    assert result.target_lookup_id == 1
    assert result.counters == MessageCounters(0, 1, 0, NOW, 0)  # no poison handling: no due time
    after = store.read_message(retry.queue_id, 1)
    assert after is not None
    assert after == before  # payload, priority, size and arrival time as they were
    assert store.read_message(queue.queue_id, 2) is None
    assert counters_of(store, queue, 2) == NO_COUNTERS
    assert counters_of(store, retry, 1) == MessageCounters(0, 1, 0, NOW, 0)
    assert store.get_queue("q").depth == 1  # type: ignore[union-attr]
    assert store.get_queue("q;retry").depth == 1  # type: ignore[union-attr]
    # Back again: a new lookup id there, the move count goes on.
    back = move(store, retry, 1, queue)
    assert back.target_lookup_id == 3
    assert back.counters.move_count == 2
    assert lookups(store, queue) == [1, 3]


def test_a_move_between_non_transactional_queues_keeps_the_priority_order(store: Store) -> None:
    queue, _, poison = family(store, "q")
    fill(store, queue, 1, priority=1)
    fill(store, queue, 1, priority=6)
    fill(store, queue, 1, priority=3)
    for lookup_id in (1, 2, 3):
        move(store, queue, lookup_id, poison)
    found = store.first_by_priority(poison.queue_id, start=(0, 0), skip=())
    assert found is not None
    assert found[1] == 2  # priority 6 first
    record = store.read_message(poison.queue_id, 1)
    assert record is not None
    assert message_header(record)[0] == 1
    assert message_arrived_time(record) == NOW


def test_moves_go_only_within_one_family(store: Store) -> None:
    a, a_retry, a_poison = family(store, "a", transactional=True)
    b, b_retry, _ = family(store, "b", transactional=True)
    fill(store, a, 1)
    fill(store, a_retry, 0)
    for source, target in ((a, b), (a, b_retry), (a, a), (a, store.get_queue("a;journal"))):
        assert target is not None
        [outcome] = commit(store, unit(MoveMessage(source.queue_id, 1, target.queue_id)))
        assert isinstance(outcome.error, InvalidOperation), (source.name, target.name)
    moved = move(store, a, 1, a_retry)
    # Between two subqueues of one queue.
    move(store, a_retry, moved.target_lookup_id, a_poison)
    [outcome] = commit(store, unit(MoveMessage(a_retry.queue_id, 1, a.queue_id)))
    assert isinstance(outcome.error, MessageMissing)


def dead_letter_queues(store: Store) -> tuple[QueueRecord, QueueRecord]:
    """``system$;deadletter`` and ``system$;deadxact``, as the layer above makes them."""
    dead = create_queue(store, "system$;deadletter", kind=QueueKind.DEADLETTER)
    deadxact = create_queue(store, "system$;deadxact", kind=QueueKind.DEADXACT, transactional=True)
    return dead, deadxact


def test_a_dead_letter_moves_into_a_queue_of_its_kind_with_its_patch(
    store: Store, reopen: Reopener
) -> None:
    _, deadxact = dead_letter_queues(store)
    queue, _, _ = family(store, "q", transactional=True)
    fill(store, queue, 1)  # the target's own message comes first
    fill(store, deadxact, 2, priority=0)
    abort(store, deadxact, 2)  # a transaction received it there and aborted
    before = store.read_message(deadxact.queue_id, 2)
    assert before is not None
    [outcome] = commit_ok(
        store, unit(MoveMessage(deadxact.queue_id, 2, queue.queue_id, patch=(4, b"AB")))
    )
    [moved] = outcome.results
    assert isinstance(moved, Moved)
    assert moved.target_lookup_id == 2
    # Counted as any move: aborts start again, one move, no retry cycle.
    assert moved.counters == MessageCounters(0, 1, 0, NOW, 0)
    store = reopen(store)
    after = store.read_message(queue.queue_id, 2)
    assert after is not None
    assert bytes(message_payload(after)) == BODY[:4] + b"AB" + BODY[6:]
    assert message_header(after) == message_header(before)
    assert message_arrived_time(after) == message_arrived_time(before)
    assert message_deadline(after) is None
    assert lookups(store, deadxact) == [1]
    assert counters_of(store, deadxact, 2) == NO_COUNTERS
    assert counters_of(store, queue, 2) == MessageCounters(0, 1, 0, NOW, 0)
    depths = [store.get_queue(name).depth for name in ("q", "system$;deadxact")]  # type: ignore[union-attr]
    assert depths == [2, 1]
    # Without a patch the payload goes as it is.
    again = move(store, deadxact, 1, queue)
    assert payloads(store, queue)[2] == BODY
    assert again.target_lookup_id == 3


def test_a_dead_letter_moves_only_into_an_application_queue_of_its_kind(store: Store) -> None:
    dead, deadxact = dead_letter_queues(store)
    plain, plain_retry, _ = family(store, "plain")
    tx, _, _ = family(store, "tx", transactional=True)
    fill(store, dead, 1)
    fill(store, deadxact, 1)
    fill(store, plain, 1)
    journal = store.get_queue("plain;journal")
    assert journal is not None
    refused = [
        (deadxact, plain),  # a transactional message into a non-transactional queue
        (dead, tx),  # and the other way round
        (dead, plain_retry),  # a subqueue takes moves from its family only
        (dead, journal),
        (dead, deadxact),
        (plain, dead),  # nothing moves into a dead-letter queue
    ]
    for source, target in refused:
        [outcome] = commit(store, unit(MoveMessage(source.queue_id, 1, target.queue_id)))
        assert isinstance(outcome.error, InvalidOperation), (source.name, target.name)
    # A patch must lie within the payload; nothing is changed when it does not.
    for patch in ((-1, b"x"), (len(BODY) - 1, b"xy")):
        [outcome] = commit(store, unit(MoveMessage(dead.queue_id, 1, plain.queue_id, patch=patch)))
        assert isinstance(outcome.error, InvalidOperation), patch
    assert lookups(store, dead) == [1]
    assert lookups(store, plain) == [1]
    move(store, dead, 1, plain)
    move(store, deadxact, 1, tx)


def test_a_dead_letter_needs_room_in_its_targets_quota(store: Store) -> None:
    dead, _ = dead_letter_queues(store)
    queue, retry, _ = family(store, "q", quota=250)
    fill(store, queue, 2)  # 200 bytes of 250
    fill(store, dead, 1)
    [outcome] = commit(store, unit(MoveMessage(dead.queue_id, 1, queue.queue_id)))
    assert isinstance(outcome.error, QuotaExceeded)
    assert lookups(store, dead) == [1]
    # Within the family nothing new is counted: a move to ;retry and back is never refused.
    move(store, queue, 1, retry)
    move(store, retry, 1, queue)
    commit_ok(store, unit(remove(queue, 2)))
    move(store, dead, 1, queue)
    assert lookups(store, dead) == []


def test_a_purged_message_does_not_move(store: Store) -> None:
    queue, retry, _ = family(store, "q", transactional=True)
    fill(store, queue, 1)
    commit_ok(store, unit(PurgeQueue(queue.queue_id)))
    [outcome] = commit(store, unit(MoveMessage(queue.queue_id, 1, retry.queue_id)))
    assert isinstance(outcome.error, MessageMissing)


# --------------------------------------------------------------------------- the retry index


def test_a_move_to_retry_of_a_queue_with_poison_handling_is_indexed(
    store: Store, reopen: Reopener
) -> None:
    queue, retry, poison = family(store, "q", transactional=True)
    commit_ok(store, unit(SetPoisonSettings("q", SETTINGS)))
    fill(store, queue, 3)
    abort(store, queue, 1)
    first = move(store, queue, 1, retry, reason=MoveReason.RETRY)
    due = due_milliseconds(NOW + 30.0)
    assert first.counters == MessageCounters(0, 1, 1, NOW, due)
    [outcome] = commit_ok(
        store, unit(MoveMessage(queue.queue_id, 2, retry.queue_id, MoveReason.RETRY)), now=NOW + 5
    )
    assert store.retries_due(None, 10) == [
        (due, retry.queue_id, 1),
        (due_milliseconds(NOW + 35.0), retry.queue_id, 2),
    ]
    assert store.retries_due(NOW + 30.0, 10) == [(due, retry.queue_id, 1)]
    assert store.retries_due(NOW + 29.999, 10) == []
    assert store.retries_due(None, 1) == [(due, retry.queue_id, 1)]
    store = reopen(store)
    assert len(store.retries_due(None, 10)) == 2
    # Back to the queue: the entry goes, the cycle stays counted, aborts start at 0.
    [outcome] = commit_ok(
        store,
        unit(MoveMessage(retry.queue_id, 1, queue.queue_id, MoveReason.RETURN)),
        now=NOW + 31,
    )
    back = outcome.results[0]
    assert isinstance(back, Moved)
    assert back.counters == MessageCounters(0, 2, 1, NOW + 31, 0)
    assert [entry[2] for entry in store.retries_due(None, 10)] == [2]
    # To ;poison and by request: no due time; into the queue by request, cycles start afresh.
    to_poison = move(store, retry, 2, poison, reason=MoveReason.POISON)
    assert to_poison.counters.retry_due == 0
    assert to_poison.counters.retry_cycles == 1
    assert store.retries_due(None, 10) == []
    again = move(store, poison, to_poison.target_lookup_id, queue)
    assert again.counters == MessageCounters(0, 3, 0, NOW, 0)
    for key in raw_keys(store, DB_RETRY_DUE):
        split_retry_key(key)


def test_a_dangling_retry_entry_is_dropped(store: Store) -> None:
    queue, retry, _ = family(store, "q", transactional=True)
    commit_ok(store, unit(SetPoisonSettings("q", SETTINGS)))
    fill(store, queue, 1)
    moved = move(store, queue, 1, retry, reason=MoveReason.RETRY)
    commit_ok(store, unit(remove(retry, moved.target_lookup_id)))
    [(due, queue_id, lookup_id)] = store.retries_due(None, 10)
    assert counters_of(store, retry, lookup_id) == NO_COUNTERS
    commit_ok(store, unit(DropRetryEntry(due, queue_id, lookup_id)))
    assert store.retries_due(None, 10) == []
