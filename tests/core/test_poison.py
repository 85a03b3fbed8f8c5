"""Poison handling (``qmgr.core.poison``) over a real store: aborted receives counted,
the moves to ``;retry`` and ``;poison`` at the thresholds, the retry cycles (with
explicit times), poison settings, subqueues, and moves by request between a queue and
its subqueues (``qmgr.core.moves``; dead letters moved out are in ``test_moves``)."""

from __future__ import annotations

import pytest

import storage
from qmgr.core.errors import (
    AccessDenied,
    InvalidArgument,
    InvalidName,
    QueueNotFound,
    TransactionUsageError,
)
from qmgr.core.poison import DEFAULT_SETTINGS, merge_settings
from storage import MessageCounters, PoisonSettings, QueueKind

from .conftest import OpenCore
from .harness import WALL, CoreHarness, abort_receive, flush_poison

SHORT = PoisonSettings(retry_count=1, retry_cycles=1, retry_delay=10.0)


@pytest.fixture
def h(open_core: OpenCore) -> CoreHarness:
    return open_core()


def counters(h: CoreHarness, queue: str, lookup_id: int) -> MessageCounters:
    record = h.core.queue(queue)
    return h.core.poison.counters(record.queue_id, [lookup_id]).get(lookup_id, storage.NO_COUNTERS)


def returns(h: CoreHarness, wall: float) -> int:
    """Run the retry steps due at ``wall``; how many messages came back."""
    moved = 0
    while (unit := h.core.poison.retry_step(wall)) is not None:
        [outcome] = h.store.commit([unit], now=wall)
        moved += sum(isinstance(r, storage.Moved) for r in outcome.results)
        h.core.poison.written(unit, outcome)
    return moved


# --------------------------------------------------------------------------- settings


def test_settings_merge_with_wcf_defaults() -> None:
    assert PoisonSettings(5, 2, 1800.0) == DEFAULT_SETTINGS
    assert merge_settings(None) is None
    assert merge_settings(None, retry_count=1) == PoisonSettings(1, 2, 1800.0)
    assert merge_settings(None, enabled=True) == DEFAULT_SETTINGS
    assert merge_settings(SHORT, retry_delay=3) == PoisonSettings(1, 1, 3.0)
    assert merge_settings(SHORT) == SHORT
    assert merge_settings(SHORT, enabled=False) is None
    with pytest.raises(InvalidArgument):
        merge_settings(SHORT, enabled=False, retry_count=2)
    for bad in ({"retry_count": -1}, {"retry_cycles": 1 << 32}, {"retry_delay": float("nan")}):
        with pytest.raises(InvalidArgument):
            merge_settings(None, **bad)  # type: ignore[arg-type]


def test_a_queue_gets_its_subqueues_and_settings(h: CoreHarness) -> None:
    h.create("orders", transactional=True, journal=True, poison=SHORT)
    record = h.core.queue("orders")
    assert record.poison == SHORT
    for name in ("orders;retry", "orders;poison", "DIRECT=OS:.\\private$\\orders;poison"):
        sub = h.core.queue(name)
        assert sub.kind is QueueKind.SUBQUEUE
        assert sub.parent_id == record.queue_id
        assert sub.transactional
    h.create("plain")
    assert h.core.queue("plain").poison is None
    assert h.core.queue("plain;retry").transactional is False
    record, unit = h.core.poison.settings_unit("plain", retry_count=3)
    assert h.core.queues.properties_set(h.write(unit)).poison == PoisonSettings(3, 2, 1800.0)
    with pytest.raises(AccessDenied):
        h.core.poison.settings_unit("plain;poison", retry_count=3)
    with pytest.raises(AccessDenied):
        h.core.poison.settings_unit("system$;deadxact", retry_count=3)


# --------------------------------------------------------------------------- counting


def test_an_abort_counts_and_the_message_is_back_at_once(h: CoreHarness) -> None:
    h.create("q", transactional=True)
    lookup_id = h.send("q", b"m")
    assert abort_receive(h, "q") == lookup_id
    # Visible again before the count is written; the count is known already.
    assert h.bodies("q") == [b"m"]
    assert counters(h, "q", lookup_id).abort_count == 1
    assert abort_receive(h, "q") == lookup_id
    assert counters(h, "q", lookup_id).abort_count == 2
    assert h.store.message_counters(h.core.queue("q").queue_id, [lookup_id]) == {}
    flush_poison(h)
    assert h.store.message_counters(h.core.queue("q").queue_id, [lookup_id]) == {
        lookup_id: MessageCounters(abort_count=2)
    }
    # Without poison handling nothing ever moves.
    for _ in range(10):
        abort_receive(h, "q")
    flush_poison(h)
    assert counters(h, "q", lookup_id).abort_count == 12
    assert h.bodies("q") == [b"m"]


def test_a_commit_counts_nothing_and_the_counters_go_with_the_message(h: CoreHarness) -> None:
    h.create("q", transactional=True)
    lookup_id = h.send("q", b"m")
    abort_receive(h, "q")
    flush_poison(h)
    tx = h.begin()
    h.take("q", tx)
    assert h.commit(tx) == [None]
    assert h.store.message_counters(h.core.queue("q").queue_id, [lookup_id]) == {}


