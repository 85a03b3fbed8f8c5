"""Moves by request out of the dead-letter queues (``qmgr.core.moves``) over a real store:
into a queue named, or each message back to the queue it was sent to, as an ordinary
message of it again; what stays, what is refused, and who may. Moves between a queue and
its subqueues are in ``test_poison``."""

from __future__ import annotations

import pytest

import storage
from qmgr.core import names
from qmgr.core.errors import (
    AccessDenied,
    InvalidArgument,
    QueueNotFound,
    TransactionUsageError,
)
from qmgr.core.moves import Denied
from storage import QueueRecord, Unit, message_deadline
from wire import MessageClass, MessageProperties

from .conftest import OpenCore
from .harness import DEADLETTER, SOURCE, WALL, CoreHarness, expire, messages


@pytest.fixture
def h(open_core: OpenCore) -> CoreHarness:
    return open_core({"q": {"transactional": True}, "plain": {}, "other": {"transactional": True}})


def dead_letter(
    h: CoreHarness,
    destination: str,
    body: bytes = b"dead",
    *,
    transactional: bool = False,
    ours: bool = True,
    priority: int = 3,
) -> int:
    """Keep a message sent to ``destination`` in the dead-letter queue of its kind,
    as a message that died there would be; its lookup id there."""
    message = MessageProperties(
        body=body,
        destination=destination,
        label="died",
        priority=0 if transactional else priority,
        source_qm=h.store.qm_guid if ours else SOURCE,
        ordinal=h.core.ordinals.take(),
        transactional=transactional,
        sent_time=WALL,
    )
    outcome = h.write(Unit((h.core.outcomes.dead_letter(message, MessageClass.NACK_BAD_DST_Q),)))
    [appended] = outcome.results
    assert isinstance(appended, storage.Appended)
    return appended.lookup_id


def dead_ids(h: CoreHarness, queue: str) -> list[int]:
    return [lookup_id for lookup_id, _ in h.store.read_range(h.core.queue(queue).queue_id)]


def move(
    h: CoreHarness, source: str, target: str, lookup_id: int = 0, denied: Denied | None = None
) -> tuple[int, int]:
    """Move one message outside a transaction: ``(moved, its new lookup id)``."""
    a, b = h.core.moves.move_queues(source, target)
    held = h.core.moves.move_one(a, b, lookup_id=lookup_id, tx=None, now=h.tick(), denied=denied)
    assert held is not None
    taken, unit = held
    assert unit is not None
    moved, last, _, error = h.core.moves.move_done(a.queue_id, [taken], h.write(unit))
    assert error is None
    return moved, last


def move_all(
    h: CoreHarness, source: str, target: str, limit: int = 2, denied: Denied | None = None
) -> tuple[int, int]:
    """Move every message in steps of ``limit``: ``(moved, passed over)``."""
    a, b = h.core.moves.move_queues(source, target)
    through, after = a.next_lookup_id - 1, 0
    moved = skipped = 0
    while (
        step := h.core.moves.move_step(
            a, b, through=through, after=after, limit=limit, denied=denied
        )
    ) is not None:
        assert step.after > after
        after = step.after
        skipped += step.skipped
        if step.unit is not None:
            done, _, _, error = h.core.moves.move_done(a.queue_id, step.held, h.write(step.unit))
            assert error is None
            moved += done
    return moved, skipped


def test_an_expired_message_goes_back_with_its_id_as_an_ordinary_message(h: CoreHarness) -> None:
    h.send_tx(
        "q",
        b"late",
        label="order 7",
        correlation_id=b"c" * 20,
        app_specific=42,
        time_to_be_received=30,
        journal=DEADLETTER,
    )
    assert expire(h, WALL + 30) == 1
    [dead] = messages(h, names.DEADXACT)
    assert dead.message_class == MessageClass.NACK_RECEIVE_TIMEOUT
    [lookup_id] = dead_ids(h, names.DEADXACT)
    assert h.core.moves.move_queues(names.DEADXACT, "")[1] is None
    moved, new = move(h, names.DEADXACT, "", lookup_id)
    assert moved == 1
    [back] = messages(h, "q")
    assert back.message_class == MessageClass.NORMAL
    assert back == dead.replace(message_class=MessageClass.NORMAL)  # every other byte as it was
    assert (back.message_id, back.body, back.label, back.correlation_id, back.app_specific) == (
        dead.message_id,
        b"late",
        "order 7",
        b"c" * 20,
        42,
    )
    assert back.transactional
    assert messages(h, names.DEADXACT) == []
    record = h.core.queue("q")
    counters = h.core.poison.counters(record.queue_id, [new])[new]
    assert (counters.abort_count, counters.move_count, counters.last_move_time) == (0, 1, WALL)
    # Its time to be received is not applied again: it waits to be received.
    stored = h.store.read_message(record.queue_id, new)
    assert stored is not None
    assert message_deadline(stored) is None
    assert expire(h, WALL + 10_000) == 0
    assert h.take("q") == (new, b"late")


