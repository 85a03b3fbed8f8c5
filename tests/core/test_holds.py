"""Held messages (``qmgr.core.holds``): passed over by every other reader, each
queue's receive start moved past a held head and back when a hold ends without a
removal, and the two ways a hold ends (released: the queue's readers wake;
removed: its journal's do)."""

from __future__ import annotations

import pytest

import storage
from qmgr.core.holds import Holds

from .conftest import OpenCore
from .harness import CoreHarness


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    return open_core({"tq": {"transactional": True, "journal": True}, "nq": {}})


def test_the_start_moves_past_a_held_head_and_back_on_release(qm: CoreHarness) -> None:
    holds = Holds(qm.store)
    assert holds.start(5) == (0, 0)
    holds.hold(5, 1, scanned_from_start=True)
    holds.hold(5, 2, scanned_from_start=True)
    holds.hold(5, 9)  # named, not scanned: the start stays
    assert holds.start(5) == (0, 3)
    assert (holds.count(5), holds.is_held(5, 9), holds.held_ids(5)) == (3, True, {1, 2, 9})
    assert holds.counts() == {5: 3}
    holds.forget(5, 1)  # removed: nothing comes back before the start
    assert holds.start(5) == (0, 3)
    holds.release([(5, 2)])  # aborted: it is free again, before the start
    assert holds.start(5) == (0, 2)
    assert holds.drop_queue(5) == [9]
    assert (holds.count(5), holds.start(5)) == (0, (0, 0))
    assert holds.counts() == {}  # only queues that hold something


def test_bands_of_a_non_transactional_queue_order_the_start(qm: CoreHarness) -> None:
    holds = Holds(qm.store)
    holds.hold(5, 4, 3, scanned_from_start=True)  # priority 4: band 3
    assert holds.start(5) == (3, 5)
    holds.hold(5, 8, 0)  # a held message of priority 7, named
    holds.release([(5, 8)])
    assert holds.start(5) == (0, 8)


def test_a_release_wakes_the_queue_unless_the_message_was_purged(qm: CoreHarness) -> None:
    ids = [qm.send("tq", body) for body in (b"a", b"b")]
    queue_id = qm.core.queue("tq").queue_id
    holds = qm.core.holds
    for lookup_id in ids:
        holds.hold(queue_id, lookup_id)
    assert holds.release([(queue_id, ids[0])]) == {queue_id}
    qm.purge("tq")
    assert holds.release([(queue_id, ids[1])]) == set()
    assert holds.release([(999, 1)]) == set()  # a queue that is gone


def test_a_removal_is_journaled_where_the_queue_keeps_a_journal(qm: CoreHarness) -> None:
    holds = qm.core.holds
    tq, nq = qm.core.queue("tq"), qm.core.queue("nq")
    assert holds.removal(tq.queue_id, 1) == storage.RemoveMessage(tq.queue_id, 1, True)
    assert holds.removal(nq.queue_id, 1) == storage.RemoveMessage(nq.queue_id, 1, False)
    journal = qm.core.queue("tq;journal")
    assert holds.removal(journal.queue_id, 1).journal is False  # copies are not copied again
    holds.hold(tq.queue_id, 1)
    assert holds.removed(tq.queue_id, [1]) == {journal.queue_id}
    assert not holds.is_held(tq.queue_id, 1)
    assert holds.removed(nq.queue_id, []) == set()


def test_holding_through_a_lookup_id_takes_only_free_messages(qm: CoreHarness) -> None:
    ids = [qm.send("tq", bytes([i])) for i in range(5)]
    queue_id = qm.core.queue("tq").queue_id
    holds = qm.core.holds
    holds.hold(queue_id, ids[1])
    assert holds.hold_through(queue_id, through=ids[3], limit=2) == [ids[0], ids[2]]
    assert holds.hold_through(queue_id, through=ids[3], limit=10) == [ids[3]]
    assert holds.hold_through(queue_id, through=ids[3], limit=10) == []
    assert holds.count(queue_id) == 4


def test_receives_skip_held_messages_without_walking_them(qm: CoreHarness) -> None:
    """A receive starts past the messages held at the head, so its cost does
    not grow with the number of transactions holding messages there."""
    for index in range(50):
        qm.send("tq", bytes([index]))
    starts: list[int] = []
    first_fifo = qm.store.first_fifo

    def spy(queue_id: int, *, start: int, skip: object) -> object:
        starts.append(start)
        return first_fifo(queue_id, start=start, skip=skip)  # type: ignore[arg-type]

    qm.store.first_fifo = spy  # type: ignore[method-assign,assignment]
    holders = [qm.begin() for _ in range(40)]
    for tx in holders:
        assert qm.take("tq", tx) is not None
    # Each receive began exactly at the first free message (the first one at
    # the queue's start).
    assert starts == [0, *range(2, 41)]
    qm.core.abort(holders[10])  # message 11 is free again
    assert qm.take("tq") == (11, bytes([10]))
    assert starts[-1] == 11


def test_a_message_arriving_ahead_of_the_receive_position_is_still_found(
    qm: CoreHarness,
) -> None:
    qm.send("nq", b"low", priority=1)
    held = qm.core.take(qm.core.queue("nq"), tx=None, now=qm.tick())
    assert held is not None
    qm.send("nq", b"high", priority=6)
    assert qm.take("nq") == (2, b"high")
