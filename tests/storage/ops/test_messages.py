"""Appending and removing messages (``storage.ops.messages``): the stored
record, quotas, journal copies, and priorities out of range."""

from __future__ import annotations

import pytest
from store_kit import (
    BODY,
    NOW,
    append,
    appended,
    commit,
    commit_ok,
    counters,
    create_queue,
    fill,
    lookups,
    payloads,
    remove,
    unit,
)

from storage import (
    Appended,
    AppendMessage,
    Handed,
    HandedMessage,
    InvalidRecord,
    Operation,
    QueueRecord,
    QuotaExceeded,
    Removed,
    Store,
    message_arrived_time,
    message_deadline,
    message_header,
    message_payload,
)


def test_stored_record_is_the_store_header_and_the_payload(store: Store) -> None:
    queue = create_queue(store, "q")
    parts: list[bytes | bytearray | memoryview] = [
        b"head-",
        memoryview(b"middle-"),
        bytearray(b"tail"),
    ]
    in_parts = AppendMessage(queue.queue_id, parts, 3, 4)
    [outcome] = commit_ok(
        store, unit(append(queue, b"body", priority=6, size=1000), in_parts), now=123.5
    )
    first, second = appended(outcome)
    record = store.read_message(queue.queue_id, first)
    assert record is not None
    assert message_header(record) == (6, 1000)
    assert message_arrived_time(record) == 123.5
    assert bytes(message_payload(record)) == b"body"
    joined = store.read_message(queue.queue_id, second)
    assert joined is not None
    assert bytes(message_payload(joined)) == b"head-middle-tail"
    # The quota counts the given size, not the payload's length.
    assert counters(store, "q") == (3, 2, 1004)
    assert store.read_message(queue.queue_id, 99) is None
    assert store.read_message(999, 1) is None


def test_quota_failure_fails_only_its_unit(store: Store) -> None:
    limited = create_queue(store, "limited", quota=250)
    free = create_queue(store, "free")
    outcomes = commit(
        store,
        unit(append(limited), append(free)),
        unit(append(free), append(limited), append(limited)),  # 300 > 250
        unit(append(limited)),
    )
    assert outcomes[0].error is None
    error = outcomes[1].error
    assert isinstance(error, QuotaExceeded)
    assert (error.queue_name, error.quota, error.would_be) == ("limited", 250, 300)
    assert outcomes[2].results == (Appended(limited.queue_id, 2),)
    assert counters(store, "free") == (2, 1, 100)
    assert counters(store, "limited") == (3, 2, 200)


def test_removal_before_an_append_frees_quota_for_it(store: Store) -> None:
    queue = create_queue(store, "q", quota=200)
    fill(store, queue, 2)
    [refused] = commit(store, unit(append(queue)))
    assert isinstance(refused.error, QuotaExceeded)
    [refused_again] = commit(store, unit(append(queue), remove(queue, 1)))
    assert isinstance(refused_again.error, QuotaExceeded)
    [swapped] = commit_ok(store, unit(remove(queue, 1), append(queue)))
    assert swapped.results == (Removed(queue.queue_id, 1), Appended(queue.queue_id, 3))
    assert counters(store, "q") == (4, 2, 200)


def test_removal_with_journal_copies_the_record_to_the_journal_queue(store: Store) -> None:
    queue = create_queue(store, "q", journal=True, quota=100)
    journal_id = queue.journal_id
    assert journal_id is not None
    bodies = [b"a" * 100, b"b" * 100, b"c" * 100]
    for body in bodies[:2]:
        [lookup_id] = fill(store, queue, 1, body)
        commit_ok(store, unit(remove(queue, lookup_id, journal=True)))
    fill(store, queue, 1, bodies[2])
    assert store.read_message(queue.queue_id, 2) is None  # moved to the journal
    assert payloads(store, queue) == [bodies[2]]
    journaled = store.read_range(journal_id)
    assert [lookup for lookup, _ in journaled] == [1, 2]
    assert [bytes(message_payload(record)) for _, record in journaled] == bodies[:2]
    # The copy is the record unchanged (arrival time included), under a new lookup id.
    assert message_header(journaled[0][1]) == (3, 100)
    assert message_arrived_time(journaled[0][1]) == NOW
    # Journal copies do not count against the parent's quota.
    assert counters(store, "q") == (4, 1, 100)
    assert counters(store, "q;journal") == (3, 2, 200)
    # Removing from the journal queue itself (it has none) is a plain removal.
    commit_ok(store, unit(remove(journal_id, 1, journal=True)))
    assert counters(store, "q;journal") == (3, 1, 100)


def test_removal_without_journal_copies_nothing(store: Store) -> None:
    queue = create_queue(store, "q", journal=True)
    fill(store, queue, 2)
    commit_ok(store, unit(remove(queue, 1), remove(queue, 2, journal=False)))
    assert queue.journal_id is not None
    assert lookups(store, queue.journal_id) == []
    assert counters(store, "q") == (3, 0, 0)


@pytest.mark.parametrize("priority", [-1, 8])
def test_invalid_priority_fails_only_its_unit(store: Store, priority: int) -> None:
    queue = create_queue(store, "q")
    bad, good = commit(
        store, unit(append(queue), append(queue, priority=priority)), unit(append(queue))
    )
    assert isinstance(bad.error, InvalidRecord)
    assert good.results == (Appended(queue.queue_id, 1),)


