"""A message's fate found by its id (``qmgr.core.trace``): what the scan looks for,
and what each record it finds says about the message."""

from __future__ import annotations

import re
import uuid

import pytest

import storage
import wire
from qmgr.core import names
from qmgr.core.arrivals import Arrivals
from qmgr.core.errors import InvalidArgument
from qmgr.core.final_acks import final_ack_note, final_ack_op, passed_on_final_ack_op
from qmgr.core.names import LocalIdentity
from qmgr.core.outgoing import decode_entry
from qmgr.core.trace import Finding, Tracer, parse_message_id
from wire import MessageClass, MessageProperties

from .conftest import OpenCore
from .harness import DEADLETTER, NEG_RECEIVE, POS_ARRIVAL, SOURCE, WALL, CoreHarness, expire

GUID = uuid.UUID("6f9619ff-8b86-d011-b42d-00c04fc964ff")


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    return open_core({"q": {"transactional": True, "journal": True}, "admin": {}})


def trace(
    qm: CoreHarness, message_id: str, hops: dict[int, str] | None = None, **options: object
) -> list[Finding]:
    """Scan the whole store for ``message_id``, as the daemon does in steps."""
    source, ordinal = parse_message_id(message_id)
    tracer = Tracer(qm.store)
    key = tracer.key(source, ordinal)
    scanned, left = qm.store.scan_messages(tracer.queues(), select=tracer.select(key), limit=100)
    assert left == []
    return tracer.findings(source, ordinal, scanned, hops or {}, **options)  # type: ignore[arg-type]


def test_a_message_id_is_a_guid_and_an_ordinal() -> None:
    assert parse_message_id(f"{{{GUID}}}\\42") == (GUID, 42)
    assert parse_message_id(f" {GUID}\\4294967295 ") == (GUID, 0xFFFFFFFF)
    for text in ("", "42", f"{{{GUID}}}", f"{{{GUID}}}\\4294967296", "{not-a-guid}\\1"):
        with pytest.raises(InvalidArgument, match="is not a message id"):
            parse_message_id(text)


def test_a_waiting_message_and_its_acknowledgment(qm: CoreHarness) -> None:
    qm.send_tx("q", b"x", acknowledge=POS_ARRIVAL, admin_queue="admin")
    [(_, stored)] = qm.store.read_range(qm.core.queue("q").queue_id, limit=10)
    message_id = MessageProperties.from_bytes(storage.message_payload(stored)).message_id
    found = trace(qm, message_id)
    assert sorted((f.kind, f.place, f.message_class) for f in found) == [
        ("acknowledgment", "admin", MessageClass.ACK_REACH_QUEUE),
        ("queue", "q", 0),
    ]
    # Seen through a principal's rights: only what is in the queues it may peek.
    visible = trace(qm, message_id, visible=lambda queue: queue.name == "q")
    assert [f.kind for f in visible] == ["queue"]


def test_a_received_message_is_in_its_journal_and_a_dead_letter_in_its_queue(
    qm: CoreHarness,
) -> None:
    qm.send_tx("q", b"x")
    qm.send_tx("q", b"y", journal=DEADLETTER, time_to_be_received=5)
    stored = [r for _, r in qm.store.read_range(qm.core.queue("q").queue_id, limit=10)]
    received, expiring = (MessageProperties.from_bytes(storage.message_payload(r)) for r in stored)
    assert qm.take("q") is not None
    assert [(f.kind, f.place) for f in trace(qm, received.message_id)] == [("journal", "q;journal")]
    expire(qm, WALL + 5)
    [dead] = trace(qm, expiring.message_id)
    assert (dead.kind, dead.place, dead.message_class) == (
        "dead-letter",
        names.DEADXACT,
        MessageClass.NACK_RECEIVE_TIMEOUT,
    )


