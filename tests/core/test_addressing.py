"""Where a send goes (``qmgr.core.addressing``): format names parsed once, resolved
to local queues' records, remote destinations, or a list's missing target, and
queue references resolved to the one local queue they name."""

from __future__ import annotations

import pytest

from qmgr.core.addressing import MAX_DESTINATIONS, Addressing, MissingTarget
from qmgr.core.errors import AccessDenied, InvalidArgument, InvalidName, QueueNotFound
from qmgr.core.outgoing import RemoteDestination

from .conftest import OpenCore
from .harness import CoreHarness

FAR = "DIRECT=TCP:10.9.8.7:1901\\private$\\Far"


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    return open_core({"a": {"transactional": True}, "b": {}})


@pytest.fixture
def addressing(qm: CoreHarness) -> Addressing:
    return qm.core.addressing


def test_a_queue_reference_names_one_local_queue(qm: CoreHarness, addressing: Addressing) -> None:
    record = qm.store.get_queue("a")
    for reference in ("a", "A", ".\\private$\\a", "DIRECT=OS:.\\private$\\a"):
        assert addressing.queue(reference) == record
    assert addressing.queue("a;journal").name == "a;journal"
    with pytest.raises(QueueNotFound, match="'missing' does not exist"):
        addressing.queue("missing")
    for reference in ("a,b", "DL=list", FAR):
        with pytest.raises(InvalidName):
            addressing.queue(reference)


def test_an_application_queue_is_told_from_the_others(
    qm: CoreHarness, addressing: Addressing
) -> None:
    assert addressing.application_queue("a", "has no x") == qm.store.get_queue("a")
    for reference in ("a;journal", "system$;deadletter"):
        with pytest.raises(AccessDenied, match="has no x"):
            addressing.application_queue(reference, "has no x")
    with pytest.raises(QueueNotFound):
        addressing.application_queue("missing", "has no x")


def test_destinations_in_order_duplicates_collapsed(
    qm: CoreHarness, addressing: Addressing
) -> None:
    a, b = qm.store.get_queue("a"), qm.store.get_queue("b")
    assert addressing.destinations("a") == (a,)
    found = addressing.destinations(f"b,{FAR},A,b")
    assert found[0] == b
    assert found[1] == RemoteDestination("TCP", "10.9.8.7", 1901, "far")
    assert found[2:] == (a,)
    assert not addressing.fans_out("a")
    assert addressing.fans_out("a,b")
    assert addressing.fans_out("DL=list")


def test_what_takes_no_sends(addressing: Addressing) -> None:
    with pytest.raises(QueueNotFound):
        addressing.destinations("missing")
    for name in ("a;journal", "system$;deadletter"):
        with pytest.raises(AccessDenied, match="journal or dead-letter"):
            addressing.destinations(name)
    with pytest.raises(AccessDenied, match="subqueue"):
        addressing.destinations("a;retry")
    with pytest.raises(QueueNotFound, match="distribution list"):
        addressing.destinations("DL=nobody")


def test_a_list_expands_and_a_missing_target_is_kept_apart(qm: CoreHarness) -> None:
    qm.create("gone")
    assert qm.write(qm.core.lists.create("both", ["a", "gone", FAR])).error is None
    _, unit = qm.core.queues.delete("gone")
    qm.core.queues.deleted(qm.write(unit))
    found = qm.core.addressing.destinations("DL=both,b")
    assert found[0] == qm.store.get_queue("a")
    assert found[1] == MissingTarget("gone")
    assert found[1].display_name == "gone"
    assert isinstance(found[2], RemoteDestination)
    assert found[3] == qm.store.get_queue("b")


def test_a_send_reaches_a_bounded_number_of_queues(qm: CoreHarness) -> None:
    for name in ("one", "two"):
        hosts = [f"10.1.{i // 200}.{i % 200 + 1}" for i in range(MAX_DESTINATIONS // 2 + 1)]
        targets = [f"DIRECT=TCP:{host}\\private$\\{name}" for host in hosts]
        assert qm.write(qm.core.lists.create(name, targets)).error is None
    with pytest.raises(InvalidArgument, match=f"at most {MAX_DESTINATIONS} queues"):
        qm.core.addressing.destinations("DL=one,DL=two")


def test_a_send_that_reaches_no_queue_is_refused(qm: CoreHarness) -> None:
    assert qm.write(qm.core.lists.create("empty", [])).error is None
    assert qm.write(qm.core.lists.create("other", [])).error is None
    for text in ("DL=empty", "DL=empty,DL=other"):
        with pytest.raises(InvalidArgument, match="reaches no queue"):
            qm.core.addressing.destinations(text)
    assert qm.core.addressing.destinations("DL=empty,a") == (qm.store.get_queue("a"),)


def test_parsed_names_are_remembered(addressing: Addressing) -> None:
    first = addressing.parse("a,b")
    assert addressing.parse("a,b") is first


def test_queue_references_are_parsed_once_and_looked_up_each_time(
    qm: CoreHarness, addressing: Addressing, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qmgr.core import names

    calls: list[str] = []
    parse = names.parse_queue_reference

    def counting(text: str, identity: names.LocalIdentity | None = None) -> names.QueueAddress:
        calls.append(text)
        return parse(text, identity)

    monkeypatch.setattr(names, "parse_queue_reference", counting)
    record = qm.store.get_queue("a")
    assert addressing.queue("DIRECT=OS:.\\private$\\a") == record
    assert addressing.queue("DIRECT=OS:.\\private$\\a") == record
    assert calls == ["DIRECT=OS:.\\private$\\a"]
    # The queue itself is looked up every time: a deleted queue is not found.
    _, unit = qm.core.queues.delete("a")
    assert qm.write(unit).error is None
    with pytest.raises(QueueNotFound):
        addressing.queue("DIRECT=OS:.\\private$\\a")
    # A name that does not parse is refused every time (and not kept).
    for _ in range(2):
        with pytest.raises(InvalidName):
            addressing.queue("a,b")
    assert calls.count("a,b") == 2
