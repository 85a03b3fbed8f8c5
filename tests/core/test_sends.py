"""What makes a send acceptable (``qmgr.core.sends``): the values a sender set, and
MSMQ's rules for which sends are transactional."""

from __future__ import annotations

import pytest

import wire
from qmgr.core.addressing import MissingTarget
from qmgr.core.errors import InvalidArgument, MessageTooLarge, TransactionUsageError
from qmgr.core.outgoing import RemoteDestination
from qmgr.core.sends import (
    PACKET_HEADROOM,
    SendMode,
    check_message,
    check_remote_message,
    fan_out_is_transactional,
    fitted_for_wire,
    refused_copy,
    send_is_transactional,
)
from storage import QueueRecord
from wire import MAX_MESSAGE_BODY, MAX_PACKET_SIZE, MessageClass, MessageProperties

from .conftest import OpenCore
from .harness import CoreHarness

FAR = RemoteDestination("TCP", "10.9.8.7", 1801, "far")


@pytest.fixture
def queues(open_core: OpenCore) -> tuple[QueueRecord, QueueRecord]:
    """A transactional queue and a non-transactional one."""
    qm: CoreHarness = open_core({"tq": {"transactional": True}, "nq": {}})
    return qm.core.queue("tq"), qm.core.queue("nq")


