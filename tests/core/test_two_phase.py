"""Two-phase transactions in the core (``qmgr.core.two_phase``), over a real store.

The harness writes every unit the core returns and ``crash()`` starts a new
core on the same store, as after ``kill -9``: what survives is what the
store holds.
"""

from __future__ import annotations

import pytest

import storage
from qmgr.core.engine import Limits
from qmgr.core.errors import (
    AccessDenied,
    InvalidArgument,
    LimitExceeded,
    QueueNotFound,
    QuotaExceeded,
    TransactionAborted,
    TransactionCommitted,
    TransactionNotFound,
    TransactionUsageError,
)
from qmgr.core.transactions import Transaction
from wire import MessageClass

from .conftest import OpenCore
from .harness import POS_RECEIVE, WALL, CoreHarness, classes

COMMITTED = storage.Resolution.COMMITTED
ABORTED = storage.Resolution.ABORTED


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    return open_core({"src": {"transactional": True}, "dst": {"transactional": True}})


def begin(qm: CoreHarness, xid: str) -> Transaction:
    return qm.core.two_phase.begin(qm, 0, qm.tick(), xid)


def prepare(qm: CoreHarness, tx: Transaction) -> None:
    unit = qm.core.two_phase.prepare(tx, WALL)
    _, error = qm.core.two_phase.prepared(tx, unit, qm.write(unit))
    assert error is None, error


def resolve(qm: CoreHarness, *xids: str, commit: bool = True) -> list[storage.Resolution]:
    unit = qm.core.two_phase.resolve(list(xids), commit=commit, wall=WALL)
    _, resolutions = qm.core.two_phase.resolved(qm.write(unit))
    return resolutions


def moved(qm: CoreHarness, xid: str, body: bytes = b"moved") -> Transaction:
    """A prepared transaction that received the first message of src and sent one to dst."""
    tx = begin(qm, xid)
    assert qm.take("src", tx) is not None
    qm.prepare("dst", body, tx=tx)
    prepare(qm, tx)
    return tx


def test_prepared_transaction_survives_a_crash_and_commits_in_commit_order(
    qm: CoreHarness,
) -> None:
    qm.send("src", b"a")
    qm.send("src", b"b")
    assert qm.core.two_phase.oldest_prepared() is None
    moved(qm, "x1")
    prepared_at = qm.core.two_phase.oldest_prepared()
    assert prepared_at is not None
    qm.crash()
    assert qm.core.two_phase.oldest_prepared() == prepared_at  # read back from the store
    # Its received message stays held, its send invisible.
    assert qm.bodies("src") == [b"b"]
    assert qm.bodies("dst") == []
    taken = qm.take("src")  # a receive passes over the held message
    assert taken is not None
    assert taken[1] == b"b"
    qm.send("dst", b"later")
    assert resolve(qm, "x1") == [COMMITTED]
    assert qm.core.two_phase.oldest_prepared() is None
    assert qm.bodies("src") == []
    # The prepared send got its LookupId at commit: after the message committed before it.
    assert qm.bodies("dst") == [b"later", b"moved"]


def test_abort_after_a_crash_returns_the_messages_and_drops_the_sends(qm: CoreHarness) -> None:
    qm.send("src", b"a")
    moved(qm, "x1")
    qm.crash()
    assert qm.bodies("src") == []
    assert resolve(qm, "x1", commit=False) == [ABORTED]
    assert qm.bodies("src") == [b"a"]
    assert qm.bodies("dst") == []
    assert qm.take("src") is not None


def test_resolving_twice_says_so_and_changes_nothing(qm: CoreHarness) -> None:
    qm.send("src", b"a")
    moved(qm, "x1")
    assert resolve(qm, "x1") == [COMMITTED]
    assert resolve(qm, "x1") == [storage.Resolution.ALREADY_COMMITTED]
    assert qm.bodies("dst") == [b"moved"]
    with pytest.raises(TransactionCommitted, match="x1"):
        resolve(qm, "x1", commit=False)
    qm.send("src", b"b")
    moved(qm, "x2")
    assert resolve(qm, "x2", commit=False) == [ABORTED]
    assert resolve(qm, "x2", commit=False) == [storage.Resolution.ALREADY_ABORTED]
    with pytest.raises(TransactionAborted, match="x2"):
        resolve(qm, "x2")
    with pytest.raises(TransactionNotFound, match="nobody"):
        resolve(qm, "nobody")


def test_resolving_several_is_all_or_nothing(qm: CoreHarness) -> None:
    qm.send("src", b"a")
    qm.send("src", b"b")
    moved(qm, "x1", b"one")
    moved(qm, "x2", b"two")
    with pytest.raises(TransactionNotFound):
        resolve(qm, "x1", "unknown", "x2")
    assert qm.bodies("dst") == []
    assert resolve(qm, "x1", "x2") == [COMMITTED, COMMITTED]
    assert qm.bodies("dst") == [b"one", b"two"]


