"""Queues in the core (``qmgr.core.queue_admin``): the system queues, creating a
queue with its journal and subqueues, changing its quota, deleting and purging
(which only mark), and the bounded erase steps that follow, sparing held
messages and reporting the fate of those that asked."""

from __future__ import annotations

import pytest

import storage
from qmgr.core import names
from qmgr.core.errors import (
    AccessDenied,
    InvalidArgument,
    InvalidName,
    QueueNotFound,
    QuotaExceeded,
    TransactionAborted,
)
from qmgr.core.outgoing import EntryOrigin, decode_entry
from qmgr.core.permissions import ACL_SETTING_PREFIX
from storage import PoisonSettings, QueueKind
from wire import MessageClass, MessageProperties

from .conftest import OpenCore
from .harness import (
    DEADLETTER,
    NEG_RECEIVE,
    POS_RECEIVE,
    WALL,
    CoreHarness,
    classes,
    messages,
)

#: A queue on another queue manager, and the outgoing queue its messages wait in.
REMOTE = "DIRECT=TCP:10.9.9.9:1801\\private$\\orders"
OUTGOING = "outgoing$;tcp:10.9.9.9:1801\\orders"


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    return open_core(
        {"tq": {"transactional": True, "journal": True}, "q": {"transactional": True}, "admin": {}}
    )


def test_the_system_queues_are_made_once(qm: CoreHarness) -> None:
    assert qm.core.queues.system_queue_units(WALL) == []
    kinds = {record.name: record.kind for record in qm.core.queues.all()}
    assert kinds[names.DEADLETTER] is QueueKind.DEADLETTER
    assert kinds[names.DEADXACT] is QueueKind.DEADXACT
    assert kinds[names.SYSTEM_JOURNAL] is QueueKind.SYSTEM_JOURNAL


def test_a_queue_is_created_with_its_journal_and_subqueues(qm: CoreHarness) -> None:
    unit = qm.core.queues.create(
        ".\\private$\\Orders", transactional=True, journal=True, quota=100, wall=WALL
    )
    record = qm.core.queues.created(qm.write(unit))
    assert (record.name, record.display_name, record.quota) == ("orders", "Orders", 100)
    assert record.journal_id == qm.core.queue("orders;journal").queue_id
    for suffix in names.SUBQUEUE_SUFFIXES:
        assert qm.core.queue("orders" + suffix).parent_id == record.queue_id
    assert [r.name for r in qm.core.queues.all()] == sorted(r.name for r in qm.core.queues.all())


def test_what_cannot_be_created_or_deleted(qm: CoreHarness) -> None:
    with pytest.raises(InvalidArgument, match="quota"):
        qm.core.queues.create("q2", quota=-1, wall=WALL)
    with pytest.raises(InvalidArgument):
        qm.core.queues.create("q2", poison=PoisonSettings(-1, 0, 1.0), wall=WALL)
    with pytest.raises(InvalidName):
        qm.core.queues.create("a;b", wall=WALL)
    # Every other command would read these as format names.
    for name in ("DL=foo", "direct=tcp:1.2.3.4", "Public=x", ".\\private$\\dl=bar"):
        with pytest.raises(InvalidName, match="begins as a format name"):
            qm.core.queues.create(name, wall=WALL)
    qm.core.queues.create("orders=2024", wall=WALL)  # '=' alone is a name's to hold
    for name in ("tq;journal", "tq;retry", names.DEADLETTER):
        with pytest.raises(AccessDenied):
            qm.core.queues.delete(name)
    with pytest.raises(QueueNotFound):
        qm.core.queues.purge("missing")
    _, unit = qm.core.queues.delete("q")
    qm.core.queues.deleted(qm.write(unit))
    with pytest.raises(QueueNotFound):
        qm.core.queues.deleted(qm.write(unit))  # gone already


def test_a_quota_changes_in_place_and_judges_the_next_commits(qm: CoreHarness) -> None:
    qm.create("limited", transactional=True, quota=4)
    qm.send_tx("limited", b"1234")
    tx = qm.begin()
    assert qm.prepare("limited", b"5", tx=tx) is None
    [full] = qm.commit(tx)
    assert isinstance(full, QuotaExceeded)
    # Raised: the next commit fits; its record (and every reader's) shows it at once.
    record = qm.core.queues.properties_set(qm.write(qm.core.queues.quota_unit("limited", 5)[1]))
    assert record.quota == qm.core.queue("limited").quota == 5
    qm.send_tx("limited", b"5")
    # Lowered below what it holds: refused until enough is received.
    qm.write(qm.core.queues.quota_unit(".\\private$\\Limited", 2)[1])
    tx = qm.begin()
    qm.prepare("limited", b"6", tx=tx)
    assert isinstance(qm.commit(tx)[0], QuotaExceeded)
    assert qm.take("limited") is not None
    assert qm.take("limited") is not None
    qm.send_tx("limited", b"12")
    # None removes it; the subqueues have none of their own.
    qm.write(qm.core.queues.quota_unit("limited", None)[1])
    assert qm.core.queue("limited").quota is None
    qm.send_tx("limited", b"x" * 100)