def test_one_of_ours_on_its_way_and_its_copy_awaiting_confirmation(qm: CoreHarness) -> None:
    far = "DIRECT=TCP:10.9.9.9:1801\\private$\\orders"
    qm.send_tx(
        far,
        b"x",
        journal=DEADLETTER,
        acknowledge=NEG_RECEIVE,
        admin_queue="admin",
        time_to_be_received=60,
    )
    [record] = [r for r in qm.core.queues.all() if r.kind is storage.QueueKind.OUTGOING]
    [(_, stored)] = qm.store.read_range(record.queue_id, limit=10)
    entry = decode_entry(storage.message_payload(stored))
    message_id = MessageProperties.from_bytes(entry.data.tobytes()).message_id
    found = {f.kind: f for f in trace(qm, message_id, {record.queue_id: "10.9.9.9:1801"})}
    assert found["outgoing"].place == "DIRECT=TCP:10.9.9.9\\private$\\orders"
    assert found["outgoing"].next_hop == "10.9.9.9:1801"
    # Sent or not, the store cannot tell: only that it is not acknowledged yet.
    assert found["outgoing"].detail.startswith("in the outgoing queue, not yet acknowledged;")
    # The deadline in UTC, as every time qmgr shows (WALL is 2023-11-14T22:13:20Z).
    assert re.fullmatch(
        r"copy kept for the confirmation process: not delivered yet, "
        r"until 2023-11-14T22:1\d:\d\dZ",
        found["awaiting-confirmation"].detail,
    ), found["awaiting-confirmation"].detail
    assert set(found) == {"outgoing", "awaiting-confirmation"}


@pytest.mark.parametrize(
    ("host", "next_hop"),
    [("10.9.9.9", "10.9.9.9:1801"), ("[2001:db8::9]", "[2001:db8::9]:1801")],
)
def test_a_delivered_copy_names_the_queue_manager_to_ask_next(
    qm: CoreHarness, host: str, next_hop: str
) -> None:
    qm.send_tx(
        f"DIRECT=TCP:{host}:1801\\private$\\orders",
        b"x",
        journal=DEADLETTER,
        acknowledge=NEG_RECEIVE,
        admin_queue="admin",
    )
    [record] = [r for r in qm.core.queues.all() if r.kind is storage.QueueKind.OUTGOING]
    [(_, stored)] = qm.store.read_range(record.queue_id, limit=10)
    entry = decode_entry(storage.message_payload(stored))
    message = MessageProperties.from_bytes(entry.data.tobytes())
    op = qm.core.confirmations.delivered([(message, record.name)])
    assert op is not None
    assert qm.write(storage.Unit((op,))).error is None
    found = {f.kind: f for f in trace(qm, message.message_id)}
    assert "delivered" in found["awaiting-confirmation"].detail
    assert found["awaiting-confirmation"].next_hop == next_hop


def test_a_message_id_nobody_has_finds_nothing(qm: CoreHarness) -> None:
    assert trace(qm, f"{{{GUID}}}\\9") == []


def relayed_packet(
    ordinal: int, *, source: uuid.UUID = GUID, transactional: bool
) -> wire.UserMessage:
    """A message from ``source`` for a queue on another queue manager, as it arrives at a router."""
    message = MessageProperties(body=b"body", label="l").stamp(
        source_qm=source, ordinal=ordinal, sent_time=1_700_000_000.0, transactional=transactional
    )
    header = (
        wire.TransactionHeader(
            sequence_id=wire.TxSequenceId(ordinal=1, timestamp=5),
            sequence_number=ordinal,
            previous_sequence_number=ordinal - 1,
        )
        if transactional
        else None
    )
    return wire.message_to_packet(
        message,
        destination=wire.DirectQueue(name="TCP:10.0.0.9:1801\\private$\\far"),
        transaction=header,
        hop_count=1,
    )