def test_a_purged_message_is_not_counted(h: CoreHarness) -> None:
    h.create("q", transactional=True)
    h.send("q", b"m")
    tx = h.begin()
    h.take("q", tx)
    h.purge("q")
    h.core.abort(tx)
    assert h.core.poison.take_unit() is None


def test_an_aborted_prepared_transaction_counts(h: CoreHarness) -> None:
    h.create("q", transactional=True, poison=SHORT)
    lookup_id = h.send("q", b"m")
    tx = h.core.two_phase.begin(h, 1, h.tick(), "x1")
    h.take("q", tx)
    unit = h.core.two_phase.prepare(tx, WALL)
    h.core.two_phase.prepared(tx, unit, h.write(unit))
    _woken, _ = h.core.two_phase.resolved(
        h.write(h.core.two_phase.resolve(["x1"], commit=False, wall=WALL))
    )
    assert counters(h, "q", lookup_id).abort_count == 1
    flush_poison(h)
    assert h.bodies("q") == [b"m"]


def test_a_crash_before_the_write_loses_only_that_count(h: CoreHarness) -> None:
    h.create("q", transactional=True, poison=SHORT)
    lookup_id = h.send("q", b"m")
    abort_receive(h, "q")
    flush_poison(h)
    abort_receive(h, "q")  # the second abort passes the retry count: held for a move
    assert h.bodies("q") == []
    h.crash()
    assert h.bodies("q") == [b"m"]
    assert counters(h, "q", lookup_id).abort_count == 1
    assert h.bodies("q;retry") == []


# --------------------------------------------------------------------------- thresholds and cycles


def test_retry_count_then_retry_cycles_then_poison(h: CoreHarness) -> None:
    settings = PoisonSettings(retry_count=2, retry_cycles=2, retry_delay=10.0)
    h.create("q", transactional=True, poison=settings)
    h.send("q", b"poison")
    h.send("q", b"fine")
    attempts = 0
    now = WALL
    while h.bodies("q;poison") == []:
        assert attempts < 100
        where = {body: lookup_id for lookup_id, body in h.visible("q")}
        if b"poison" not in where:
            # Waiting in ;retry: not back a moment early, back once due.
            assert h.bodies("q;retry") == [b"poison"]
            assert returns(h, now + 9.999) == 0
            now += 10.0
            assert returns(h, now) == 1
            continue
        attempts += 1
        tx = h.begin()
        record = h.core.queue("q")
        assert h.core.take(record, lookup_id=where[b"poison"], tx=tx, now=h.tick())
        h.core.abort(tx)
        flush_poison(h, now)
    # (1 + retry_cycles) * (retry_count + 1) attempts, as WCF makes them.
    assert attempts == 3 * 3
    [(lookup_id, _)] = h.visible("q;poison")
    found = counters(h, "q;poison", lookup_id)
    assert (found.abort_count, found.move_count, found.retry_cycles) == (0, 5, 2)
    assert found.last_move_time == WALL + 20.0  # moved there after two trips of 10 s
    assert h.bodies("q") == [b"fine"]
    assert h.bodies("q;retry") == []
    assert h.store.retries_due(None, 10) == []


def test_no_retry_cycles_goes_straight_to_poison(h: CoreHarness) -> None:
    h.create("q", transactional=True, poison=PoisonSettings(0, 0, 5.0))
    h.send("q", b"m")
    abort_receive(h, "q")
    flush_poison(h)
    assert h.bodies("q;poison") == [b"m"]


def test_a_message_received_in_retry_stays_until_its_transaction_ends(h: CoreHarness) -> None:
    h.create("q", transactional=True, poison=PoisonSettings(0, 1, 5.0))
    h.send("q", b"m")
    abort_receive(h, "q")
    flush_poison(h)
    tx = h.begin()
    assert h.take("q;retry", tx) is not None
    assert returns(h, WALL + 60) == 0  # held: left alone
    h.core.abort(tx)  # an abort in ;retry counts but moves nothing
    flush_poison(h)
    assert returns(h, WALL + 60) == 1
    assert h.bodies("q") == [b"m"]


def test_a_message_gone_from_retry_leaves_no_entry(h: CoreHarness) -> None:
    h.create("q", transactional=True, journal=True, poison=PoisonSettings(0, 1, 5.0))
    h.send("q", b"m")
    abort_receive(h, "q")
    flush_poison(h)
    assert h.take("q;retry") is not None  # received from the subqueue
    assert h.bodies("q;journal") == [b"m"]  # journaled in the queue's journal
    assert len(h.store.retries_due(None, 10)) == 1
    assert returns(h, WALL + 60) == 0
    assert h.store.retries_due(None, 10) == []


# --------------------------------------------------------------------------- subqueues