class _Receive:
    """A :class:`storage.Taker` that found its queue empty with ``found`` as
    the next lookup id (None: any), and notes what it was asked."""

    def __init__(self, takes: bool = True, found: int | None = None) -> None:
        self.answer = takes
        self.found = found
        self.asked: list[int] = []

    def takes(self, next_lookup_id: int) -> bool:
        self.asked.append(next_lookup_id)
        return self.answer and self.found in (None, next_lookup_id)


def handed(
    queue: QueueRecord,
    taker: _Receive,
    body: bytes = BODY,
    *,
    journal: bool = False,
    reports: tuple[Operation, ...] = (),
) -> HandedMessage:
    return HandedMessage(
        queue.queue_id, body, 3, len(body), journal=journal, reports=reports, taker=taker
    )


def test_a_handed_message_takes_a_lookup_id_and_is_never_stored(store: Store) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 2)
    commit_ok(store, unit(remove(queue, 1), remove(queue, 2)))
    receive = _Receive()
    [outcome] = commit_ok(store, unit(handed(queue, receive, b"straight")), now=123.5)
    [result] = outcome.results
    assert isinstance(result, Handed)
    assert (result.queue_id, result.lookup_id) == (queue.queue_id, 3)
    assert bytes(message_payload(result.record)) == b"straight"
    assert message_arrived_time(result.record) == 123.5
    assert receive.asked == [3]
    assert payloads(store, queue) == []
    # The lookup id is used up; depth and bytes never saw the message.
    assert counters(store, "q") == (4, 0, 0)
    [after] = commit_ok(store, unit(append(queue)))
    assert after.results == (Appended(queue.queue_id, 4),)


def test_a_handed_message_is_journaled_with_its_receipt_reports(store: Store) -> None:
    queue = create_queue(store, "q", journal=True)
    admin = create_queue(store, "admin")
    report = append(admin, b"report")
    [outcome] = commit_ok(
        store, unit(handed(queue, _Receive(), b"kept", journal=True, reports=(report,)))
    )
    assert isinstance(outcome.results[0], Handed)
    assert payloads(store, queue) == []
    assert queue.journal_id is not None
    [(_, copy)] = store.read_range(queue.journal_id)
    assert bytes(message_payload(copy)) == b"kept"
    assert payloads(store, admin) == [b"report"]


def test_a_handed_message_with_a_deadline_is_journaled_without_it(store: Store) -> None:
    # As a removal's journal copy: the message, not its deadline or note.
    queue = create_queue(store, "q", journal=True)
    timed = HandedMessage(
        queue.queue_id, b"timed", 3, 5, deadline=NOW + 60, note=b"n", journal=True, taker=_Receive()
    )
    [outcome] = commit_ok(store, unit(timed))
    result = outcome.results[0]
    assert isinstance(result, Handed)
    assert message_deadline(result.record) == NOW + 60
    assert queue.journal_id is not None
    [(_, copy)] = store.read_range(queue.journal_id)
    assert bytes(message_payload(copy)) == b"timed"
    assert message_deadline(copy) is None
    assert message_arrived_time(copy) == message_arrived_time(result.record)


def test_a_message_the_receive_no_longer_takes_is_appended(store: Store) -> None:
    queue = create_queue(store, "q", journal=True)
    admin = create_queue(store, "admin")
    report = append(admin, b"report")
    not_taken = handed(queue, _Receive(takes=False), b"stays", journal=True, reports=(report,))
    [outcome] = commit_ok(store, unit(not_taken))
    assert outcome.results == (Appended(queue.queue_id, 1),)
    assert not isinstance(outcome.results[0], Handed)
    assert payloads(store, queue) == [b"stays"]
    assert payloads(store, admin) == []
    assert queue.journal_id is not None
    assert store.read_range(queue.journal_id) == []


def test_the_receive_is_told_where_the_batch_has_taken_the_lookup_ids(store: Store) -> None:
    # It found the queue empty at lookup id 1; "a" is appended first in the
    # batch, and it would have found that one first.
    queue = create_queue(store, "q")
    receive = _Receive(found=1)
    first, second = commit_ok(store, unit(append(queue, b"a")), unit(handed(queue, receive, b"b")))
    assert first.results == (Appended(queue.queue_id, 1),)
    assert second.results == (Appended(queue.queue_id, 2),)
    assert receive.asked == [2]
    assert payloads(store, queue) == [b"a", b"b"]


def test_a_handed_message_whose_reports_fail_is_appended(store: Store) -> None:
    queue = create_queue(store, "q")
    report = append(999, b"report")  # no such queue
    [outcome] = commit_ok(store, unit(handed(queue, _Receive(), b"stays", reports=(report,))))
    assert outcome.results == (Appended(queue.queue_id, 1),)
    assert payloads(store, queue) == [b"stays"]


def test_a_handed_message_still_meets_the_quota(store: Store) -> None:
    queue = create_queue(store, "q", quota=50)
    receive = _Receive()
    [outcome] = commit(store, unit(handed(queue, receive, b"x" * 100)))
    assert isinstance(outcome.error, QuotaExceeded)
    assert receive.asked == []
    assert counters(store, "q") == (1, 0, 0)