def test_a_dead_letter_goes_into_a_queue_named_of_its_kind(h: CoreHarness) -> None:
    first = dead_letter(h, "q", b"a", transactional=True)
    dead_letter(h, "gone", b"b", transactional=True)  # its own queue is no more
    moved, _ = move(h, names.DEADXACT, "other", first)
    assert moved == 1
    assert [m.message_class for m in messages(h, "other")] == [MessageClass.NORMAL]
    assert move_all(h, "DIRECT=OS:.\\system$;deadxact", "other") == (1, 0)
    assert [m.body for m in messages(h, "other")] == [b"a", b"b"]
    # What a dead letter may not go into, and a target left out elsewhere.
    refused = {
        (names.DEADXACT, "plain"): "holds transactional messages, which go only to transactional",
        (names.DEADLETTER, "q"): "holds non-transactional messages",
        (names.DEADLETTER, "plain;poison"): "own subqueues",
        (names.DEADLETTER, "plain;journal"): "into an application queue",
        (names.DEADLETTER, names.DEADXACT): "into an application queue",
        ("plain", names.DEADLETTER): "into an application queue",
        ("plain", ""): "must name its target",
        ("plain;poison", ""): "must name its target",
    }
    for (source, target), why in refused.items():
        with pytest.raises(InvalidArgument, match=why):
            h.core.moves.move_queues(source, target)


def test_each_dead_letter_goes_back_to_its_own_queue_or_stays(h: CoreHarness) -> None:
    h.create("gone")
    assert h.write(h.core.lists.create("team", ["plain", "other"])).error is None
    stays = {
        dead_letter(h, "DIRECT=TCP:10.0.0.5\\private$\\far"): "on another queue manager",
        dead_letter(h, "DL=team"): "a distribution list or several queues",
        dead_letter(h, "plain,other"): "a distribution list or several queues",
        dead_letter(h, "gone"): "its destination 'gone' names no queue here",
        dead_letter(h, "q"): "it is non-transactional and its queue 'q' is transactional",
        dead_letter(h, "plain;journal"): "not an application queue",
        dead_letter(h, ""): "names no destination",
    }
    dead_letter(h, "plain", b"1")
    dead_letter(h, "DIRECT=OS:.\\private$\\PLAIN", b"2")
    dead_letter(h, "DIRECT=TCP:somewhere:1801\\private$\\plain", b"3", ours=False)
    assert h.write(h.core.queues.delete("gone")[1]).error is None
    source, _ = h.core.moves.move_queues(names.DEADLETTER, "")
    for lookup_id, why in stays.items():
        error = QueueNotFound if "gone" in why else InvalidArgument
        with pytest.raises(error, match=f"message {lookup_id} of .* cannot go back: .*{why}"):
            h.core.moves.move_one(source, None, lookup_id=lookup_id, tx=None, now=h.tick())
    assert move_all(h, names.DEADLETTER, "") == (3, len(stays))
    assert [(m.body, m.message_class) for m in messages(h, "plain")] == [
        (b"1", MessageClass.NORMAL),
        (b"2", MessageClass.NORMAL),
        (b"3", MessageClass.NORMAL),
    ]
    assert dead_ids(h, names.DEADLETTER) == list(stays)
    # Nothing is held: every one that stayed may be received.
    assert h.core.holds.count(h.core.queue(names.DEADLETTER).queue_id) == 0
    assert move_all(h, names.DEADLETTER, "") == (0, len(stays))


