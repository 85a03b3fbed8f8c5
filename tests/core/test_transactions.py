"""Internal transactions (``qmgr.core.transactions``): the table of open ones, by id
and global id, how each ends (commit, abort, prepare), what a doomed one
refuses, and the idle ones found by the monotonic clock."""

from __future__ import annotations

from collections.abc import Collection, Iterable

import pytest

from qmgr.core.budget import MemoryBudget
from qmgr.core.errors import InvalidArgument, QuotaExceeded, TransactionAborted
from qmgr.core.holds import Holds
from qmgr.core.transactions import OpenTransactions, Tally, Transaction, TransactionStage

from .conftest import OpenCore
from .harness import CoreHarness


class Aborts:
    """Stands for poison handling: records what aborted transactions held."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[tuple[int, int]], set[tuple[int, int]]]] = []

    def __call__(
        self, receives: Iterable[tuple[int, int]], uncounted: Collection[tuple[int, int]]
    ) -> set[int]:
        received = list(receives)
        self.calls.append((received, set(uncounted)))
        return {queue_id for queue_id, _ in received}


class Table:
    """An ``OpenTransactions`` with the state it shares, over no store (holds only
    forget here, which reads none)."""

    def __init__(self) -> None:
        self.holds = Holds(None)  # type: ignore[arg-type]
        self.budget = MemoryBudget(1000, what="messages in open transactions")
        self.tally = Tally()
        self.aborts = Aborts()
        self.open = OpenTransactions(self.holds, self.budget, self.tally, aborted=self.aborts)

    def begin(self, xid: str | None = None) -> Transaction:
        tx = self.open.begin("owner", 7, 1.0, xid)
        tx.receives.append((1, 10))
        self.holds.hold(1, 10)
        assert self.budget.try_reserve(100)
        tx.reserved_bytes = 100
        return tx


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    return open_core({"tq": {"transactional": True}})


def test_transactions_are_numbered_and_found_by_global_id() -> None:
    table = Table()
    first, second = table.begin(), table.begin("g")
    assert (first.tx_id, second.tx_id) == (1, 2)
    assert (first.client_id, first.owner, first.stage) == (7, "owner", TransactionStage.OPEN)
    assert len(table.open) == 2
    assert table.open.has_xid("g")
    assert not table.open.has_xid("h")


def test_a_commit_forgets_the_holds_and_gives_the_bytes_back() -> None:
    table = Table()
    tx = table.begin("g")
    assert table.open.end(tx, committed=True) == set()
    assert tx.stage is TransactionStage.ENDED
    assert (tx.receives, tx.reserved_bytes, table.budget.in_use) == ([], 0, 0)
    assert not table.holds.is_held(1, 10)
    assert (table.tally.commits, table.tally.aborts) == (1, 0)
    assert (len(table.open), table.open.has_xid("g")) == (0, False)
    assert table.aborts.calls == []


def test_an_abort_hands_what_it_held_to_poison_handling_once() -> None:
    table = Table()
    tx = table.begin()
    tx.moves[(1, 10)] = 2
    assert table.open.abort(tx, "idle timeout") == {1}
    assert table.aborts.calls == [([(1, 10)], {(1, 10)})]
    assert (tx.abort_reason, tx.moves, table.budget.in_use) == ("idle timeout", {}, 0)
    assert table.tally.aborts == 1
    assert table.open.abort(tx) == set()  # it ended already
    assert table.tally.aborts == 1


def test_a_prepared_transaction_leaves_its_owner_and_keeps_its_holds() -> None:
    table = Table()
    tx = table.begin("g")
    table.open.end_prepared(tx)
    assert tx.stage is TransactionStage.ENDED
    assert table.holds.is_held(1, 10)
    assert (tx.receives, table.budget.in_use, len(table.open)) == ([], 0, 0)
    assert not table.open.has_xid("g")
    assert (table.tally.commits, table.tally.aborts) == (0, 0)


def test_a_doomed_transaction_says_why_it_can_only_abort() -> None:
    tx = Transaction(tx_id=1, owner=None, client_id=4, started_at=0.0, last_activity=0.0)
    tx.check_committable()
    tx.doom(QuotaExceeded("the queue is full"))
    tx.doom(InvalidArgument("a later failure"))  # the first one is kept
    with pytest.raises(QuotaExceeded, match=r"transaction 4 was aborted because .* queue is full"):
        tx.check_committable()
    tx.abort_reason = "queue deleted"
    with pytest.raises(TransactionAborted, match="transaction 4 was aborted: queue deleted"):
        tx.check_committable()


def test_idle_transactions_are_found_by_the_monotonic_clock(qm: CoreHarness) -> None:
    tx = qm.begin()
    started = tx.last_activity
    assert qm.core.transactions.idle(started + 5, timeout=10) == []
    assert qm.core.transactions.idle(started + 11, timeout=10) == [tx]
    qm.prepare("tq", b"x", tx=tx)  # activity
    assert qm.core.transactions.idle(started + 11, timeout=10) == []
    qm.core.abort(tx, "idle timeout")
    with pytest.raises(TransactionAborted, match="idle timeout"):
        qm.core.commit(tx)


def test_a_transaction_in_which_an_operation_failed_can_only_abort(qm: CoreHarness) -> None:
    qm.send("tq", b"held")
    tx = qm.begin()
    assert qm.take("tq", tx) is not None
    tx.check_usable()  # not doomed yet
    tx.doom(InternalErrorLike("a send in it hit an internal error"))
    with pytest.raises(InternalErrorLike, match="can only abort: an earlier operation in it"):
        tx.check_usable()
    with pytest.raises(InternalErrorLike, match="aborted because an operation in it failed"):
        qm.core.commit(tx)
    qm.core.abort(tx)
    assert qm.bodies("tq") == [b"held"]


class InternalErrorLike(InvalidArgument):
    """A stand-in failure recorded on a transaction."""
