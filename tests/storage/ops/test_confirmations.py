"""Copies awaiting confirmation and FinalAcks (``storage.ops.confirmations``):
records read back as written, deadlines in the expiry index, settling exactly
once, delivered marks, the count of copies by destination, FinalAcks in key
order, and corrupt records."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from store_kit import (
    BODY,
    Reopener,
    T,
    append,
    commit,
    commit_ok,
    create_queue,
    due,
    payloads,
    put_raw,
    raw_items,
    unit,
)

from storage import (
    CONFIRMATION_QUEUE_ID,
    SKIPPED,
    AddConfirmation,
    Appended,
    Confirmation,
    ConfirmationMissing,
    Done,
    Failed,
    ForgetFinalAcks,
    ForgetOutgoing,
    InvalidRecord,
    MarkDelivered,
    PendingFinalAck,
    QuotaExceeded,
    RecordFinalAck,
    SettleConfirmation,
    Store,
    StoreCorrupt,
    UnitOutcome,
    confirmation_of_lookup,
)
from storage.keys import DB_AWAITED, DB_CONFIRMATIONS, DB_EXPIRY, DB_FINAL_ACKS
from storage.ops.confirmations import (
    confirmation_key,
    decode_kept,
    encode_kept,
    final_ack_key,
    final_ack_sender,
)

DEST_A = "outgoing$;tcp:10.9.9.9:1801\\orders"


DEST_B = "outgoing$;tcp:10.9.9.8:1801\\orders"


QM_A = bytes(range(16))


QM_B = bytes(range(16, 32))


def copy(
    ordinal: int,
    index: int = 0,
    *,
    deadline: float | None = None,
    destination: str = DEST_A,
    payload: bytes = b"message bytes",
) -> Confirmation:
    return Confirmation(
        ordinal=ordinal,
        index=index,
        delivered=False,
        last_class=0,
        deadline=deadline,
        destination=destination,
        payload=payload,
    )


def add(confirmation: Confirmation) -> AddConfirmation:
    return AddConfirmation(confirmation)


def lookup_of(ordinal: int, index: int) -> int:
    """The expiry lookup id of a copy: its 5-byte key read as a big-endian number."""
    return ordinal * 256 + index


def errors(outcomes: list[UnitOutcome]) -> list[type[Exception] | None]:
    return [None if outcome.error is None else type(outcome.error) for outcome in outcomes]


def pending(source: bytes, ordinal: int, value: bytes) -> PendingFinalAck:
    return PendingFinalAck(source + ordinal.to_bytes(4, "big"), value)


# --------------------------------------------------------------------------- copies


def test_a_copy_without_deadline_reads_back_as_written(store: Store) -> None:
    written = copy(7, payload=b"\x00payload\xff")
    commit_ok(store, unit(add(written)))
    assert store.confirmation(7, 0) == written
    assert store.confirmations(7) == [written]
    assert store.confirmation(7, 1) is None
    assert store.confirmations(8) == []
    # No deadline, no key in the expiry index.
    assert due(store) == []


def test_a_copy_with_deadline_is_indexed_under_queue_id_zero(store: Store) -> None:
    commit_ok(
        store,
        unit(
            add(copy(7, 0, deadline=T + 60.5, destination=DEST_A)),
            add(copy(7, 1, deadline=T + 60.5, destination=DEST_B, payload=b"second")),
        ),
    )
    [first, second] = store.confirmations(7)
    assert (first.index, first.deadline, first.destination, first.delivered) == (
        0,
        T + 60.5,
        DEST_A,
        False,
    )
    assert (second.index, second.deadline, second.destination, second.payload) == (
        1,
        T + 60.5,
        DEST_B,
        b"second",
    )
    assert store.confirmation(7, 1) == second
    entries = due(store)
    assert entries == [
        (T + 60.5, CONFIRMATION_QUEUE_ID, lookup_of(7, 0)),
        (T + 60.5, CONFIRMATION_QUEUE_ID, lookup_of(7, 1)),
    ]
    assert CONFIRMATION_QUEUE_ID == 0
    assert [confirmation_of_lookup(lookup) for _, _, lookup in entries] == [(7, 0), (7, 1)]
    # Not due before its deadline.
    assert store.due_messages(before=T + 60.499, limit=10) == []


def test_copies_of_other_messages_are_apart(store: Store) -> None:
    commit_ok(
        store,
        unit(
            add(copy(0x0100, 0)),
            add(copy(0x01, 3)),
            add(copy(0x01, 0)),
            add(copy(0x02, 0)),
            add(copy(0xFFFFFFFF, 255, deadline=T + 1)),
        ),
    )
    assert [(c.ordinal, c.index) for c in store.confirmations(1)] == [(1, 0), (1, 3)]
    assert [(c.ordinal, c.index) for c in store.confirmations(0x0100)] == [(0x0100, 0)]
    assert store.confirmation(0xFFFFFFFF, 255) == copy(0xFFFFFFFF, 255, deadline=T + 1)
    [(_, queue_id, lookup)] = due(store)
    assert (queue_id, lookup) == (0, 0xFFFFFFFFFF)
    assert confirmation_of_lookup(lookup) == (0xFFFFFFFF, 255)


def test_confirmation_of_lookup_reads_ordinal_then_index() -> None:
    assert confirmation_of_lookup(0x0000000701) == (7, 1)
    assert confirmation_of_lookup(0x12345678AB) == (0x12345678, 0xAB)
    assert confirmation_of_lookup(int.from_bytes(confirmation_key(9, 4), "big")) == (9, 4)


@pytest.mark.parametrize("deadline", [0.0, -1.0, float("inf"), float("nan")])
def test_a_bad_deadline_is_refused_and_nothing_is_written(store: Store, deadline: float) -> None:
    q = create_queue(store, "q")
    [outcome] = commit(store, unit(append(q), add(copy(7, deadline=deadline))))
    assert isinstance(outcome.error, InvalidRecord)
    assert outcome.results[0] is SKIPPED
    assert store.confirmations(7) == []
    assert due(store) == []
    assert payloads(store, q) == []


def test_a_destination_too_long_for_its_length_field_is_refused(store: Store) -> None:
    [outcome] = commit(store, unit(add(copy(7, destination="d" * 0x10000))))
    assert isinstance(outcome.error, InvalidRecord)
    assert store.confirmations(7) == []


def test_a_copy_index_past_a_byte_fails_only_its_own_unit(store: Store) -> None:
    q = create_queue(store, "q")
    outcomes = commit(store, unit(add(copy(7, 256))), unit(append(q)))
    assert errors(outcomes) == [InvalidRecord, None]
    assert payloads(store, q) == [BODY]


# --------------------------------------------------------------------------- settling


def test_settling_deletes_the_copy_and_its_deadline(store: Store) -> None:
    commit_ok(store, unit(add(copy(7, 0, deadline=T + 30)), add(copy(7, 1, deadline=T + 30))))
    [outcome] = commit_ok(store, unit(SettleConfirmation(7, 0)))
    assert outcome.results == (Done(),)
    assert [c.index for c in store.confirmations(7)] == [1]
    assert store.confirmation(7, 0) is None
    assert due(store) == [(T + 30, 0, lookup_of(7, 1))]
    store.close()
    assert [key for key, _ in raw_items(store.path, DB_CONFIRMATIONS)] == [confirmation_key(7, 1)]
    assert len(raw_items(store.path, DB_EXPIRY)) == 1


def test_settling_a_copy_without_deadline(store: Store) -> None:
    commit_ok(store, unit(add(copy(7))))
    commit_ok(store, unit(SettleConfirmation(7, 0)))
    assert store.confirmations(7) == []
    assert due(store) == []


def test_a_second_settlement_fails_and_its_unit_writes_nothing(store: Store) -> None:
    q = create_queue(store, "q")
    commit_ok(store, unit(add(copy(7, deadline=T + 30))))
    commit_ok(store, unit(SettleConfirmation(7, 0), append(q, b"first")))
    assert payloads(store, q) == [b"first"]
    [outcome] = commit(store, unit(SettleConfirmation(7, 0), append(q, b"second")))
    assert isinstance(outcome.error, ConfirmationMissing)
    assert outcome.results[1] is SKIPPED
    assert payloads(store, q) == [b"first"]
    # A copy that never was fails the same way.
    [outcome] = commit(store, unit(SettleConfirmation(8, 0)))
    assert isinstance(outcome.error, ConfirmationMissing)


def test_two_settlements_in_one_batch_apply_once(store: Store) -> None:
    q = create_queue(store, "q")
    commit_ok(store, unit(add(copy(7, deadline=T + 30))))
    outcomes = commit(
        store,
        unit(SettleConfirmation(7, 0), append(q, b"final ack")),
        unit(SettleConfirmation(7, 0), append(q, b"deadline")),
    )
    assert errors(outcomes) == [None, ConfirmationMissing]
    assert isinstance(outcomes[0].results[1], Appended)
    assert outcomes[1].results[1] is SKIPPED
    assert payloads(store, q) == [b"final ack"]
    assert store.confirmations(7) == []
    assert due(store) == []


def test_a_failed_settlement_in_a_batch_leaves_the_copy_to_the_next(store: Store) -> None:
    # The first settling unit fails for another reason: its savepoint is undone,
    # so the copy is still there for the second unit of the same batch.
    q = create_queue(store, "q", quota=10)
    commit_ok(store, unit(add(copy(7, deadline=T + 30))))
    outcomes = commit(
        store,
        unit(SettleConfirmation(7, 0), append(q, b"x" * 11)),
        unit(SettleConfirmation(7, 0), append(q, b"y")),
    )
    assert errors(outcomes) == [QuotaExceeded, None]
    assert payloads(store, q) == [b"y"]
    assert store.confirmations(7) == []


def test_a_copy_added_and_settled_in_one_batch_is_gone(store: Store) -> None:
    outcomes = commit(
        store,
        unit(add(copy(7, deadline=T + 30))),
        unit(SettleConfirmation(7, 0)),
        unit(SettleConfirmation(7, 0)),
    )
    assert errors(outcomes) == [None, None, ConfirmationMissing]
    assert store.confirmations(7) == []
    assert due(store) == []


def test_settling_uses_the_index_key_of_the_stored_deadline(store: Store) -> None:
    # A deadline that is not a whole millisecond: the index key is rounded up,
    # and the settlement must remove exactly that key.
    commit_ok(store, unit(add(copy(7, deadline=T + 0.0001))))
    assert due(store) == [(T + 0.001, 0, lookup_of(7, 0))]
    commit_ok(store, unit(SettleConfirmation(7, 0)))
    assert due(store) == []


# --------------------------------------------------------------------------- delivered


def test_mark_delivered_sets_only_copies_for_that_destination(store: Store) -> None:
    commit_ok(
        store,
        unit(
            add(copy(7, 0, deadline=T + 30, destination=DEST_A)),
            add(copy(7, 1, deadline=T + 30, destination=DEST_B)),
            add(copy(8, 0, destination=DEST_A)),
        ),
    )
    [outcome] = commit_ok(store, unit(MarkDelivered(((7, DEST_B),))))
    assert outcome.results == (Done(),)
    assert [(c.index, c.delivered) for c in store.confirmations(7)] == [(0, False), (1, True)]
    assert store.confirmation(8, 0) == copy(8, 0, destination=DEST_A)
    # Everything else of the record is kept, the deadline and its index entry too.
    marked = store.confirmation(7, 1)
    assert marked is not None
    assert (marked.deadline, marked.destination, marked.payload, marked.last_class) == (
        T + 30,
        DEST_B,
        b"message bytes",
        0,
    )
    assert due(store) == [(T + 30, 0, lookup_of(7, 0)), (T + 30, 0, lookup_of(7, 1))]
    # Marking again changes nothing.
    commit_ok(store, unit(MarkDelivered(((7, DEST_B),))))
    assert store.confirmation(7, 1) == marked


def test_the_forget_of_delivered_entries_with_its_marks_frees_space() -> None:
    # So that a full store writes it with the room kept for removals.
    marks = MarkDelivered(((7, DEST_A),), by=QM_A, with_forget=True)
    assert unit(ForgetOutgoing(5, (1, 2)), marks).frees_space
    assert not MarkDelivered(((7, DEST_A),), by=QM_A).frees_space  # on its own, it grows


def test_mark_delivered_keeps_whose_order_ack_covered_the_copy(
    store: Store, reopen: Reopener
) -> None:
    b_qm, d_qm = bytes(range(16)), bytes(range(16, 32))
    commit_ok(store, unit(add(copy(7, 0, deadline=T + 30)), add(copy(8, 0))))
    commit_ok(store, unit(MarkDelivered(((7, DEST_A),), by=b_qm)))
    commit_ok(store, unit(MarkDelivered(((8, DEST_A),))))  # not known: as before
    # Marked once: a later OrderAck of another queue manager changes nothing.
    commit_ok(store, unit(MarkDelivered(((7, DEST_A),), by=d_qm)))
    store = reopen(store)
    marked = store.confirmation(7, 0)
    assert marked == dataclasses.replace(
        copy(7, 0, deadline=T + 30), delivered=True, acknowledged_by=b_qm
    )
    assert store.confirmation(8, 0) == dataclasses.replace(copy(8, 0), delivered=True)
    # Record version 2: version 1 with the GUID between the name and the message.
    store.close()
    [value] = [v for k, v in raw_items(store.path, DB_CONFIRMATIONS) if k == confirmation_key(7, 0)]
    assert value[0] == 2
    assert b_qm + b"message bytes" in value
    # A prepared transaction's kept copy reads back the same way.
    assert decode_kept(encode_kept(marked)) == marked
    with pytest.raises(InvalidRecord):
        encode_kept(dataclasses.replace(copy(9, 0), acknowledged_by=b"short"))


def test_mark_delivered_passes_over_missing_copies(store: Store) -> None:
    commit_ok(store, unit(add(copy(7, destination=DEST_A))))
    [outcome] = commit_ok(
        store, unit(MarkDelivered(((9, DEST_A), (7, DEST_B), (7, DEST_A), (10, DEST_A))))
    )
    assert outcome.results == (Done(),)
    assert [c.delivered for c in store.confirmations(7)] == [True]
    assert store.confirmations(9) == store.confirmations(10) == []


def test_a_delivered_mark_is_visible_to_a_settlement_in_the_same_batch(store: Store) -> None:
    commit_ok(store, unit(add(copy(7, deadline=T + 30))))
    outcomes = commit(
        store,
        unit(MarkDelivered(((7, DEST_A),))),
        unit(SettleConfirmation(7, 0)),
        unit(MarkDelivered(((7, DEST_A),))),
        unit(SettleConfirmation(7, 0)),
    )
    assert errors(outcomes) == [None, None, None, ConfirmationMissing]
    # The mark after the settlement did not bring the record back.
    assert store.confirmations(7) == []
    assert due(store) == []
    store.close()
    assert raw_items(store.path, DB_CONFIRMATIONS) == []


# --------------------------------------------------------------------------- FinalAcks


def test_final_acks_are_read_in_key_order(store: Store) -> None:
    commit_ok(
        store,
        unit(
            RecordFinalAck(QM_B, 1, b"b1"),
            RecordFinalAck(QM_A, 0x0100, b"a256"),
            RecordFinalAck(QM_A, 2, b"a2"),
            RecordFinalAck(QM_A, 1, b""),
        ),
    )
    assert store.final_ack_count() == 4
    assert store.final_acks() == [
        pending(QM_A, 1, b""),
        pending(QM_A, 2, b"a2"),
        pending(QM_A, 0x0100, b"a256"),
        pending(QM_B, 1, b"b1"),
    ]
    assert final_ack_key(QM_A, 2) == QM_A + b"\x00\x00\x00\x02"
    # The FinalAcks of one message, by its source and ordinal.
    assert store.final_acks(source_qm=QM_A, ordinal=0x0100) == [pending(QM_A, 0x0100, b"a256")]
    assert store.final_acks(source_qm=QM_A, ordinal=1) == [pending(QM_A, 1, b"")]
    assert store.final_acks(source_qm=QM_B, ordinal=2) == []


def test_one_message_that_came_in_two_streams_has_two_final_acks(store: Store) -> None:
    # A list sent it to two queues here: two outgoing queues of its source, two streams.
    commit_ok(
        store,
        unit(RecordFinalAck(QM_A, 7, b"o1", stamp=5), RecordFinalAck(QM_A, 7, b"o2", stamp=6)),
    )
    commit_ok(store, unit(RecordFinalAck(QM_A, 7, b"o1 again", stamp=5)))
    ordinal = (7).to_bytes(4, "big")
    assert store.final_acks(source_qm=QM_A, ordinal=7) == [
        PendingFinalAck(QM_A + ordinal + (5).to_bytes(4, "big"), b"o1 again"),
        PendingFinalAck(QM_A + ordinal + (6).to_bytes(4, "big"), b"o2"),
    ]
    assert final_ack_sender(QM_A + ordinal + (5).to_bytes(4, "big")) is None
    for stamp in (-1, 1 << 32):
        [outcome] = commit(store, unit(RecordFinalAck(QM_A, 8, b"x", stamp=stamp)))
        assert isinstance(outcome.error, InvalidRecord)


def test_final_acks_filtered_by_source_and_paged(store: Store) -> None:
    commit_ok(
        store,
        unit(
            *(RecordFinalAck(QM_A, ordinal, bytes([ordinal])) for ordinal in range(1, 6)),
            *(RecordFinalAck(QM_B, ordinal, b"b") for ordinal in range(1, 3)),
        ),
    )
    a_keys = [final_ack_key(QM_A, ordinal) for ordinal in range(1, 6)]
    b_keys = [final_ack_key(QM_B, ordinal) for ordinal in range(1, 3)]
    assert [p.key for p in store.final_acks(source_qm=QM_A)] == a_keys
    assert [p.key for p in store.final_acks(source_qm=QM_B)] == b_keys
    assert store.final_acks(source_qm=bytes(16)) == []
    assert store.final_acks(source_qm=b"\xff" * 16) == []
    # Pages of two, each past the last key of the one before.
    first = store.final_acks(source_qm=QM_A, limit=2)
    assert first == [pending(QM_A, 1, b"\x01"), pending(QM_A, 2, b"\x02")]
    second = store.final_acks(source_qm=QM_A, after=first[-1].key, limit=2)
    assert [p.key for p in second] == a_keys[2:4]
    third = store.final_acks(source_qm=QM_A, after=second[-1].key, limit=2)
    assert [p.key for p in third] == a_keys[4:]
    # The source's last key: nothing more of it, though QM_B follows.
    assert store.final_acks(source_qm=QM_A, after=a_keys[-1]) == []
    # Without a source, paging runs on into the next source.
    assert [p.key for p in store.final_acks(after=a_keys[-1])] == b_keys
    assert [p.key for p in store.final_acks(after=a_keys[3], limit=2)] == [a_keys[4], b_keys[0]]
    assert store.final_acks(limit=0) == []


def test_recording_a_final_ack_again_replaces_it(store: Store) -> None:
    commit_ok(store, unit(RecordFinalAck(QM_A, 7, b"first")))
    commit_ok(store, unit(RecordFinalAck(QM_A, 7, b"second")))
    assert store.final_acks() == [pending(QM_A, 7, b"second")]
    assert store.final_ack_count() == 1
    # Twice in one unit: the last one stays.
    commit_ok(store, unit(RecordFinalAck(QM_A, 8, b"x"), RecordFinalAck(QM_A, 8, b"y")))
    assert store.final_acks(source_qm=QM_A, after=final_ack_key(QM_A, 7)) == [
        pending(QM_A, 8, b"y")
    ]
    assert store.final_ack_count() == 2


def test_forgetting_final_acks_passes_over_missing_keys(store: Store) -> None:
    commit_ok(
        store,
        unit(*(RecordFinalAck(QM_A, ordinal, b"v") for ordinal in (1, 2, 3))),
    )
    keys = (final_ack_key(QM_A, 1), final_ack_key(QM_A, 3), final_ack_key(QM_B, 9))
    [outcome] = commit_ok(store, unit(ForgetFinalAcks(keys)))
    assert outcome.results == (Done(),)
    assert store.final_acks() == [pending(QM_A, 2, b"v")]
    assert store.final_ack_count() == 1
    # Forgetting again (all of them gone now) is no error.
    commit_ok(store, unit(ForgetFinalAcks(keys)))
    commit_ok(store, unit(ForgetFinalAcks((final_ack_key(QM_A, 2),))))
    assert store.final_acks() == []
    assert store.final_ack_count() == 0


def test_a_final_ack_value_is_at_most_64_bytes(store: Store) -> None:
    q = create_queue(store, "q")
    commit_ok(store, unit(RecordFinalAck(QM_A, 1, b"v" * 64)))
    [outcome] = commit(store, unit(append(q), RecordFinalAck(QM_A, 2, b"v" * 65)))
    assert isinstance(outcome.error, InvalidRecord)
    assert outcome.results[0] is SKIPPED
    assert payloads(store, q) == []
    assert store.final_acks() == [pending(QM_A, 1, b"v" * 64)]
    assert store.final_ack_count() == 1


@pytest.mark.parametrize("guid", [b"", bytes(15), bytes(17)])
def test_a_final_ack_needs_a_16_byte_source(store: Store, guid: bytes) -> None:
    [outcome] = commit(store, unit(RecordFinalAck(guid, 1, b"v")))
    assert isinstance(outcome.error, InvalidRecord)
    assert store.final_ack_count() == 0


def test_a_failed_unit_records_no_final_ack(store: Store) -> None:
    outcomes = commit(
        store,
        unit(RecordFinalAck(QM_A, 1, b"v"), SettleConfirmation(1, 0)),
        unit(ForgetFinalAcks((final_ack_key(QM_A, 1),)), RecordFinalAck(QM_A, 2, b"w")),
    )
    assert errors(outcomes) == [ConfirmationMissing, None]
    assert outcomes[0].results[0] is SKIPPED
    assert isinstance(outcomes[0].results[1], Failed)
    assert store.final_acks() == [pending(QM_A, 2, b"w")]


# --------------------------------------------------------------------------- counts by destination


def dated(ordinal: int, index: int = 0, destination: str = DEST_A) -> AddConfirmation:
    """A copy with a deadline (the ones counted)."""
    return add(copy(ordinal, index, deadline=T + 30, destination=destination))


def test_copies_with_a_deadline_are_counted_by_destination_until_settled(store: Store) -> None:
    assert store.awaited_confirmations() == {}
    commit_ok(
        store,
        unit(dated(7, 0, DEST_A), dated(7, 1, DEST_B)),
        unit(dated(8, 0, DEST_A)),
        # Without a deadline: nothing can report it unconfirmed, it is not counted.
        unit(add(copy(9, destination=DEST_B))),
    )
    assert store.awaited_confirmations() == {DEST_A: 2, DEST_B: 1}
    # Delivered marks change no count: a delivered copy still awaits its FinalAck.
    commit_ok(store, unit(MarkDelivered(((7, DEST_A),))))
    assert store.awaited_confirmations() == {DEST_A: 2, DEST_B: 1}
    commit_ok(store, unit(SettleConfirmation(7, 1)), unit(SettleConfirmation(9, 0)))
    assert store.awaited_confirmations() == {DEST_A: 2}
    commit_ok(store, unit(SettleConfirmation(7, 0)), unit(SettleConfirmation(8, 0)))
    assert store.awaited_confirmations() == {}
    store.close()
    assert raw_items(store.path, DB_AWAITED) == []


def test_a_failed_unit_counts_nothing_and_a_batch_counts_each_unit(store: Store) -> None:
    q = create_queue(store, "q", quota=10)
    outcomes = commit(
        store,
        unit(dated(7), append(q, b"x" * 11)),  # over quota
        unit(dated(8)),
        unit(dated(9), SettleConfirmation(8, 0)),
        unit(SettleConfirmation(8, 0)),  # already settled by the unit before
    )
    assert errors(outcomes) == [QuotaExceeded, None, None, ConfirmationMissing]
    assert store.awaited_confirmations() == {DEST_A: 1}


def test_a_copy_kept_again_replaces_the_first_with_its_deadline_and_count(store: Store) -> None:
    commit_ok(store, unit(dated(7, destination=DEST_A)))
    commit_ok(store, unit(dated(7, destination=DEST_A)))
    assert store.awaited_confirmations() == {DEST_A: 1}
    commit_ok(store, unit(add(copy(7, deadline=T + 50, destination=DEST_B))))
    assert store.awaited_confirmations() == {DEST_B: 1}
    assert due(store) == [(T + 50, 0, lookup_of(7, 0))]
    commit_ok(store, unit(add(copy(7, destination=DEST_B))))
    assert (store.awaited_confirmations(), due(store)) == ({}, [])
    commit_ok(store, unit(SettleConfirmation(7, 0)))
    assert (store.confirmations(7), store.awaited_confirmations(), due(store)) == ([], {}, [])


def test_the_count_database_holds_the_documented_records(store: Store) -> None:
    commit_ok(store, unit(dated(7, 0, "dé"), dated(7, 1, "dé")))
    store.close()
    assert raw_items(store.path, DB_AWAITED) == [("dé".encode(), (2).to_bytes(8, "big"))]


def test_a_corrupt_count_raises_store_corrupt(store: Store, reopen: Reopener) -> None:
    commit_ok(store, unit(dated(7)))
    store.close()
    put_raw(store.path, DB_AWAITED, DEST_A.encode(), b"\x01")
    store = reopen(store)
    with pytest.raises(StoreCorrupt):
        store.awaited_confirmations()
    with pytest.raises(StoreCorrupt):
        commit(store, unit(SettleConfirmation(7, 0)))
    assert store.confirmation(7, 0) == copy(7, deadline=T + 30)


# --------------------------------------------------------------------------- reopening


def test_everything_survives_reopening(store: Store, reopen: Reopener) -> None:
    commit_ok(
        store,
        unit(
            add(copy(7, 0, deadline=T + 30, destination=DEST_A)),
            add(copy(7, 1, deadline=T + 40, destination=DEST_B, payload=b"b")),
            add(copy(8, 0)),
            RecordFinalAck(QM_A, 3, b"fa3"),
            RecordFinalAck(QM_B, 4, b"fb4"),
        ),
    )
    commit_ok(store, unit(MarkDelivered(((7, DEST_A),))))
    store = reopen(store)
    assert [(c.index, c.delivered, c.deadline, c.destination) for c in store.confirmations(7)] == [
        (0, True, T + 30, DEST_A),
        (1, False, T + 40, DEST_B),
    ]
    assert store.confirmation(8, 0) == copy(8, 0)
    assert due(store) == [(T + 30, 0, lookup_of(7, 0)), (T + 40, 0, lookup_of(7, 1))]
    assert store.final_acks() == [pending(QM_A, 3, b"fa3"), pending(QM_B, 4, b"fb4")]
    assert store.final_ack_count() == 2
    assert store.awaited_confirmations() == {DEST_A: 1, DEST_B: 1}
    # Settling and forgetting work on what was read back, and stay done.
    commit_ok(store, unit(SettleConfirmation(7, 0)), unit(SettleConfirmation(8, 0)))
    commit_ok(store, unit(ForgetFinalAcks((final_ack_key(QM_A, 3),))))
    store = reopen(store)
    assert [c.index for c in store.confirmations(7)] == [1]
    assert store.confirmations(8) == []
    assert due(store) == [(T + 40, 0, lookup_of(7, 1))]
    assert store.final_acks() == [pending(QM_B, 4, b"fb4")]
    assert store.final_ack_count() == 1
    [outcome] = commit(store, unit(SettleConfirmation(7, 0)))
    assert isinstance(outcome.error, ConfirmationMissing)


# --------------------------------------------------------------------------- corruption


_HEAD = struct.Struct(">BBHdH")


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"\x01\x00\x00",  # shorter than the fixed fields
        _HEAD.pack(2, 0, 0, 0.0, 1) + b"d" + b"payload",  # unknown version
        _HEAD.pack(1, 0, 0, 0.0, 2) + b"\xff\xfe" + b"payload",  # destination not UTF-8
    ],
)
def test_a_corrupt_record_raises_store_corrupt(
    store: Store, reopen: Reopener, value: bytes
) -> None:
    commit_ok(store, unit(add(copy(7)), add(copy(8))))
    store.close()
    put_raw(store.path, DB_CONFIRMATIONS, confirmation_key(7, 0), value)
    store = reopen(store)
    with pytest.raises(StoreCorrupt):
        store.confirmation(7, 0)
    with pytest.raises(StoreCorrupt):
        store.confirmations(7)
    # Settling it cannot decode it either: the batch fails, nothing applied.
    with pytest.raises(StoreCorrupt):
        commit(store, unit(SettleConfirmation(7, 0)))
    # Other records still read.
    assert store.confirmation(8, 0) == copy(8)


def test_the_record_layout_is_as_documented(store: Store) -> None:
    commit_ok(store, unit(add(copy(7, 2, deadline=T + 1.5, destination="dé", payload=b"P"))))
    commit_ok(store, unit(MarkDelivered(((7, "dé"),))))
    store.close()
    [(key, value)] = raw_items(store.path, DB_CONFIRMATIONS)
    assert key == b"\x00\x00\x00\x07\x02"
    name = "dé".encode()
    assert value == _HEAD.pack(1, 0x01 | 0x02, 0, T + 1.5, len(name)) + name + b"P"


def test_a_record_cut_short_in_its_name_raises_store_corrupt(
    store: Store, reopen: Reopener
) -> None:
    commit_ok(store, unit(add(copy(7))))
    store.close()
    cut = _HEAD.pack(1, 0, 0, 0.0, 40) + b"outgoing$"  # a 40-byte name, 9 of them there
    put_raw(store.path, DB_CONFIRMATIONS, confirmation_key(7, 0), cut)
    store = reopen(store)
    with pytest.raises(StoreCorrupt):
        store.confirmation(7, 0)


def test_a_final_ack_kept_for_another_sender_is_keyed_apart_from_our_own(store: Store) -> None:
    commit_ok(
        store,
        unit(
            RecordFinalAck(QM_A, 3, b"ours", stamp=9),
            RecordFinalAck(QM_A, 3, b"b's", stamp=9, sender=QM_B),
            RecordFinalAck(QM_A, 3, b"b's again", stamp=9, sender=QM_B),
        ),
    )
    ours = QM_A + (3).to_bytes(4, "big") + (9).to_bytes(4, "big")
    kept = ours + QM_B
    assert store.final_acks(source_qm=QM_A) == [
        PendingFinalAck(ours, b"ours"),
        PendingFinalAck(kept, b"b's again"),
    ]
    assert final_ack_key(QM_A, 3, 9, QM_B) == kept
    assert (final_ack_sender(ours), final_ack_sender(kept)) == (None, QM_B)
    commit_ok(store, unit(ForgetFinalAcks((kept,))))
    assert store.final_acks() == [PendingFinalAck(ours, b"ours")]
    for bad in (
        RecordFinalAck(QM_A, 4, b"x", stamp=9, sender=b"short"),
        RecordFinalAck(QM_A, 4, b"x", sender=QM_B),  # kept ones are keyed by their stream
    ):
        [outcome] = commit(store, unit(bad))
        assert isinstance(outcome.error, InvalidRecord)


def test_final_acks_database_holds_the_documented_keys(store: Store) -> None:
    commit_ok(store, unit(RecordFinalAck(QM_A, 0x01020304, b"value")))
    store.close()
    assert raw_items(store.path, DB_FINAL_ACKS) == [(QM_A + b"\x01\x02\x03\x04", b"value")]