def test_a_router_takes_a_message_from_elsewhere_back_by_its_host(h: CoreHarness) -> None:
    elsewhere = dead_letter(h, "DIRECT=TCP:somewhere:1801\\private$\\plain", ours=False)
    here = dead_letter(h, "DIRECT=TCP:127.0.0.1:1801\\private$\\plain", b"here", ours=False)
    h.core.moves.router = True
    with pytest.raises(InvalidArgument, match="is not a queue of this queue manager"):
        move(h, names.DEADLETTER, "", elsewhere)
    assert move(h, names.DEADLETTER, "", here)[0] == 1
    h.core.moves.router = False
    assert move(h, names.DEADLETTER, "", elsewhere)[0] == 1


def test_a_queue_the_mover_may_not_send_to_keeps_its_dead_letters(h: CoreHarness) -> None:
    asked: list[str] = []

    def denied(target: QueueRecord) -> str | None:
        asked.append(target.name)
        return "'carol' may not send on queue 'plain'" if target.name == "plain" else None

    refused = dead_letter(h, "plain", b"not yours")
    with pytest.raises(AccessDenied, match="may not send on queue 'plain'"):
        move(h, names.DEADLETTER, "", refused, denied=denied)
    h.create("free")
    dead_letter(h, "free", b"yours")
    assert move_all(h, names.DEADLETTER, "", denied=denied) == (1, 1)
    assert [m.body for m in messages(h, "free")] == [b"yours"]
    assert [m.body for m in messages(h, names.DEADLETTER)] == [b"not yours"]
    assert asked == ["plain", "plain", "free"]
    # The refused one was never held: it moves for someone who may.
    assert move(h, names.DEADLETTER, "", refused)[0] == 1


def test_a_held_dead_letter_is_not_moved_twice(h: CoreHarness) -> None:
    first = dead_letter(h, "q", b"held", transactional=True)
    dead_letter(h, "q", b"free", transactional=True)
    tx = h.begin()
    assert h.take(names.DEADXACT, tx) == (first, b"held")
    source, _ = h.core.moves.move_queues(names.DEADXACT, "")
    assert h.core.moves.move_one(source, None, lookup_id=first, tx=None, now=h.tick()) is None
    assert move_all(h, names.DEADXACT, "") == (1, 0)  # held: not looked at, not passed over
    assert [m.body for m in messages(h, "q")] == [b"free"]
    h.core.abort(tx)
    assert move(h, names.DEADXACT, "")[0] == 1
    assert dead_ids(h, names.DEADXACT) == []


def test_a_dead_letter_moves_back_in_a_transaction_at_its_commit(h: CoreHarness) -> None:
    lookup_id = dead_letter(h, "q", b"m", transactional=True)
    source, _ = h.core.moves.move_queues(names.DEADXACT, "")
    tx = h.begin()
    held = h.core.moves.move_one(source, None, lookup_id=0, tx=tx, now=h.tick())
    assert held == (lookup_id, None)
    h.core.abort(tx)  # stays, not counted as an aborted receive
    assert not h.core.poison.wanted
    assert dead_ids(h, names.DEADXACT) == [lookup_id]
    tx = h.begin()
    h.core.moves.move_one(source, None, lookup_id=lookup_id, tx=tx, now=h.tick())
    assert h.commit(tx) == [None]
    [back] = messages(h, "q")
    assert (back.body, back.message_class) == (b"m", MessageClass.NORMAL)
    dead_letter(h, "plain")
    plain_dead, _ = h.core.moves.move_queues(names.DEADLETTER, "")
    with pytest.raises(TransactionUsageError):
        h.core.moves.move_one(plain_dead, None, lookup_id=0, tx=h.begin(), now=h.tick())


def test_receives_see_a_message_moved_ahead_of_where_they_start(h: CoreHarness) -> None:
    h.send("plain", b"low 1", priority=1)
    h.send("plain", b"low 2", priority=1)
    plain = h.core.queue("plain")
    # Held as by a receive whose removal is on its way: receives now start past it.
    held = h.core.take(plain, tx=None, now=h.tick())
    assert held is not None
    dead_letter(h, "plain", b"urgent", priority=7)
    assert move(h, names.DEADLETTER, "")[0] == 1
    found = h.take("plain")
    assert found is not None
    assert found[1] == b"urgent"
    h.core.holds.release([(plain.queue_id, held[0])])