def test_what_cannot_get_a_quota(qm: CoreHarness) -> None:
    for name in ("tq;journal", "tq;retry", names.DEADLETTER):
        with pytest.raises(AccessDenied, match="no quota of its own"):
            qm.core.queues.quota_unit(name, 10)
    with pytest.raises(QueueNotFound):
        qm.core.queues.quota_unit("missing", 10)
    for bad in (-1, 1 << 64, True, 1.5):
        with pytest.raises(InvalidArgument, match="quota"):
            qm.core.queues.quota_unit("tq", bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="quota"):
            qm.core.queues.create("q2", quota=bad, wall=WALL)  # type: ignore[arg-type]
    _, unit = qm.core.queues.quota_unit("q", 10)
    _, gone = qm.core.queues.delete("q")
    qm.core.queues.deleted(qm.write(gone))
    with pytest.raises(QueueNotFound):
        qm.core.queues.properties_set(qm.write(unit))


def test_a_message_purged_while_held_leaves_when_its_transaction_ends(qm: CoreHarness) -> None:
    for body in (b"a", b"b", b"c"):
        qm.send("tq", body)
    committing, aborting = qm.begin(), qm.begin()
    assert qm.take("tq", committing) is not None
    assert qm.take("tq", aborting) is not None
    assert qm.purge("tq") == 1  # the held ones are left to their transactions
    assert qm.visible("tq") == []
    assert qm.core.queue("tq").depth == 0
    # The purge's erasing leaves the held messages alone.
    qm.erase_all()
    assert qm.core.commit(committing) is not None
    assert qm.commit(committing) == [None]  # removed (and journaled) as usual
    assert qm.bodies("tq;journal") == [b"a"]
    woken = qm.core.abort(aborting)
    assert woken == set()  # nothing came back: it was purged
    assert qm.visible("tq") == []
    qm.erase_all()
    assert qm.store.queues_to_erase() == []


def test_an_erase_step_built_before_a_second_purge_spares_what_it_now_holds(
    qm: CoreHarness,
) -> None:
    for body in (b"a", b"b"):
        qm.send("tq", body)
    qm.purge("tq")
    queue_id = qm.core.queue("tq").queue_id
    step = qm.core.queues.erase_unit(queue_id, 500)  # waits in a batch meanwhile
    qm.send("tq", b"new")
    tx = qm.begin()
    assert qm.take("tq", tx) is not None  # holds "new"
    assert qm.purge("tq") == 0  # purged while held: leaves when tx ends, not counted
    outcome = qm.write(step)
    assert outcome.error is None
    assert outcome.results[0] == storage.Erased(queue_id, 2, False)
    assert qm.commit(tx) == [None]  # its message was not erased under it
    assert qm.bodies("tq;journal") == [b"new"]
    qm.erase_all()
    assert qm.store.queues_to_erase() == []


def test_a_purge_survives_a_crash(qm: CoreHarness) -> None:
    for body in (b"a", b"b", b"c"):
        qm.send("tq", body)
    tx = qm.begin()
    assert qm.take("tq", tx) is not None
    qm.purge("tq")
    qm.crash()
    assert qm.visible("tq") == []
    assert qm.store.queues_to_erase() == [qm.core.queue("tq").queue_id]
    qm.erase_all()
    assert qm.store.queues_to_erase() == []
    assert qm.send("tq", b"new") == 4


def test_a_deleted_queue_takes_its_permissions_with_it(qm: CoreHarness) -> None:
    qm.create("temp")
    qm.write(storage.Unit((storage.SetSetting(ACL_SETTING_PREFIX + "temp", "alice=255"),)))
    qm.write(storage.Unit((storage.SetSetting(ACL_SETTING_PREFIX + "other", "bob=255"),)))
    record, unit = qm.core.queues.delete("temp")
    count, gone = qm.core.queues.deleted(qm.write(unit))
    assert (count, record.queue_id in gone) == (0, True)
    assert qm.store.get_setting(ACL_SETTING_PREFIX + "temp") is None
    assert qm.store.get_setting(ACL_SETTING_PREFIX + "other") == "bob=255"