def test_an_id_is_used_once(qm: CoreHarness) -> None:
    tx = begin(qm, "x1")
    with pytest.raises(InvalidArgument, match="open"):
        begin(qm, "x1")
    prepare(qm, tx)
    with pytest.raises(InvalidArgument, match="prepared"):
        begin(qm, "x1")
    resolve(qm, "x1")
    with pytest.raises(InvalidArgument, match="committed"):
        begin(qm, "x1")
    for bad in ("", "a\x00b", "tab\there", "x" * 201):
        with pytest.raises(InvalidArgument):
            begin(qm, bad)


def test_a_new_id_must_print_but_one_that_does_not_can_still_be_resolved(
    qm: CoreHarness,
) -> None:
    # The daemon keeps the rule even for a client that does not check it.
    with pytest.raises(InvalidArgument, match="U\\+200B, which does not print"):
        begin(qm, "zw\u200bsp")
    # An id of an earlier release, in doubt in the store, is still resolved.
    with pytest.raises(TransactionNotFound):
        resolve(qm, "zw\u200bsp")


def test_a_one_phase_commit_of_an_id_keeps_its_outcome(qm: CoreHarness) -> None:
    tx = begin(qm, "x1")
    qm.prepare("dst", b"m", tx=tx)
    assert qm.commit(tx) == [None]
    assert resolve(qm, "x1") == [storage.Resolution.ALREADY_COMMITTED]
    with pytest.raises(InvalidArgument):
        begin(qm, "x1")


def test_only_a_transaction_with_an_id_can_be_prepared(qm: CoreHarness) -> None:
    tx = qm.begin()
    with pytest.raises(TransactionUsageError, match="global id"):
        qm.core.two_phase.prepare(tx, WALL)


def test_an_open_transaction_with_an_id_is_resolved_by_its_connection(qm: CoreHarness) -> None:
    begin(qm, "x1")
    with pytest.raises(TransactionUsageError, match="open and not prepared"):
        qm.core.two_phase.resolve(["x1"], commit=True, wall=WALL)


def test_a_queue_used_by_a_prepared_transaction_cannot_be_deleted(qm: CoreHarness) -> None:
    qm.send("src", b"a")
    moved(qm, "x1")
    for name in ("src", "dst"):
        with pytest.raises(AccessDenied, match="1 prepared transaction"):
            qm.core.queues.delete(name)
    qm.crash()
    with pytest.raises(AccessDenied):
        qm.core.queues.delete("dst")
    resolve(qm, "x1", commit=False)
    _, unit = qm.core.queues.delete("dst")
    qm.core.queues.deleted(qm.write(unit))


def test_a_delete_in_the_batch_of_a_prepare_is_refused_as_a_prepared_queue_is(
    qm: CoreHarness,
) -> None:
    """The core's own check cannot see a prepare still being written: the store
    refuses the delete, and the client hears the same as when the core refuses it."""
    qm.send("src", b"a")
    tx = begin(qm, "x1")
    assert qm.take("src", tx) is not None
    prepare_unit = qm.core.two_phase.prepare(tx, WALL)
    _, delete_unit = qm.core.queues.delete("src")  # allowed: nothing is prepared yet
    prepared, deleted = qm.store.commit([prepare_unit, delete_unit], now=WALL)
    assert qm.core.two_phase.prepared(tx, prepare_unit, prepared)[1] is None
    with pytest.raises(AccessDenied, match=r"1 prepared transaction.*qmgr tx list"):
        qm.core.queues.deleted(deleted)
    assert resolve(qm, "x1") == [COMMITTED]
    assert qm.bodies("src") == []


def test_a_prepare_in_the_batch_after_a_delete_fails_and_aborts(qm: CoreHarness) -> None:
    qm.send("src", b"a")
    src = qm.core.queue("src").queue_id
    tx = begin(qm, "x1")
    assert qm.take("src", tx) is not None
    qm.prepare("dst", b"sent", tx=tx)
    _, delete_unit = qm.core.queues.delete("src")
    prepare_unit = qm.core.two_phase.prepare(tx, WALL)
    deleted, prepared = qm.store.commit([delete_unit, prepare_unit], now=WALL)
    qm.core.queues.deleted(deleted)
    _, error = qm.core.two_phase.prepared(tx, prepare_unit, prepared)
    assert isinstance(error, QueueNotFound)
    assert qm.core.two_phase.prepared_count == 0
    assert qm.store.prepared_transactions() == []
    assert qm.bodies("dst") == []
    assert qm.core.holds.count(src) == 0
    assert len(qm.core.transactions) == 0


