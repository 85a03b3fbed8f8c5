"""The store operations that put a stamped message where its send sends it
(``qmgr.core.send_copies``): one per target, in target order."""

from __future__ import annotations

import uuid

import pytest

import storage
from qmgr.core import names
from qmgr.core.addressing import MissingTarget, Target
from qmgr.core.outgoing import EntryOrigin, RemoteDestination, decode_entry
from qmgr.core.send_copies import copies_of
from wire import MessageClass, MessageProperties

from .conftest import OpenCore
from .harness import NEG_ARRIVAL, WALL, CoreHarness

FAR = RemoteDestination("TCP", "10.9.8.7", 1801, "far")


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    return open_core({"tq": {"transactional": True}, "nq": {}, "admin": {}})


def stamped(transactional: bool, **fields: object) -> MessageProperties:
    message = MessageProperties(body=b"body", **fields)  # type: ignore[arg-type]
    return message.stamp(
        source_qm=uuid.UUID(int=1),
        ordinal=5,
        sent_time=WALL,
        transactional=transactional,
    )


def copies(
    qm: CoreHarness, message: MessageProperties, targets: list[Target], *, fans_out: bool = False
) -> list[storage.AppendMessage | storage.AppendOutgoing]:
    return copies_of(
        message,
        targets,
        transactional=message.transactional,
        fans_out=fans_out,
        outcomes=qm.core.outcomes,
        wall=WALL,
    )


def test_a_copy_per_local_queue_with_its_deadline(qm: CoreHarness) -> None:
    tq = qm.core.queue("tq")
    [plain] = copies(qm, stamped(True), [tq])
    assert plain == storage.AppendMessage(tq.queue_id, plain.payload, 0, 4)
    assert plain.deadline is None
    [timed] = copies(qm, stamped(True, time_to_be_received=30, time_to_reach_queue=10), [tq])
    assert isinstance(timed, storage.AppendMessage)
    assert timed.deadline == WALL + 30


def test_a_copy_for_another_queue_manager_waits_in_its_outgoing_queue(qm: CoreHarness) -> None:
    message = stamped(False, delivery=1, time_to_be_received=30, time_to_reach_queue=10)
    [entry] = copies(qm, message, [FAR])
    assert isinstance(entry, storage.AppendOutgoing)
    assert (entry.name, entry.display_name) == (FAR.outgoing_name, FAR.display_name)
    assert entry.deadline == WALL + 10  # on its way: its time to reach the queue counts
    decoded = decode_entry(b"".join(bytes(part) for part in entry.payload))
    assert (decoded.origin, decoded.transactional, decoded.recoverable) == (
        EntryOrigin.LOCAL,
        False,
        True,
    )
    assert bytes(decoded.data) == message.raw


def test_a_fan_out_refuses_the_copies_that_do_not_suit_their_queue(qm: CoreHarness) -> None:
    tq, nq = qm.core.queue("tq"), qm.core.queue("nq")
    message = stamped(True, acknowledge=NEG_ARRIVAL, admin_queue="admin")
    ops = copies(qm, message, [tq, nq, MissingTarget("gone"), FAR], fans_out=True)
    deadxact = qm.core.queue(names.DEADXACT).queue_id
    admin = qm.core.queue("admin").queue_id
    assert [(type(op).__name__, getattr(op, "queue_id", None)) for op in ops] == [
        ("AppendMessage", tq.queue_id),
        ("CountedAppend", deadxact),  # nq refuses it: NACK_NOT_TRANSACTIONAL_Q
        ("AppendMessage", admin),
        ("CountedAppend", deadxact),  # gone: NACK_BAD_DST_Q
        ("AppendMessage", admin),
        ("AppendOutgoing", None),
    ]
    refused = [
        MessageProperties.from_bytes(op.payload).message_class
        for op in ops
        if isinstance(op, storage.AppendMessage) and op.queue_id == deadxact
    ]
    assert refused == [MessageClass.NACK_NOT_TRANSACTIONAL_Q, MessageClass.NACK_BAD_DST_Q]
