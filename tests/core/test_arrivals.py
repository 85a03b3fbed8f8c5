"""Where a message arriving from another queue manager goes (``qmgr.core.arrivals``)."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

import storage
import wire
from qmgr.core.arrivals import REJECTED_MESSAGE_COST, Arrival, Arrivals, relay_id
from qmgr.core.names import LocalIdentity
from qmgr.core.outcomes import SENT_TIME_SLACK
from qmgr.core.outgoing import EntryOrigin, decode_entry
from storage import RELAY_ID_SIZE
from wire import MAX_HOPS, MessageClass, MessageProperties

from .conftest import OpenCore
from .harness import WALL, CoreHarness

SOURCE = uuid.UUID("6f9619ff-8b86-d011-b42d-00c04fc964ff")
IDENTITY = LocalIdentity(peer_port=1901)


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    return open_core({"txq": {"transactional": True}, "plain": {}})


def packet(
    destination: str,
    *,
    transactional: bool = True,
    hops: int = 0,
    message_class: int = 0,
    body: bytes = b"body",
    **properties: Any,
) -> wire.UserMessage:
    message = MessageProperties(body=body, label="l", **properties).stamp(
        source_qm=SOURCE, ordinal=7, sent_time=1_700_000_000.0, transactional=transactional
    )
    if message_class:
        message = message.replace(message_class=message_class)
    header = (
        wire.TransactionHeader(
            sequence_id=wire.TxSequenceId(ordinal=1, timestamp=5),
            sequence_number=1,
            previous_sequence_number=0,
        )
        if transactional
        else None
    )
    return wire.message_to_packet(
        message,
        destination=wire.DirectQueue(name=destination),
        transaction=header,
        hop_count=hops,
    )


def refused_copy(arrival: Arrival, *, transactional: bool = True) -> storage.Operation:
    """The dead-letter copy of a refused message; a transactional one's negative
    FinalAck comes with it, whatever the message asked ([MS-MQQB] §3.1.5.8.2)."""
    copy, *reports = arrival.ops
    final_acks = [op for op in reports if isinstance(op, storage.RecordFinalAck)]
    assert len(final_acks) == (1 if transactional else 0)
    return copy


def dead_class(qm: CoreHarness, op: storage.Operation, queue: str) -> int:
    assert isinstance(op, storage.AppendMessage)
    record = qm.store.get_queue(queue)
    assert record is not None
    assert op.queue_id == record.queue_id
    return MessageProperties.from_bytes(op.payload).message_class  # type: ignore[arg-type]


def test_a_message_for_a_local_queue_is_appended(qm: CoreHarness) -> None:
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes)
    found = packet("TCP:127.0.0.1:1901\\private$\\TxQ")
    key, remote = arrivals.destination(found)
    assert (key, remote) == ("txq", None)
    arrival = arrivals.to_queue(found, key, wall=WALL)
    assert arrival.refusal is None
    (op,) = arrival.ops
    assert isinstance(op, storage.AppendMessage)
    assert MessageProperties.from_bytes(op.payload).body == b"body"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("queue", "transactional", "expected", "dead_letter"),
    [
        ("missing", True, MessageClass.NACK_BAD_DST_Q, "system$;deadxact"),
        ("plain", True, MessageClass.NACK_NOT_TRANSACTIONAL_Q, "system$;deadxact"),
        ("txq", False, MessageClass.NACK_NOT_TRANSACTIONAL_MSG, "system$;deadletter"),
        ("system$;deadxact", True, MessageClass.NACK_BAD_DST_Q, "system$;deadxact"),
    ],
)
def test_rejections_go_to_the_dead_letter_queue_with_their_class(
    qm: CoreHarness, queue: str, transactional: bool, expected: int, dead_letter: str
) -> None:
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes)
    path = queue if queue.startswith("system$") else f"private$\\{queue}"
    found = packet(f"OS:localhost:1901\\{path}", transactional=transactional)
    key, _ = arrivals.destination(found)
    arrival = arrivals.to_queue(found, key, wall=WALL)
    assert arrival.refusal == expected
    op = refused_copy(arrival, transactional=transactional)
    assert dead_class(qm, op, dead_letter) == expected


def test_a_full_quota_falls_back_to_the_dead_letter_queue(qm: CoreHarness) -> None:
    qm.create("small", transactional=True, quota=2)
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes)
    found = packet("TCP:127.0.0.1:1901\\private$\\small")
    arrival = arrivals.to_queue(found, "small", wall=WALL)
    (op,) = arrival.ops
    assert isinstance(op, storage.Attempt)
    outcome = qm.write(storage.Unit(arrival.ops))
    (result,) = outcome.results
    assert isinstance(result, storage.Fallback)
    otherwise = op.otherwise
    assert isinstance(otherwise, storage.Together)  # the copy, and the negative FinalAck
    copy, final_ack = otherwise.ops
    assert isinstance(final_ack, storage.RecordFinalAck)
    assert dead_class(qm, copy, "system$;deadxact") == MessageClass.NACK_Q_EXCEED_QUOTA


def test_a_quota_given_between_an_arrival_and_its_write_judges_the_later_ones(
    qm: CoreHarness,
) -> None:
    qm.create("open", transactional=True)
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes)
    found = packet("TCP:127.0.0.1:1901\\private$\\open")
    before = arrivals.to_queue(found, "open", wall=WALL)
    qm.write(qm.core.queues.quota_unit("open", 0)[1])
    # It arrived while the queue had no quota: stored, not a failed run.
    outcome = qm.write(storage.Unit(before.ops))
    assert outcome.error is None
    assert isinstance(outcome.results[0], storage.Appended)
    # One that arrives after the change falls back to the dead-letter queue.
    after = arrivals.to_queue(found, "open", wall=WALL)
    (result,) = qm.write(storage.Unit(after.ops)).results
    assert isinstance(result, storage.Fallback)


def test_a_message_for_another_queue_manager_is_relayed_whole(qm: CoreHarness) -> None:
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes, router=True)
    found = packet("TCP:10.0.0.9:1801\\private$\\far", hops=3)
    key, remote = arrivals.destination(found)
    assert key is None
    assert remote is not None
    arrival = arrivals.relay(found, remote, wall=WALL)
    (op,) = arrival.ops
    assert isinstance(op, storage.AppendOutgoing)
    assert op.name == "outgoing$;tcp:10.0.0.9:1801\\far"
    entry = decode_entry(b"".join(bytes(part) for part in op.payload))
    assert entry.origin is EntryOrigin.RELAYED
    forwarded = wire.parse_packet(bytes(entry.data))
    assert isinstance(forwarded, wire.UserMessage)
    assert forwarded.user.hop_count == 4
    assert forwarded.transaction == found.transaction


@pytest.mark.parametrize(
    ("options", "delay", "expected"),
    [
        # Journal level that asks for confirmation, a time to be received: the
        # source's deadline, with XactDelayReceiveNack or MSMQ's rule (and a
        # second for the send time the wire cuts down to whole seconds).
        ({"journal": 1, "time_to_be_received": 60}, 10.0, 1_700_000_071.0),
        (
            {"journal": 2, "time_to_be_received": 60, "time_to_reach_queue": 30},
            None,
            1_700_000_091.0,
        ),
        ({"journal": 1}, 10.0, None),  # no time to be received: no deadline
        ({"time_to_be_received": 60}, 10.0, None),  # no confirmation asked
        ({"journal": 1, "time_to_be_received": 60, "transactional": False}, 10.0, None),
    ],
)
def test_a_relayed_message_awaiting_its_final_ack_says_until_when(
    qm: CoreHarness, options: dict[str, Any], delay: float | None, expected: float | None
) -> None:
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes, router=True, confirmation_delay=delay)
    found = packet("TCP:10.0.0.9:1801\\private$\\far", **options)
    _, remote = arrivals.destination(found)
    assert remote is not None
    assert arrivals.relay(found, remote, wall=WALL).confirm_by == expected


def test_a_relayed_message_is_held_until_its_entry_is_forgotten(qm: CoreHarness) -> None:
    """The entry is appended with the message's relay id; ``held`` finds it, for
    that destination only, until the entry leaves the outgoing queue."""
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes, router=True)
    first = packet("TCP:10.0.0.9:1801\\private$\\far")
    _, remote = arrivals.destination(first)
    assert remote is not None
    assert not arrivals.held(first, remote)  # no outgoing queue yet
    (op,) = arrivals.relay(first, remote, wall=WALL).ops
    assert isinstance(op, storage.AppendOutgoing)
    assert op.relay == relay_id(first)
    (result,) = qm.write(storage.Unit((op,))).results
    assert isinstance(result, storage.Appended)

    resent = packet("TCP:10.0.0.9:1801\\private$\\far")
    assert arrivals.held(resent, remote)
    # Come back round a loop of routers: more hops, another relay.
    assert not arrivals.held(packet("TCP:10.0.0.9:1801\\private$\\far", hops=2), remote)
    header = first.transaction
    assert header is not None
    next_number = dataclasses.replace(
        first, transaction=dataclasses.replace(header, sequence_number=2)
    )
    assert not arrivals.held(next_number, remote)
    # Resent after the source gave up the message before it: its previous
    # number bridges the hole, and the destination reads it; another relay,
    # stored behind the stale copy rather than dropped for it.
    bridged = dataclasses.replace(
        first, transaction=dataclasses.replace(header, previous_sequence_number=7)
    )
    assert not arrivals.held(bridged, remote)
    _, elsewhere = arrivals.destination(packet("TCP:10.0.0.9:1801\\private$\\other"))
    assert elsewhere is not None
    assert not arrivals.held(first, elsewhere)

    qm.write(storage.Unit((storage.ForgetOutgoing(result.queue_id, (result.lookup_id,)),)))
    assert not arrivals.held(resent, remote)


def test_a_relay_id_names_the_source_its_sequence_or_its_message_id_and_its_hops() -> None:
    transactional = packet("TCP:10.0.0.9:1801\\private$\\far")
    sequence_id = (5 << 32) | 1  # timestamp 5, ordinal 1
    number = 1
    previous = 0
    assert relay_id(transactional) == (
        SOURCE.bytes
        + sequence_id.to_bytes(8, "big")
        + number.to_bytes(4, "big")
        + previous.to_bytes(4, "big")
        + b"\x00"
    )
    plain = packet("TCP:10.0.0.9:1801\\private$\\far", transactional=False, hops=3)
    assert relay_id(plain) == (
        SOURCE.bytes + bytes(8) + (7).to_bytes(4, "big") + bytes(4) + b"\x03"
    )
    assert len(relay_id(plain)) == RELAY_ID_SIZE


@pytest.mark.parametrize(
    "destination",
    [
        "TCP:10.0.0.9:1801\\private$\\TxQ",  # a port map or NAT in front of us
        "TCP:127.0.0.1:11801\\private$\\txq",  # a forwarder on this host
        "OS:qm-b.example.net\\private$\\txq",  # a DNS alias we were not told of
        "TCP:[2001:db8::5]:1801\\private$\\txq",
    ],
)
def test_a_queue_manager_that_is_not_a_router_takes_every_message_as_its_own(
    qm: CoreHarness, destination: str
) -> None:
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes)
    found = packet(destination)
    assert arrivals.destination(found) == ("txq", None)
    arrival = arrivals.to_queue(found, "txq", wall=WALL)
    assert arrival.refusal is None
    assert arrival.relay_to is None


@pytest.mark.parametrize(
    ("destination", "expected"),
    [
        ("TCP:10.0.0.9:1801\\private$\\missing", MessageClass.NACK_BAD_DST_Q),
        ("TCP:10.0.0.9:1801\\system$;deadxact", MessageClass.NACK_BAD_DST_Q),
        ("TCP:10.0.0.9:1801\\private$\\txq;journal", MessageClass.NACK_BAD_DST_Q),
        ("TCP:10.0.0.9:1801\\private$\\plain", MessageClass.NACK_NOT_TRANSACTIONAL_Q),
    ],
)
def test_what_is_not_a_queue_here_is_refused_not_relayed(
    qm: CoreHarness, destination: str, expected: int
) -> None:
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes)
    found = packet(destination)
    key, remote = arrivals.destination(found)
    assert remote is None
    arrival = arrivals.to_queue(found, key, wall=WALL)
    assert arrival.refusal == expected
    assert dead_class(qm, refused_copy(arrival), "system$;deadxact") == expected


def test_a_router_takes_as_its_own_what_names_its_aliases(qm: CoreHarness) -> None:
    identity = LocalIdentity(
        peer_port=1901,
        aliases=frozenset({("203.0.113.5", 11801), ("qm-b.example.net", None)}),
    )
    arrivals = Arrivals(qm.store, identity, qm.core.outcomes, router=True)
    for mine in (
        "TCP:203.0.113.5:11801\\private$\\txq",
        "OS:QM-B.example.net\\private$\\txq",
        "OS:qm-b.example.net:1901\\private$\\txq",
        "TCP:127.0.0.1:1901\\private$\\txq",
    ):
        assert arrivals.destination(packet(mine)) == ("txq", None), mine
    for other in (
        "TCP:203.0.113.5:1801\\private$\\txq",  # the alias's host, another port
        "TCP:203.0.113.6:11801\\private$\\txq",
        "OS:qm-b.example.net:1801\\private$\\txq",
    ):
        key, remote = arrivals.destination(packet(other))
        assert key is None, other
        assert remote is not None, other


def test_a_router_takes_as_its_own_what_it_sent_to_itself(qm: CoreHarness) -> None:
    # A next hop that turned out to be this queue manager (a port map of its own
    # port): what comes over that session with itself is for a queue here, whatever
    # host it names; the same message from a peer is still relayed.
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes, router=True)
    mapped = packet("TCP:198.51.100.7:30000\\private$\\txq")
    assert arrivals.destination(mapped, here=True) == ("txq", None)
    key, remote = arrivals.destination(mapped)
    assert key is None
    assert remote is not None
    assert arrivals.destination(packet("OS:no-path"), here=True) == (None, None)


def test_too_many_hops_is_a_rejection(qm: CoreHarness) -> None:
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes, router=True)
    found = packet("TCP:10.0.0.9:1801\\private$\\far", hops=MAX_HOPS)
    _, remote = arrivals.destination(found)
    assert remote is not None
    arrival = arrivals.relay(found, remote, wall=WALL)
    assert arrival.refusal == MessageClass.NACK_HOP_COUNT_EXCEEDED
    op = refused_copy(arrival)
    assert dead_class(qm, op, "system$;deadxact") == MessageClass.NACK_HOP_COUNT_EXCEEDED


@pytest.mark.parametrize(
    ("transactional", "journal", "kept"),
    [(True, 1, False), (False, 0, False), (False, 1, True)],
)
def test_a_message_too_late_is_kept_here_only_if_it_dies_here_and_asked(
    qm: CoreHarness, transactional: bool, journal: int, kept: bool
) -> None:
    """Past its time to reach the queue: a transactional message's copy is its
    source's to keep (told by FinalAck, if asked); a plain one dies here, kept
    in the dead-letter queue only with MQMSG_DEADLETTER. ``kept`` says which."""
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes)
    queue = "txq" if transactional else "plain"
    late = packet(
        f"TCP:127.0.0.1:1901\\private$\\{queue}",
        transactional=transactional,
        time_to_reach_queue=600,
        journal=journal,
    )
    arrival = arrivals.to_queue(late, queue, wall=1_700_000_000.0 + 3600)
    assert (arrival.refusal, arrival.kept) == (MessageClass.NACK_REACH_QUEUE_TIMEOUT, kept)
    copies = [op for op in arrival.ops if isinstance(op, storage.AppendMessage)]
    assert len(copies) == int(kept)
    if transactional:  # the source learns it, and keeps its own copy
        assert [type(op) for op in arrival.ops] == [storage.RecordFinalAck]


@pytest.mark.parametrize("transactional", [True, False])
def test_a_time_to_reach_the_queue_of_0_is_one_try_taken_when_it_comes(
    qm: CoreHarness, transactional: bool
) -> None:
    """MSMQ's 0: the source sends it once if its destination is waiting, and it
    is taken however long the wire took (a second, here)."""
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes)
    queue = "txq" if transactional else "plain"
    once = packet(
        f"TCP:127.0.0.1:1901\\private$\\{queue}",
        transactional=transactional,
        time_to_reach_queue=0,
    )
    arrival = arrivals.to_queue(once, queue, wall=1_700_000_000.0 + 1)
    assert arrival.refusal is None
    assert [type(op) for op in arrival.ops if isinstance(op, storage.AppendMessage)] == [
        storage.AppendMessage
    ]


def test_time_limits_here_count_from_a_second_after_the_whole_seconds_the_wire_says(
    qm: CoreHarness,
) -> None:
    """The packet's send time is cut down to whole seconds: the message may have
    been sent up to a second later, so it is judged as sent then, and never
    expires here before its source's own deadline."""
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes)
    limited = packet(
        "TCP:127.0.0.1:1901\\private$\\txq", time_to_reach_queue=30, time_to_be_received=60
    )
    sent = limited.user.sent_time
    taken = arrivals.to_queue(limited, "txq", wall=sent + 30.5)
    assert taken.refusal is None
    [append] = [op for op in taken.ops if isinstance(op, storage.AppendMessage)]
    assert append.deadline == sent + SENT_TIME_SLACK + 60
    late = arrivals.to_queue(limited, "txq", wall=sent + 31.01)
    assert late.refusal == MessageClass.NACK_REACH_QUEUE_TIMEOUT


