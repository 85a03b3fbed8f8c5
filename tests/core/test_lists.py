"""Distribution lists in the core: names and targets checked, expansion with
duplicates removed, and seed 000's rule for a mixture of targets."""

from __future__ import annotations

import re

import pytest

import storage
from qmgr.core import names
from qmgr.core.errors import (
    InvalidArgument,
    InvalidName,
    QueueExists,
    QueueNotFound,
    TransactionUsageError,
    from_store_error,
)
from qmgr.core.lists import MAX_LIST_TARGETS
from wire import MessageClass

from .conftest import OpenCore
from .harness import CoreHarness, messages

REMOTE = "DIRECT=TCP:10.9.9.9:1801\\private$\\far"


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    harness = open_core()
    harness.create("tq", transactional=True)
    harness.create("tq2", transactional=True)
    harness.create("nq")
    harness.create("admin")
    return harness


def write(qm: CoreHarness, unit: storage.Unit) -> None:
    outcome = qm.write(unit)
    if outcome.error is not None:
        raise from_store_error(outcome.error)


def test_create_change_read_delete(qm: CoreHarness) -> None:
    lists = qm.core.lists
    write(qm, lists.create("Fanout", ["tq", "private$\\TQ2", REMOTE]))
    found = lists.get("DL=fanout")
    assert (found.name, found.display_name) == ("fanout", "Fanout")
    assert found.targets == ("tq", "private$\\TQ2", REMOTE)
    # Adding one it has (in another spelling) changes nothing; removing works by queue.
    write(qm, lists.change("fanout", add=["TQ", "nq"], remove=["tq2"]))
    assert lists.get("fanout").targets == ("tq", REMOTE, "nq")
    with pytest.raises(QueueExists):
        write(qm, lists.create("FANOUT"))
    write(qm, lists.delete("fanout"))
    with pytest.raises(QueueNotFound):
        lists.get("fanout")
    with pytest.raises(QueueNotFound):
        write(qm, lists.delete("fanout"))
    assert lists.all() == []


@pytest.mark.parametrize(
    "target",
    [
        "system$;deadletter",
        "tq;journal",
        "tq;poison",
        "tq;retry",
        "DL=other",
        "tq,nq",
        "PUBLIC=1234",
        "bad\\\\name",
    ],
)
def test_bad_targets_are_refused(qm: CoreHarness, target: str) -> None:
    with pytest.raises(InvalidName):
        qm.core.lists.create("l", [target])


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("x\x1b[31my", "distribution list name 'x\\x1b[31my' contains a control character"),
        ("a;b", "distribution list name 'a;b' contains ;, which distribution list names cannot"),
        ("DL=", "a distribution list name cannot be empty"),
    ],
)
def test_a_bad_list_name_is_called_a_list_name(qm: CoreHarness, name: str, words: str) -> None:
    lists = qm.core.lists
    for refused in (lambda: lists.create(name, ["tq"]), lambda: lists.delete(name)):
        with pytest.raises(InvalidName, match=re.escape(words)):
            refused()
    with pytest.raises(InvalidName, match=re.escape(words)):
        qm.send(name if name.startswith("DL=") else f"DL={name}", b"x")
    # A bad target is still a queue name.
    with pytest.raises(InvalidName, match=re.escape("queue name 'x\\x1b' contains a control")):
        lists.create("l", ["x\x1b"])


def test_a_target_naming_no_queue_here_is_refused_when_added(qm: CoreHarness) -> None:
    lists = qm.core.lists
    for spelling in ("nosuch", ".\\private$\\nosuch", "DIRECT=OS:localhost\\private$\\nosuch"):
        # The name as it is typed: backslashes are not doubled.
        with pytest.raises(QueueNotFound, match=re.escape(f"queue '{spelling}' does not exist")):
            lists.create("l", ["tq", spelling])
    write(qm, lists.create("l", ["tq"]))
    with pytest.raises(QueueNotFound, match="queue 'nosuch' does not exist"):
        lists.change("l", add=["tq2", "nosuch"])
    assert lists.get("l").targets == ("tq",)
    # A queue on another queue manager is not looked up; one deleted since stays.
    qm.create("gone", transactional=True)
    write(qm, lists.change("l", add=[REMOTE, "gone"]))
    _, unit = qm.core.queues.delete("gone")
    qm.core.queues.deleted(qm.write(unit))
    write(qm, lists.change("l", add=["tq2"], remove=["tq"]))
    assert lists.get("l").targets == (REMOTE, "gone", "tq2")


