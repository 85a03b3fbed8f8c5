"""The engine (``qmgr.core.engine``), scenario by scenario, on a real temporary store:
transactions committed and aborted, sends and their checks, receives and holds."""

from __future__ import annotations

import uuid

import pytest

import storage
from qmgr.core.engine import Limits
from qmgr.core.errors import (
    AccessDenied,
    InvalidArgument,
    InvalidName,
    LimitExceeded,
    MessageTooLarge,
    QueueExists,
    QueueNotFound,
    QuotaExceeded,
    TransactionTooLarge,
    TransactionUsageError,
)
from qmgr.core.outgoing import EntryOrigin, decode_entry
from qmgr.core.sends import SendMode
from wire import MessageProperties
from wire.client import MAX_MESSAGE_BODY

from .conftest import OpenCore
from .harness import WALL, CoreHarness


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    return open_core(
        {"tq": {"transactional": True, "journal": True}, "nq": {}},
        limits=Limits(max_transaction_operations=5),
    )


def test_held_messages_are_invisible_and_come_back_in_place_on_abort(qm: CoreHarness) -> None:
    ids = [qm.send("tq", body) for body in (b"a", b"b", b"c")]
    tx = qm.begin()
    assert qm.take("tq", tx) == (ids[0], b"a")
    assert qm.take("tq", tx) == (ids[1], b"b")
    assert qm.visible("tq") == [(ids[2], b"c")]
    assert qm.core.holds.count(qm.core.queue("tq").queue_id) == 2
    woken = qm.core.abort(tx)
    assert woken == {qm.core.queue("tq").queue_id}
    assert qm.visible("tq") == [(ids[0], b"a"), (ids[1], b"b"), (ids[2], b"c")]
    # The next receive starts again at the head.
    assert qm.take("tq") == (ids[0], b"a")


def test_commit_makes_sends_visible_at_once_in_order_with_consecutive_ids(qm: CoreHarness) -> None:
    tx = qm.begin()
    for body in (b"1", b"2", b"3"):
        qm.prepare("tq", body, tx=tx)
    assert qm.visible("tq") == []
    assert qm.commit(tx) == [None]
    seen = qm.visible("tq")
    assert [body for _, body in seen] == [b"1", b"2", b"3"]
    first = seen[0][0]
    assert [lookup_id for lookup_id, _ in seen] == [first, first + 1, first + 2]


def test_commit_removes_what_it_received_and_journals_it(qm: CoreHarness) -> None:
    qm.send("tq", b"keep a copy")
    tx = qm.begin()
    assert qm.take("tq", tx) is not None
    assert qm.commit(tx) == [None]
    assert qm.visible("tq") == []
    assert qm.bodies("tq;journal") == [b"keep a copy"]


def test_a_failing_transaction_does_not_spoil_its_batch_and_says_why(
    open_core: OpenCore,
) -> None:
    qm = open_core(
        {"small": {"transactional": True, "quota": 10}, "other": {"transactional": True}}
    )
    too_much, fine = qm.begin(), qm.begin()
    qm.prepare("small", b"x" * 6, tx=too_much)
    qm.prepare("small", b"y" * 6, tx=too_much)
    qm.prepare("other", b"z", tx=fine)
    errors = qm.commit(too_much, fine)
    # The quota error is reported as what it is (not as a generic abort).
    assert isinstance(errors[0], QuotaExceeded)
    assert "quota" in errors[0].message
    assert errors[1] is None
    assert qm.visible("small") == []
    assert qm.bodies("other") == [b"z"]
    assert qm.core.uncommitted.in_use == 0


def test_a_single_message_send_the_store_refuses_counts_as_an_abort(
    open_core: OpenCore,
) -> None:
    """As the same send in a transaction of its own would: the metrics and
    ``qmgr status`` count every single-message transaction one way or the other."""
    qm = open_core({"small": {"transactional": True, "quota": 10}})
    qm.send("small", b"x" * 6)
    with pytest.raises(QuotaExceeded):
        qm.send("small", b"y" * 6)
    assert (qm.core.tally.commits, qm.core.tally.aborts) == (1, 1)


def test_msmq_transaction_usage_rules(qm: CoreHarness) -> None:
    tx = qm.begin()
    with pytest.raises(TransactionUsageError):
        qm.prepare("nq", b"x", tx=tx)
    with pytest.raises(TransactionUsageError):
        qm.prepare("tq", b"x", mode=SendMode.NONE)
    with pytest.raises(TransactionUsageError):
        qm.prepare("nq", b"x", mode=SendMode.SINGLE)
    # A multiple-element send is not refused for a mixture (seed 000): the copy
    # for the queue that does not suit it is dead-lettered (tests/core/test_lists.py).
    with pytest.raises(TransactionUsageError):
        qm.take("nq", tx)
    with pytest.raises(InvalidArgument):
        qm.core.check_receive(qm.core.queue("tq"), tx, peek=True)
    # Transactional messages are sent with priority 0 and recoverable delivery.
    prepared = qm.prepare("tq", b"x", priority=7, delivery=0)
    assert prepared is not None
    assert prepared.transactional
    assert prepared.unit is not None
    [op] = prepared.unit.ops
    assert isinstance(op, storage.AppendMessage)
    assert op.priority == 0