@pytest.mark.parametrize(
    ("fields", "error", "words"),
    [
        ({"body": b"x" * (MAX_MESSAGE_BODY + 1)}, MessageTooLarge, "4 MB"),
        ({"label": "x" * 251}, InvalidArgument, "label"),
        ({"priority": 8}, InvalidArgument, "priority"),
        ({"delivery": 2}, InvalidArgument, "delivery"),
        ({"acknowledge": 16, "admin_queue": "a"}, InvalidArgument, "acknowledge"),
        ({"acknowledge": 1}, InvalidArgument, "admin queue"),
        ({"journal": 4}, InvalidArgument, "journal"),
    ],
)
def test_values_out_of_range_are_refused_naming_the_field(
    fields: dict[str, object], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        check_message(MessageProperties(**fields))  # type: ignore[arg-type]


def test_a_message_within_every_bound_passes() -> None:
    check_message(
        MessageProperties(label="x" * 250, priority=7, delivery=1, acknowledge=15, admin_queue="a")
    )


def test_a_label_for_another_queue_manager_fits_a_packet() -> None:
    check_remote_message(MessageProperties(label="x" * 249))
    check_remote_message(MessageProperties())
    for label in ("x" * 250, "a\x00b", "\U0001f600" * 125):
        with pytest.raises(InvalidArgument, match="UTF-16 units"):
            check_remote_message(MessageProperties(label=label))


@pytest.mark.parametrize(
    ("label", "fitted"),
    [
        ("x" * 250, "x" * 249),
        ("a\x00b", "ab"),
        ("\U0001f600" * 125, "\U0001f600" * 124),  # never half a surrogate pair
        ("y" * 248 + "\U0001f600", "y" * 248),
        ("fits", "fits"),
    ],
)
def test_what_the_queue_manager_writes_to_another_is_fitted_to_a_packet(
    label: str, fitted: str
) -> None:
    """An acknowledgment copies the label (and a NACK the body) of a message that
    may only have been local: made to fit, it goes, instead of being unsendable."""
    nack = MessageProperties(label=label, body=b"b" * MAX_MESSAGE_BODY, message_class=0xC000)
    made = fitted_for_wire(nack)
    check_remote_message(made)
    assert (made.label, made.body) == (fitted, b"")
    small = MessageProperties(label=label, body=b"kept")
    assert fitted_for_wire(small).body == b"kept"
    assert fitted_for_wire(MessageProperties(label="fits", body=b"kept")) == MessageProperties(
        label="fits", body=b"kept"
    )


def test_a_message_for_another_queue_manager_must_fit_one_packet_with_its_headers() -> None:
    host = "h" * 255  # the longest host name
    queue = "q" * 124  # the longest queue name
    direct = f"DIRECT=TCP:{host}:65535\\private$\\{queue}"
    fields = {"label": "\U0001f600" * 124, "admin_queue": direct, "response_queue": direct}
    empty = MessageProperties(destination=direct, transactional=True, **fields)  # type: ignore[arg-type]
    room = MAX_PACKET_SIZE - PACKET_HEADROOM - len(empty)
    largest = MessageProperties(destination=direct, body=b"x" * room, **fields)  # type: ignore[arg-type]
    largest = largest.stamp(source_qm=wire.NULL_GUID, ordinal=1, sent_time=1.0, transactional=True)
    check_remote_message(largest)
    # The largest accepted fits one packet with every header, names as long as they get.
    address = wire.direct_queue(direct)
    assert address is not None
    packet = wire.message_to_packet(
        largest,
        destination=address,
        admin=address,
        response=address,
        transaction=wire.TransactionHeader(
            sequence_id=wire.TxSequenceId(ordinal=1, timestamp=1),
            sequence_number=1,
            previous_sequence_number=0,
        ),
    )
    assert len(wire.build_packet(packet)) <= MAX_PACKET_SIZE
    one_more = MessageProperties(destination=direct, body=b"x" * (room + 1), **fields)  # type: ignore[arg-type]
    with pytest.raises(MessageTooLarge, match="one packet of at most 4194304 bytes"):
        check_remote_message(one_more)


def test_msmq_rules_for_a_send_to_one_or_more_queues(
    queues: tuple[QueueRecord, QueueRecord],
) -> None:
    tq, nq = queues
    assert send_is_transactional([tq], in_transaction=True, mode=SendMode.AUTO)
    assert send_is_transactional([tq], in_transaction=False, mode=SendMode.AUTO)
    assert send_is_transactional([tq], in_transaction=False, mode=SendMode.SINGLE)
    assert not send_is_transactional([nq], in_transaction=False, mode=SendMode.AUTO)
    assert not send_is_transactional([nq], in_transaction=False, mode=SendMode.NONE)
    refused = [
        ([nq], True, SendMode.AUTO, "not transactional; send to it outside"),
        ([tq], False, SendMode.NONE, "is transactional"),
        ([nq], False, SendMode.SINGLE, "send without a transaction"),
        ([tq, nq], False, SendMode.AUTO, "cannot mix"),
    ]
    for targets, in_transaction, mode, words in refused:
        with pytest.raises(TransactionUsageError, match=words):
            send_is_transactional(targets, in_transaction=in_transaction, mode=mode)


def test_a_send_to_another_queue_manager_alone_follows_the_caller() -> None:
    assert send_is_transactional([FAR], in_transaction=True, mode=SendMode.AUTO)
    assert send_is_transactional([FAR], in_transaction=False, mode=SendMode.SINGLE)
    assert not send_is_transactional([FAR], in_transaction=False, mode=SendMode.AUTO)


def test_a_fan_out_is_never_refused_whole(queues: tuple[QueueRecord, QueueRecord]) -> None:
    tq, nq = queues
    assert fan_out_is_transactional([tq, nq], in_transaction=True, mode=SendMode.AUTO)
    assert fan_out_is_transactional([nq], in_transaction=False, mode=SendMode.SINGLE)
    assert not fan_out_is_transactional([tq], in_transaction=False, mode=SendMode.NONE)
    assert fan_out_is_transactional([tq, FAR], in_transaction=False, mode=SendMode.AUTO)
    assert not fan_out_is_transactional([tq, nq], in_transaction=False, mode=SendMode.AUTO)
    assert not fan_out_is_transactional([FAR], in_transaction=False, mode=SendMode.AUTO)


def test_each_copy_of_a_fan_out_is_refused_by_the_queue_it_does_not_suit(
    queues: tuple[QueueRecord, QueueRecord],
) -> None:
    tq, nq = queues
    assert refused_copy(tq, transactional=True) is None
    assert refused_copy(nq, transactional=True) == MessageClass.NACK_NOT_TRANSACTIONAL_Q
    assert refused_copy(tq, transactional=False) == MessageClass.NACK_NOT_TRANSACTIONAL_MSG
    assert refused_copy(FAR, transactional=True) is None
    assert refused_copy(MissingTarget("gone"), transactional=False) == MessageClass.NACK_BAD_DST_Q


def test_a_send_to_another_queue_manager_too_large_for_a_packet_is_refused_whole(
    open_core: OpenCore,
) -> None:
    qm: CoreHarness = open_core({"nq": {}})
    far = "DIRECT=TCP:10.9.8.7:1801\\private$\\far"
    body = b"x" * (MAX_PACKET_SIZE - 1024)  # within the 4 MB of a body, not of a packet
    with pytest.raises(MessageTooLarge, match="another queue manager"):
        qm.prepare(far, body)
    with pytest.raises(MessageTooLarge, match="another queue manager"):
        qm.prepare(f"nq,{far}", body)  # a multiple-element name: none of it
    assert qm.prepare("nq", body) is not None  # locally it is a message like any
