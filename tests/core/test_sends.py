"""What makes a send acceptable (``qmgr.core.sends``): the values a sender set, and
MSMQ's rules for which sends are transactional."""

from __future__ import annotations

import pytest

from qmgr.core.addressing import MissingTarget
from qmgr.core.errors import InvalidArgument, MessageTooLarge, TransactionUsageError
from qmgr.core.outgoing import RemoteDestination
from qmgr.core.sends import (
    SendMode,
    check_message,
    check_remote_message,
    fan_out_is_transactional,
    refused_copy,
    send_is_transactional,
)
from storage import QueueRecord
from wire import MAX_MESSAGE_BODY, MessageClass, MessageProperties

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