def test_prepare_reserves_the_quota_so_that_commit_cannot_fail(open_core: OpenCore) -> None:
    qm = open_core({"small": {"transactional": True, "quota": 300}})
    tx = begin(qm, "x1")
    qm.prepare("small", b"p" * 200, tx=tx)
    prepare(qm, tx)
    other = qm.begin()
    qm.prepare("small", b"q" * 200, tx=other)
    [error] = qm.commit(other)
    assert isinstance(error, QuotaExceeded)
    assert resolve(qm, "x1") == [COMMITTED]
    assert qm.bodies("small") == [b"p" * 200]


def test_prepared_transactions_are_bounded(open_core: OpenCore) -> None:
    qm = open_core(limits=Limits(max_prepared=1))
    prepare(qm, begin(qm, "x1"))
    with pytest.raises(LimitExceeded, match="max_prepared"):
        qm.core.two_phase.prepare(begin(qm, "x2"), WALL)


def test_prepares_being_written_count_against_the_bound(open_core: OpenCore) -> None:
    """Two connections preparing at once must not both pass the check."""
    qm = open_core(limits=Limits(max_prepared=1))
    first = begin(qm, "x1")
    unit = qm.core.two_phase.prepare(first, WALL)
    with pytest.raises(LimitExceeded, match="max_prepared"):
        qm.core.two_phase.prepare(begin(qm, "x2"), WALL)
    qm.core.two_phase.prepared(first, unit, qm.write(unit))
    assert qm.core.two_phase.prepared_count == 1
    # A prepare that failed gives its place back.
    assert resolve(qm, "x1", commit=False) == [ABORTED]
    third = begin(qm, "x3")
    unit = qm.core.two_phase.prepare(third, WALL)
    qm.core.two_phase.prepared(third, unit, RuntimeError("the batch was never written"))
    prepare(qm, begin(qm, "x4"))


def test_outcomes_are_pruned_after_their_retention(open_core: OpenCore) -> None:
    qm = open_core(limits=Limits(outcome_retention=10.0))
    prepare(qm, begin(qm, "x1"))
    resolve(qm, "x1")
    outcome = qm.write(qm.core.two_phase.prune_unit(WALL + 5))
    assert outcome.results[0] == storage.Pruned(0, True)
    outcome = qm.write(qm.core.two_phase.prune_unit(WALL + 11))
    assert outcome.results[0] == storage.Pruned(1, True)
    with pytest.raises(TransactionNotFound):
        resolve(qm, "x1")
    begin(qm, "x1")  # the id may be used again


def test_a_prepared_receive_is_reported_at_its_commit_once(qm: CoreHarness) -> None:
    qm.create("q", transactional=True)
    qm.create("admin")
    qm.send_tx("q", b"x", acknowledge=POS_RECEIVE, admin_queue="admin")
    tx = qm.core.two_phase.begin(qm, 0, qm.tick(), "g1")
    assert qm.take("q", tx) is not None
    unit = qm.core.two_phase.prepare(tx, WALL)
    qm.core.two_phase.prepared(tx, unit, qm.write(unit))
    assert classes(qm, "admin") == []
    qm.crash()
    for _ in range(2):
        unit = qm.core.two_phase.resolve(["g1"], commit=True, wall=WALL)
        qm.core.two_phase.resolved(qm.write(unit))
    assert classes(qm, "admin") == [MessageClass.ACK_RECEIVE]


def test_committing_prepared_transactions_reserves_their_bytes_in_the_budget(
    open_core: OpenCore,
) -> None:
    qm = open_core({"q": {"transactional": True}}, limits=Limits(max_uncommitted_bytes=1000))
    for xid in ("x1", "x2"):
        tx = begin(qm, xid)
        qm.prepare("q", b"m" * 600, tx=tx)
        prepare(qm, tx)
    budget = qm.core.uncommitted
    assert budget.in_use == 0  # prepared: nothing of them is in memory
    with pytest.raises(LimitExceeded, match="commit fewer at once"):
        qm.core.two_phase.reserve_for_commit(["x1", "x2"])
    reserved = qm.core.two_phase.reserve_for_commit(["x1"])
    assert budget.in_use == reserved >= 600
    qm.core.two_phase.release(reserved)
    assert budget.in_use == 0
    assert qm.core.two_phase.reserve_for_commit(["unknown"]) == 0


def test_one_prepared_transaction_larger_than_the_budget_says_to_raise_the_limit(
    open_core: OpenCore,
) -> None:
    """Committing fewer at once cannot help it: the limit must be raised (it was
    prepared under a larger one, before a restart)."""
    qm = open_core({"q": {"transactional": True}}, limits=Limits(max_uncommitted_bytes=2000))
    tx = begin(qm, "big")
    qm.prepare("q", b"m" * 1200, tx=tx)
    prepare(qm, tx)
    qm.core.uncommitted.limit = 1000
    with pytest.raises(LimitExceeded) as refused:
        qm.core.two_phase.reserve_for_commit(["big"])
    message = str(refused.value)
    assert "transaction 'big'" in message
    assert "raise the limit to at least" in message
    assert "fewer" not in message
