"""Queue-manager semantics, scenario by scenario, on a real temporary store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from qmgr.core.engine import Limits, MessageProperties, QueueManagerCore, SendMode
from qmgr.core.errors import (
    AccessDenied,
    InvalidArgument,
    MessageTooLarge,
    NotSupported,
    QueueExists,
    QueueNotFound,
    TransactionAborted,
    TransactionTooLarge,
    TransactionUsageError,
)
from storage import CommitUnit, Store
from wire.client_frames import MAX_MESSAGE_BODY

NOW = 1_700_000_000.0


@pytest.fixture
def core(tmp_path: Path) -> Iterator[QueueManagerCore]:
    store = Store(tmp_path / "store", initial_map_size=1 << 22)
    core = QueueManagerCore(store, limits=Limits(max_transaction_operations=5))
    core.ensure_system_queues(NOW)
    core.create_queue("tq", transactional=True, journal=True, now=NOW)
    core.create_queue("nq", now=NOW)
    yield core
    store.close()


def send(core: QueueManagerCore, queue: str, body: bytes, priority: int = 3) -> int:
    prepared = core.prepare_send(
        queue, MessageProperties(body=body, priority=priority), tx=None, now=NOW
    )
    [outcome] = core.store.commit_batch([CommitUnit(sends=prepared.messages)], now=NOW)
    assert outcome.error is None
    return outcome.sends[0].lookup_id


def commit(core: QueueManagerCore, *txs: object) -> list[object]:
    units = [core.prepare_commit(tx) for tx in txs]  # type: ignore[arg-type]
    outcomes = core.store.commit_batch(units, now=NOW)
    return [core.finish_commit(tx, o)[1] for tx, o in zip(txs, outcomes, strict=True)]  # type: ignore[arg-type]


def test_locked_messages_are_invisible_and_come_back_in_place_on_abort(
    core: QueueManagerCore,
) -> None:
    ids = [send(core, "tq", body) for body in (b"a", b"b", b"c")]
    queue = core.queue("tq")
    tx = core.begin(owner="x", now=NOW)
    first = core.find(queue)
    assert first is not None
    assert first[0] == ids[0]
    core.lock(queue, first[0], tx, NOW)
    # Another reader skips the locked message, and peeking it by id finds nothing.
    assert core.find(queue) == (ids[1], core.store.read_message(queue.queue_id, ids[1]))
    assert core.find(queue, lookup_id=ids[0]) is None
    assert [lid for lid, _ in core.peek_range(queue, after=0, limit=10)] == ids[1:]
    woken = core.abort(tx)
    assert woken == {queue.queue_id}
    # Back in its original position, with its original LookupId.
    assert [lid for lid, _ in core.peek_range(queue, after=0, limit=10)] == ids
    assert core.locked_count(queue.queue_id) == 0


def test_commit_makes_sends_visible_at_once_in_order_with_consecutive_ids(
    core: QueueManagerCore,
) -> None:
    queue = core.queue("tq")
    before = send(core, "tq", b"before")
    tx = core.begin(owner="x", now=NOW)
    for body in (b"1", b"2", b"3"):
        core.prepare_send("tq", MessageProperties(body=body), tx=tx, now=NOW)
    assert [m.body for _, m in core.peek_range(queue, after=0, limit=10)] == [b"before"]
    assert commit(core, tx) == [None]
    seen = core.peek_range(queue, after=before, limit=10)
    assert [m.body for _, m in seen] == [b"1", b"2", b"3"]
    assert [lid for lid, _ in seen] == [before + 1, before + 2, before + 3]


def test_commit_removes_received_and_journals_them(core: QueueManagerCore) -> None:
    send(core, "tq", b"m")
    queue = core.queue("tq")
    tx = core.begin(owner="x", now=NOW)
    lookup_id, _ = core.find(queue)  # type: ignore[misc]
    core.lock(queue, lookup_id, tx, NOW)
    assert commit(core, tx) == [None]
    assert core.find(queue) is None
    journal = core.queue("tq;journal")
    assert [m.body for _, m in core.peek_range(journal, after=0, limit=10)] == [b"m"]


def test_one_failing_transaction_does_not_spoil_its_batch(core: QueueManagerCore) -> None:
    core.create_queue("small", transactional=True, quota=10, now=NOW)
    good, bad = core.begin(owner="x", now=NOW), core.begin(owner="y", now=NOW)
    core.prepare_send("tq", MessageProperties(body=b"ok"), tx=good, now=NOW)
    core.prepare_send("small", MessageProperties(body=b"x" * 11), tx=bad, now=NOW)
    errors = commit(core, good, bad)
    assert errors[0] is None
    assert isinstance(errors[1], TransactionAborted)
    assert "quota" in str(errors[1]).lower()
    assert core.queue("small").depth == 0
    assert core.queue("tq").depth == 1


def test_msmq_transaction_usage_rules(core: QueueManagerCore) -> None:
    tx = core.begin(owner="x", now=NOW)
    props = MessageProperties(body=b"x")
    with pytest.raises(TransactionUsageError, match="not transactional"):
        core.prepare_send("nq", props, tx=tx, now=NOW)
    with pytest.raises(TransactionUsageError, match="transactional"):
        core.prepare_send("tq", props, tx=None, mode=SendMode.NONE, now=NOW)
    with pytest.raises(TransactionUsageError):
        core.prepare_send("nq", props, tx=None, mode=SendMode.SINGLE, now=NOW)
    with pytest.raises(TransactionUsageError, match="not transactional"):
        core.check_receive(core.queue("nq"), tx, peek=False)
    # Outside a transaction, a transactional queue gets a single-message transaction.
    assert core.prepare_send("tq", props, tx=None, now=NOW).transactional
    assert not core.prepare_send("nq", props, tx=None, now=NOW).transactional
    core.check_receive(core.queue("tq"), None, peek=False)


def test_a_transaction_cannot_receive_what_it_sent(core: QueueManagerCore) -> None:
    tx = core.begin(owner="x", now=NOW)
    core.prepare_send("tq", MessageProperties(body=b"mine"), tx=tx, now=NOW)
    assert core.find(core.queue("tq")) is None


def test_purge_while_locked_removes_the_message_when_its_transaction_ends(
    core: QueueManagerCore,
) -> None:
    send(core, "tq", b"a")
    send(core, "tq", b"b")
    queue = core.queue("tq")
    tx = core.begin(owner="x", now=NOW)
    lookup_id, _ = core.find(queue)  # type: ignore[misc]
    core.lock(queue, lookup_id, tx, NOW)
    assert core.purge_queue("tq") == 1
    core.abort(tx)
    assert core.find(queue) is None
    assert core.queue("tq").depth == 0


def test_priority_orders_non_transactional_queues_only(core: QueueManagerCore) -> None:
    low = send(core, "nq", b"low", priority=1)
    high = send(core, "nq", b"high", priority=6)
    assert core.find(core.queue("nq"))[0] == high  # type: ignore[index]
    assert low < high
    first = send(core, "tq", b"first", priority=1)
    send(core, "tq", b"second", priority=7)
    assert core.find(core.queue("tq"))[0] == first  # type: ignore[index]
    # Transactional messages carry priority 0, as MSMQ sends them.
    assert core.store.read_message(core.queue("tq").queue_id, first).priority == 0  # type: ignore[union-attr]


def test_bad_requests_are_refused_with_typed_errors(core: QueueManagerCore) -> None:
    props = MessageProperties(body=b"x")
    with pytest.raises(QueueNotFound):
        core.prepare_send("missing", props, tx=None, now=NOW)
    with pytest.raises(AccessDenied):
        core.prepare_send("system$;deadletter", props, tx=None, now=NOW)
    with pytest.raises(AccessDenied):
        core.prepare_send("tq;journal", props, tx=None, now=NOW)
    with pytest.raises(NotSupported, match="another host"):
        core.prepare_send("DIRECT=TCP:10.9.9.9\\private$\\q", props, tx=None, now=NOW)
    with pytest.raises(MessageTooLarge):
        core.prepare_send(
            "nq", MessageProperties(body=b"x" * (MAX_MESSAGE_BODY + 1)), tx=None, now=NOW
        )
    with pytest.raises(InvalidArgument, match="priority"):
        core.prepare_send("nq", MessageProperties(priority=8), tx=None, now=NOW)
    with pytest.raises(InvalidArgument, match="label"):
        core.prepare_send("nq", MessageProperties(label="x" * 251), tx=None, now=NOW)
    with pytest.raises(InvalidArgument, match="admin queue"):
        core.prepare_send("nq", MessageProperties(acknowledge=1), tx=None, now=NOW)
    with pytest.raises(QueueExists):
        core.create_queue("TQ", now=NOW)
    with pytest.raises(AccessDenied):
        core.delete_queue("system$;deadxact")


def test_transactions_are_bounded(core: QueueManagerCore) -> None:
    tx = core.begin(owner="x", now=NOW)
    for _ in range(5):
        core.prepare_send("tq", MessageProperties(body=b"x"), tx=tx, now=NOW)
    with pytest.raises(TransactionTooLarge):
        core.prepare_send("tq", MessageProperties(body=b"x"), tx=tx, now=NOW)


def test_multiple_element_send_copies_to_each_queue(core: QueueManagerCore) -> None:
    core.create_queue("tq2", transactional=True, now=NOW)
    tx = core.begin(owner="x", now=NOW)
    core.prepare_send("tq, .\\private$\\tq2", MessageProperties(body=b"both"), tx=tx, now=NOW)
    assert commit(core, tx) == [None]
    assert core.queue("tq").depth == 1
    assert core.queue("tq2").depth == 1


def test_deleted_queue_fails_the_transactions_that_read_it(core: QueueManagerCore) -> None:
    core.create_queue("gone", transactional=True, now=NOW)
    send(core, "gone", b"x")
    queue = core.queue("gone")
    tx = core.begin(owner="x", now=NOW)
    core.lock(queue, core.find(queue)[0], tx, NOW)  # type: ignore[index]
    core.delete_queue("gone")
    [error] = commit(core, tx)
    assert isinstance(error, TransactionAborted)


def test_idle_transactions_are_found(core: QueueManagerCore) -> None:
    tx = core.begin(owner="x", now=NOW)
    assert core.idle_transactions(NOW + 10, timeout=30) == []
    assert core.idle_transactions(NOW + 31, timeout=30) == [tx]
    core.expire(tx, "idle")
    assert core.open_transactions == 0


def test_an_abort_never_fails_half_way_when_the_disk_is_full(
    core: QueueManagerCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import storage

    send(core, "tq", b"a")
    queue = core.queue("tq")
    tx = core.begin(owner="x", now=NOW)
    lookup_id, _ = core.find(queue)  # type: ignore[misc]
    core.lock(queue, lookup_id, tx, NOW)
    core.purge_queue("tq")

    def full(*args: object, **kwargs: object) -> object:
        raise storage.StoreFull("disk full (simulated)")

    monkeypatch.setattr(core.store, "commit_batch", full)
    # The purge-pending removal cannot be written: the abort still completes,
    # the lock is released and the message stays visible, as after a restart.
    assert core.abort(tx) == {queue.queue_id}
    assert core.locked_count(queue.queue_id) == 0
    assert core.open_transactions == 0
    assert core.find(queue) is not None