def _held(qm: CoreHarness) -> int:
    """What the dead-letter queue holds, as refusals count it."""
    deadxact = qm.store.get_queue("system$;deadxact")
    assert deadxact is not None
    return deadxact.bytes + deadxact.depth * REJECTED_MESSAGE_COST


def test_refusals_keep_copies_only_while_the_dead_letter_queue_has_room(
    qm: CoreHarness,
) -> None:
    """A peer whose messages are refused cannot fill the store: past
    max_rejected_bytes in the dead-letter queue, a refusal is reported, not kept."""
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes, max_rejected_bytes=5000)
    found = packet("TCP:127.0.0.1:1901\\private$\\missing")
    kept = 0
    while (arrival := arrivals.to_queue(found, "missing", wall=WALL)).kept:
        copy = refused_copy(arrival)
        assert isinstance(copy, storage.AppendMessage)
        qm.store.commit([storage.Unit(arrival.ops)], now=WALL)
        kept += 1
    assert arrival.refusal == MessageClass.NACK_BAD_DST_Q
    assert arrival.no_room
    # Nothing kept; its FinalAck still goes (its source confirms nothing: no copy to keep).
    assert [type(op) for op in arrival.ops] == [storage.RecordFinalAck]
    assert kept == 5000 // (copy.size + REJECTED_MESSAGE_COST)
    assert _held(qm) <= 5000 < _held(qm) + copy.size + REJECTED_MESSAGE_COST