def test_nothing_is_sent_to_a_subqueue(h: CoreHarness) -> None:
    h.create("q", transactional=True)
    for name in ("q;poison", "q;retry", "DIRECT=OS:.\\private$\\q;retry"):
        with pytest.raises(AccessDenied, match="nothing can be sent to a subqueue"):
            h.prepare(name, b"m")
    with pytest.raises(InvalidName, match="subqueues"):
        h.prepare("q,q;poison", b"m")
    with pytest.raises(InvalidName, match="subqueues"):
        h.prepare("DIRECT=TCP:10.1.2.3\\private$\\q;poison", b"m")


def test_deleting_a_queue_deletes_its_subqueues_and_purging_leaves_them(h: CoreHarness) -> None:
    h.create("q", transactional=True, poison=PoisonSettings(0, 0, 5.0))
    h.send("q", b"a")
    h.send("q", b"b")
    abort_receive(h, "q")
    flush_poison(h)
    assert h.purge("q") == 1
    assert h.bodies("q;poison") == [b"a"]
    with pytest.raises(AccessDenied):
        h.core.queues.delete("q;poison")
    _record, unit = h.core.queues.delete("q")
    count, gone = h.core.queues.deleted(h.write(unit))
    assert count == 1  # the poison message (the purged one was already gone)
    assert len(gone) == 4
    with pytest.raises(QueueNotFound):
        h.core.queue("q;poison")


# --------------------------------------------------------------------------- moves by request


def move(h: CoreHarness, source: str, target: str, lookup_id: int = 0) -> int:
    a, b = h.core.moves.move_queues(source, target)
    held = h.core.moves.move_one(a, b, lookup_id=lookup_id, tx=None, now=h.tick())
    assert held is not None
    taken, unit = held
    assert unit is not None
    moved, last, _, error = h.core.moves.move_done(a.queue_id, [taken], h.write(unit))
    assert (moved, error) == (1, None)
    return last


def test_moves_by_request_keep_the_message_id(h: CoreHarness) -> None:
    h.create("q")  # non-transactional: moves work the same
    h.send("q", b"a")
    h.send("q", b"b")
    [(first, _), _] = h.visible("q")
    new = move(h, "q", "q;poison", first)
    assert new == 1
    assert h.bodies("q;poison") == [b"a"]
    move(h, "q;poison", "q;retry")
    assert h.bodies("q;retry") == [b"a"]
    back = move(h, "q;retry", "q")
    assert h.bodies("q") == [b"b", b"a"]
    assert counters(h, "q", back).move_count == 3
    for source, target in (("q", "q"), ("q", "q;journal"), ("q;journal", "q"), ("q", "other")):
        with pytest.raises((InvalidArgument, QueueNotFound)):
            h.core.moves.move_queues(source, target)


def test_moving_a_whole_queue_in_steps(h: CoreHarness) -> None:
    h.create("q", transactional=True)
    for index in range(7):
        h.send("q", b"%d" % index)
    tx = h.begin()
    h.take("q", tx)  # a held message is not moved
    a, b = h.core.moves.move_queues("q", "q;poison")
    total = after = 0
    through = a.next_lookup_id - 1
    while (step := h.core.moves.move_step(a, b, through=through, after=after, limit=3)) is not None:
        assert step.unit is not None
        assert step.skipped == 0
        after = step.after
        moved, _, _, error = h.core.moves.move_done(a.queue_id, step.held, h.write(step.unit))
        assert error is None
        total += moved
    assert total == 6
    h.core.abort(tx)
    assert h.bodies("q") == [b"0"]
    assert h.bodies("q;poison") == [b"%d" % i for i in range(1, 7)]


def test_a_move_in_a_transaction_happens_at_commit_and_not_on_abort(h: CoreHarness) -> None:
    h.create("q", transactional=True, poison=SHORT)
    lookup_id = h.send("q", b"m")
    a, b = h.core.moves.move_queues("q;poison", "q")
    a, b = b, a  # q -> q;poison
    tx = h.begin()
    assert h.core.moves.move_one(a, b, lookup_id=0, tx=tx, now=h.tick()) == (lookup_id, None)
    assert h.bodies("q") == []
    h.core.abort(tx)  # not an aborted receive: nothing counted
    assert not h.core.poison.wanted
    assert h.bodies("q") == [b"m"]
    tx = h.core.two_phase.begin(h, 7, h.tick(), "moving")
    h.core.moves.move_one(a, b, lookup_id=lookup_id, tx=tx, now=h.tick())
    with pytest.raises(TransactionUsageError, match="moves messages"):
        h.core.two_phase.prepare(tx, WALL)
    h.core.abort(tx)
    tx = h.begin()
    h.core.moves.move_one(a, b, lookup_id=lookup_id, tx=tx, now=h.tick())
    assert h.commit(tx) == [None]
    assert h.bodies("q;poison") == [b"m"]
    h.create("plain")
    h.send("plain", b"p")
    p, pp = h.core.moves.move_queues("plain", "plain;poison")
    with pytest.raises(TransactionUsageError):
        h.core.moves.move_one(p, pp, lookup_id=0, tx=h.begin(), now=h.tick())