def test_a_deleted_queue_fails_the_transactions_that_read_it(qm: CoreHarness) -> None:
    qm.create("doomed", transactional=True)
    qm.send("doomed", b"x")
    tx = qm.begin()
    assert qm.take("doomed", tx) is not None
    record, unit = qm.core.queues.delete("doomed")
    count, gone = qm.core.queues.deleted(qm.write(unit))
    assert (count, record.queue_id in gone) == (1, True)
    [error] = qm.commit(tx)
    assert isinstance(error, TransactionAborted)
    assert "aborted" in error.message


def test_a_purge_reports_what_asked(qm: CoreHarness) -> None:
    qm.send_tx("q", b"asked", acknowledge=NEG_RECEIVE, admin_queue="admin", journal=DEADLETTER)
    qm.send_tx("q", b"silent")
    qm.send_tx("q", b"asked too", acknowledge=NEG_RECEIVE, admin_queue="admin")
    assert qm.purge("q") == 3
    assert messages(qm, "admin") == []  # reported as the messages are erased
    qm.erase_all(step=2)
    nacks = messages(qm, "admin")
    assert [m.message_class for m in nacks] == [MessageClass.NACK_Q_PURGED] * 2
    assert sorted(m.body for m in nacks) == [b"asked", b"asked too"]
    assert [(m.body, m.message_class) for m in messages(qm, names.DEADXACT)] == [
        (b"asked", MessageClass.NACK_Q_PURGED)
    ]
    assert qm.store.queues_to_erase() == []


def test_a_purge_does_not_count_what_transactions_hold(qm: CoreHarness) -> None:
    for body in (b"a", b"b", b"c", b"d"):
        qm.send("tq", body)
    committing, aborting = qm.begin(), qm.begin()
    assert qm.take("tq", committing) is not None
    assert qm.take("tq", aborting) is not None
    assert qm.purge("tq") == 2  # c and d; a and b are left to their transactions
    assert qm.purge("tq") == 0  # still held: not counted again
    qm.send("tq", b"e")
    assert qm.purge("tq") == 1
    assert qm.commit(committing) == [None]
    qm.core.abort(aborting)
    qm.erase_all()
    assert qm.bodies("tq;journal") == [b"a"]
    assert qm.store.queues_to_erase() == []


def test_a_purged_message_held_by_a_committing_transaction_is_received(qm: CoreHarness) -> None:
    qm.send_tx("q", b"x", acknowledge=NEG_RECEIVE | POS_RECEIVE, admin_queue="admin")
    tx = qm.begin()
    assert qm.take("q", tx) is not None
    qm.purge("q")
    qm.erase_all()
    assert qm.commit(tx) == [None]
    qm.erase_all()
    assert classes(qm, "admin") == [MessageClass.ACK_RECEIVE]


def test_deleting_a_queue_reports_its_messages(qm: CoreHarness) -> None:
    qm.create("doomed", transactional=True, journal=True)
    for index in range(5):
        qm.send_tx("doomed", b"%d" % index, acknowledge=NEG_RECEIVE, admin_queue="admin")
    assert qm.take("doomed") is not None  # one journal copy, which reports nothing
    _, unit = qm.core.queues.delete("doomed")
    qm.core.queues.deleted(qm.write(unit))
    qm.erase_all(step=2)
    assert classes(qm, "admin") == [MessageClass.NACK_Q_DELETED] * 4
    assert qm.store.queues_to_erase() == []


def test_queues_made_before_subqueues_get_them(qm: CoreHarness) -> None:
    qm.write(storage.Unit((storage.CreateQueue("old", "old", transactional=True),)))
    assert qm.store.get_queue("old;retry") is None
    [unit] = qm.core.queues.subqueue_units(WALL)
    qm.write(unit)
    assert qm.core.queue("old;poison").parent_id == qm.core.queue("old").queue_id
    assert qm.core.queues.subqueue_units(WALL) == []


def waiting(qm: CoreHarness, queue_id: int) -> list[MessageProperties]:
    """The messages sent here waiting in an outgoing queue."""
    entries = [
        decode_entry(storage.message_payload(stored))
        for _, stored in qm.store.read_range(queue_id, limit=1000)
    ]
    return [
        MessageProperties.from_bytes(entry.data.tobytes())
        for entry in entries
        if entry.origin is EntryOrigin.LOCAL
    ]