def test_too_many_targets(qm: CoreHarness) -> None:
    targets = [f"DIRECT=TCP:10.0.0.1:1801\\private$\\q{i}" for i in range(MAX_LIST_TARGETS + 1)]
    with pytest.raises(InvalidArgument):
        qm.core.lists.create("big", targets)


def test_a_send_to_a_list_puts_one_copy_per_target_in_one_unit(qm: CoreHarness) -> None:
    write(qm, qm.core.lists.create("fanout", ["tq", "tq2", REMOTE, "TQ"]))
    tx = qm.begin()
    qm.prepare("DL=fanout,tq2", b"x", tx=tx)
    assert qm.commit(tx) == [None]
    assert [m.body for m in messages(qm, "tq")] == [b"x"]
    assert [m.body for m in messages(qm, "tq2")] == [b"x"]
    outgoing = [r for r in qm.store.list_queues() if r.kind is storage.QueueKind.OUTGOING]
    assert [r.depth for r in outgoing] == [1]
    [copy] = messages(qm, "tq")
    assert copy.transactional


def test_a_list_without_targets_takes_no_send_in_or_out_of_a_transaction(
    qm: CoreHarness,
) -> None:
    write(qm, qm.core.lists.create("empty", []))
    tx = qm.begin()
    for in_tx in (tx, None):
        with pytest.raises(InvalidArgument, match="reaches no queue"):
            qm.prepare("DL=empty", b"x", tx=in_tx)
    assert qm.commit(tx) == [None]  # the transaction goes on


def test_seed_000_a_transactional_message_to_a_mixture(qm: CoreHarness) -> None:
    write(qm, qm.core.lists.create("mixed", ["tq", "nq", REMOTE]))
    tx = qm.begin()
    qm.prepare("DL=mixed", b"x", tx=tx, acknowledge=0x04, admin_queue="admin")
    assert qm.commit(tx) == [None]
    assert [m.body for m in messages(qm, "tq")] == [b"x"]
    assert messages(qm, "nq") == []
    [dead] = messages(qm, names.DEADXACT)
    assert (dead.body, dead.message_class) == (b"x", MessageClass.NACK_NOT_TRANSACTIONAL_Q)
    [nack] = messages(qm, "admin")
    assert nack.message_class == MessageClass.NACK_NOT_TRANSACTIONAL_Q


def test_seed_000_a_plain_message_to_a_mixture(qm: CoreHarness) -> None:
    write(qm, qm.core.lists.create("mixed", ["tq", "nq"]))
    qm.send("DL=mixed", b"x")  # outside a transaction: not transactional
    assert [m.body for m in messages(qm, "nq")] == [b"x"]
    assert messages(qm, "tq") == []
    [dead] = messages(qm, names.DEADLETTER)
    assert dead.message_class == MessageClass.NACK_NOT_TRANSACTIONAL_MSG


def test_a_list_whose_queue_is_gone_dead_letters_that_copy(qm: CoreHarness) -> None:
    qm.create("gone", transactional=True)
    write(qm, qm.core.lists.create("l", ["tq", "gone"]))
    _, unit = qm.core.queues.delete("gone")
    qm.core.queues.deleted(qm.write(unit))
    tx = qm.begin()
    qm.prepare("DL=l", b"x", tx=tx)
    assert qm.commit(tx) == [None]
    assert [m.body for m in messages(qm, "tq")] == [b"x"]
    [dead] = messages(qm, names.DEADXACT)
    assert dead.message_class == MessageClass.NACK_BAD_DST_Q


def test_a_plain_name_keeps_msmq_usage_rules_and_lists_are_not_reply_queues(
    qm: CoreHarness,
) -> None:
    tx = qm.begin()
    with pytest.raises(TransactionUsageError):
        qm.prepare("nq", b"x", tx=tx)
    write(qm, qm.core.lists.create("l", ["tq"]))
    with pytest.raises(InvalidName):
        qm.send("tq", b"x", admin_queue="DL=l")
    with pytest.raises(InvalidName):
        qm.send("tq", b"x", response_queue="tq,tq2")
    with pytest.raises(QueueNotFound):
        qm.send("DL=nothing", b"x")
    with pytest.raises(InvalidName):
        qm.core.queue("DL=l")


def test_a_change_applies_to_later_sends_only(qm: CoreHarness) -> None:
    write(qm, qm.core.lists.create("l", ["tq"]))
    qm.send("DL=l", b"before")
    write(qm, qm.core.lists.change("l", add=["tq2"], remove=["tq"]))
    qm.send("DL=l", b"after")
    assert [m.body for m in messages(qm, "tq")] == [b"before"]
    assert [m.body for m in messages(qm, "tq2")] == [b"after"]