@pytest.mark.parametrize("transactional", [True, False])
def test_a_message_held_for_relaying_names_its_entry_and_the_next_hop(
    qm: CoreHarness, transactional: bool
) -> None:
    """A router's entry holds the whole packet as it arrived (``Arrivals.relay``):
    it is found by the source and message id its packet carries."""
    arrivals = Arrivals(qm.store, LocalIdentity(peer_port=1901), qm.core.outcomes, router=True)
    other = uuid.UUID("0234aa00-0000-4000-8000-000000000001")
    packets = [
        relayed_packet(7, transactional=transactional),
        relayed_packet(8, transactional=transactional),  # the same source, another message
        relayed_packet(7, source=other, transactional=transactional),  # another source
    ]
    lookup_ids = []
    for packet in packets:
        _, remote = arrivals.destination(packet)
        assert remote is not None
        (op,) = arrivals.relay(packet, remote, wall=WALL).ops
        (result,) = qm.write(storage.Unit((op,))).results
        assert isinstance(result, storage.Appended)
        lookup_ids.append(result.lookup_id)
    record = qm.store.get_queue("outgoing$;tcp:10.0.0.9:1801\\far")
    assert record is not None
    hops = {record.queue_id: "10.0.0.9:1801"}

    [found] = trace(qm, f"{{{GUID}}}\\7", hops)
    assert (found.kind, found.place, found.next_hop) == (
        "relaying",
        "DIRECT=TCP:10.0.0.9\\private$\\far",
        "10.0.0.9:1801",
    )
    assert found.detail == f"held here for relaying, not yet acknowledged; entry {lookup_ids[0]}"
    assert [f.detail for f in trace(qm, f"{{{other}}}\\7", hops)] == [
        f"held here for relaying, not yet acknowledged; entry {lookup_ids[2]}"
    ]
    assert trace(qm, f"{{{GUID}}}\\9", hops) == []


def test_a_final_ack_waiting_to_go_back_to_its_source_is_found(qm: CoreHarness) -> None:
    # A message of another queue manager, received here: its FinalAck waits for a
    # session with the source. (Message ids lay the ordinal out little-endian, the
    # store's FinalAck keys big-endian: 7 is the same in neither.)
    message = MessageProperties(destination="q").stamp(
        source_qm=SOURCE, ordinal=7, sent_time=WALL, transactional=True
    )
    header = wire.TransactionHeader(
        sequence_id=wire.TxSequenceId(ordinal=3, timestamp=5),
        sequence_number=4,
        previous_sequence_number=3,
    )
    op = final_ack_op(message, final_ack_note(header), MessageClass.ACK_RECEIVE)
    qm.store.commit([storage.Unit((op,))], now=WALL)
    [found] = trace(qm, message.message_id)
    assert (found.kind, found.place, found.message_class) == (
        "final-ack",
        str(SOURCE),
        MessageClass.ACK_RECEIVE,
    )
    assert "FinalAck waiting to go back" in found.detail
    assert trace(qm, f"{{{SOURCE}}}\\8") == []
    # A router keeps another destination's FinalAck about it, shown after ours.
    destination = uuid.UUID("d0000000-0000-4000-8000-00000000000d")
    kept = wire.FinalAck(
        source_qm=destination,
        message_id=1,
        sent_time=int(WALL),
        message_class=MessageClass.NACK_RECEIVE_TIMEOUT,
        sequence_id=header.sequence_id,
        sequence_number=4,
        previous_sequence_number=3,
        acked_source_qm=SOURCE,
        acked_message_id=7,
    )
    qm.store.commit([storage.Unit((passed_on_final_ack_op(kept),))], now=WALL)
    ours, theirs = trace(qm, message.message_id)
    assert ours == found
    assert (theirs.kind, theirs.message_class) == ("final-ack", MessageClass.NACK_RECEIVE_TIMEOUT)
    assert theirs.detail == f"FinalAck of {destination} kept to pass on to the source"
    # FinalAcks belong to the queue manager as a whole: a principal's view leaves them out.
    assert trace(qm, message.message_id, visible=lambda queue: True) == []