def test_empty_refusals_are_bounded_too(qm: CoreHarness) -> None:
    """Each kept refusal counts its record besides its body: a peer sending empty
    messages to a queue that does not exist keeps no more than the limit allows."""
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes, max_rejected_bytes=5000)
    empty = packet("TCP:127.0.0.1:1901\\private$\\missing", body=b"")
    kept = 0
    for _ in range(100):
        arrival = arrivals.to_queue(empty, "missing", wall=WALL)
        if arrival.kept:
            qm.store.commit([storage.Unit(arrival.ops)], now=WALL)
            kept += 1
    assert kept == 5000 // REJECTED_MESSAGE_COST
    assert _held(qm) <= 5000


def test_arrivals_that_fit_their_quota_take_no_room_from_refusals(qm: CoreHarness) -> None:
    """Each arrival to a queue with a quota carries the dead-letter copy to write
    if the quota is full; accepted, it takes none of the refusals' room."""
    qm.create("big", transactional=True, quota=10_000_000)
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes, max_rejected_bytes=5000)
    accepted = packet("TCP:127.0.0.1:1901\\private$\\big")
    for _ in range(20):
        arrival = arrivals.to_queue(accepted, "big", wall=WALL)
        assert arrival.refusal is None
        qm.store.commit([storage.Unit(arrival.ops)], now=WALL)
    assert _held(qm) == 0
    refused = arrivals.to_queue(
        packet("TCP:127.0.0.1:1901\\private$\\missing"), "missing", wall=WALL
    )
    assert (refused.refusal, refused.kept) == (MessageClass.NACK_BAD_DST_Q, True)