def test_a_transaction_cannot_receive_what_it_has_not_committed(qm: CoreHarness) -> None:
    tx = qm.begin()
    qm.prepare("tq", b"mine", tx=tx)
    assert qm.take("tq", tx) is None


def test_priority_orders_non_transactional_queues_only(qm: CoreHarness) -> None:
    for priority in (1, 7, 3, 7):
        qm.send("nq", bytes([priority]), priority=priority)
    order = [qm.take("nq") for _ in range(4)]
    assert [found[1] for found in order if found] == [b"\x07", b"\x07", b"\x03", b"\x01"]
    for priority in (1, 7):
        qm.send("tq", bytes([priority]), priority=priority)
    assert qm.bodies("tq") == [b"\x01", b"\x07"]


def test_bad_requests_are_refused_with_typed_errors(qm: CoreHarness) -> None:
    cases: list[tuple[type[Exception], dict[str, object]]] = [
        (QueueNotFound, {"queue": "missing"}),
        (InvalidName, {"queue": "bad,,name"}),
        (
            InvalidArgument,
            {"queue": "DIRECT=TCP:10.9.8.7\\private$\\far", "label": "\U0001f600" * 130},
        ),
        (AccessDenied, {"queue": "system$;deadletter"}),
        (AccessDenied, {"queue": "tq;journal"}),
        (MessageTooLarge, {"queue": "tq", "body": b"x" * (MAX_MESSAGE_BODY + 1)}),
        (InvalidArgument, {"queue": "nq", "priority": 8}),
        (InvalidArgument, {"queue": "nq", "delivery": 2}),
        (InvalidArgument, {"queue": "nq", "acknowledge": 1}),
        (InvalidArgument, {"queue": "nq", "journal": 4}),
        (InvalidArgument, {"queue": "nq", "label": "x" * 251}),
        (InvalidName, {"queue": "nq", "admin_queue": "DIRECT=FOO:x"}),
    ]
    for error, fields in cases:
        queue = str(fields.pop("queue"))
        with pytest.raises(error):
            qm.prepare(queue, **fields)  # type: ignore[arg-type]
    with pytest.raises(QueueExists):
        qm.create("TQ")
    with pytest.raises(InvalidName):
        qm.core.queues.create("bad$", wall=WALL)
    with pytest.raises(AccessDenied):
        qm.core.queues.delete("system$;deadxact")


def test_a_send_to_another_queue_manager_goes_to_its_outgoing_queue(qm: CoreHarness) -> None:
    tx = qm.begin()
    qm.prepare("tq,DIRECT=TCP:10.9.8.7:1901\\private$\\Far", b"both", tx=tx)
    ops = qm.core.commit(tx).ops
    assert isinstance(ops[0], storage.AppendMessage)
    remote = ops[1]
    assert isinstance(remote, storage.AppendOutgoing)
    assert remote.name == "outgoing$;tcp:10.9.8.7:1901\\far"
    assert remote.display_name == "DIRECT=TCP:10.9.8.7:1901\\private$\\far"
    entry = decode_entry(b"".join(bytes(part) for part in remote.payload))
    assert entry.origin is EntryOrigin.LOCAL
    assert entry.transactional
    assert MessageProperties.from_bytes(entry.data).body == b"both"


def test_transactions_are_bounded(qm: CoreHarness) -> None:
    tx = qm.begin()
    for _ in range(5):
        qm.prepare("tq", b"x", tx=tx)
    with pytest.raises(TransactionTooLarge, match=r"it can only abort; put less in each"):
        qm.prepare("tq", b"x", tx=tx)


def test_the_daemon_wide_budget_bounds_uncommitted_sends(open_core: OpenCore) -> None:
    qm = open_core({"q": {"transactional": True}}, limits=Limits(max_uncommitted_bytes=4096))
    first, second = qm.begin(), qm.begin()
    qm.prepare("q", b"x" * 1500, tx=first)
    qm.prepare("q", b"x" * 1500, tx=second)
    with pytest.raises(LimitExceeded, match="retry later"):
        qm.prepare("q", b"x" * 1500, tx=first)
    qm.core.abort(second)
    qm.prepare("q", b"x" * 1500, tx=first)  # its bytes came back to the budget
    assert qm.commit(first) == [None]
    assert qm.core.uncommitted.in_use == 0


def test_a_multiple_element_send_puts_one_copy_on_each_queue(qm: CoreHarness) -> None:
    qm.create("tq2", transactional=True)
    tx = qm.begin()
    qm.prepare("tq,tq2,TQ", b"both", tx=tx)
    assert qm.commit(tx) == [None]
    assert qm.bodies("tq") == [b"both"]
    assert qm.bodies("tq2") == [b"both"]


def test_a_message_from_another_queue_manager_keeps_its_id(qm: CoreHarness) -> None:
    sender = uuid.uuid4()
    foreign = MessageProperties(body=b"from afar", destination="tq").stamp(
        source_qm=sender, ordinal=77, sent_time=WALL, transactional=True
    )
    queue = qm.core.queue("tq")
    qm.write(storage.Unit((storage.AppendMessage(queue.queue_id, foreign.raw, 0, 9),)))
    found = qm.core.take(queue, tx=None, now=qm.tick())
    assert found is not None
    received = MessageProperties.from_bytes(storage.message_payload(found[1]))
    assert received.source_qm == sender
    assert received.message_id == f"{{{sender}}}\\77"
