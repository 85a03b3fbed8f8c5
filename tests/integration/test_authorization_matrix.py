"""The authorization matrix with real daemons (docs/security.md), the ways a
message is written into a queue by a client, and two-phase resolution: each
case is tried by the queue's owner, a principal given only the right in
question and one given every right but that one, and checks the answer
(allowed, or ACCESS_DENIED) and the effect (the message written or not; nothing
removed when refused). The deployment is :mod:`authorization_kit`'s; the
peers' column and the reads have files of their own beside this one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

import pytest
from authorization_kit import (
    WHO,
    Deployment,
    Site,
    allowed_for,
    attempt,
    check_answer,
    fresh,
    open_to_everyone,
    own_queue,
    try_receive,
    try_send,
    unreachable,
)
from helpers import (
    send_in_transaction,
    wait_until,
)

from qmgr.client import (
    AccessDenied,
    Acknowledge,
    MessageClass,
    QueueManager,
    Resolution,
    TransactionStatus,
)

# =========================================================================== writes


MODES: Final = ("non-transactional", "transaction")


def send_as(
    qm: QueueManager, mode: str, destination: str, body: bytes
) -> tuple[str | None, AccessDenied | None]:
    """A send outside any transaction, or one in a transaction that then commits."""
    if mode == "non-transactional":
        return try_send(qm, destination, body, transactional=False)

    def in_a_transaction() -> None:
        send_in_transaction(qm, destination, body)

    return None, attempt(in_a_transaction)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("who", WHO)
def test_send(deployment: Deployment, who: str, mode: str) -> None:
    site = deployment.p1
    queue = fresh("send")
    own_queue(site, queue, "send", transactional=mode == "transaction")
    body = f"{queue} from {who}".encode()
    with site.client(WHO[who]) as qm:
        _, denial = send_as(qm, mode, queue, body)
    allowed = allowed_for(who)
    check_answer(denial, allowed, f"'carol' may not send on queue '{queue}'")
    assert site.bodies(queue) == ([body] if allowed else [])


def two_queues_for_carol(site: Site, mode: str) -> tuple[str, str]:
    """Two queues bob may send to; carol may send to the first only."""
    first, second = fresh("first"), fresh("second")
    for queue in (first, second):
        own_queue(site, queue, "send", transactional=mode == "transaction")
    with site.client("alice") as alice:
        alice.grant(first, "carol", "send")
    return first, second


def to_both(site: Site, first: str, second: str, how: str) -> str:
    """A destination that names queues ``first`` and ``second``: a multiple-element
    format name, or a new distribution list of the two."""
    if how == "multiple-element-name":
        return f"{first},{second}"
    listed = fresh("list")
    with site.client("root") as root:
        root.create_list(listed, [first, second])
    return f"DL={listed}"


@pytest.mark.parametrize("how", ["multiple-element-name", "distribution-list"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("who", WHO)
def test_send_to_two_queues(deployment: Deployment, who: str, mode: str, how: str) -> None:
    site = deployment.p1
    first, second = two_queues_for_carol(site, mode)
    destination = to_both(site, first, second, how)
    body = f"{destination} from {who}".encode()
    with site.client(WHO[who]) as qm:
        _, denial = send_as(qm, mode, destination, body)
    allowed = allowed_for(who)
    check_answer(denial, allowed, f"'carol' may not send on queue '{second}'")
    # All copies or none: carol's refusal writes nothing into the queue she may send to.
    assert site.bodies(first) == site.bodies(second) == ([body] if allowed else [])


LIST_CHANGES: Final[dict[str, Callable[[QueueManager, str, str, str], object]]] = {
    "create": lambda qm, listed, first, second: qm.create_list(f"{listed}-new", [second]),
    "add": lambda qm, listed, first, second: qm.add_to_list(listed, second),
    "remove": lambda qm, listed, first, second: qm.remove_from_list(listed, first),
    "delete": lambda qm, listed, first, second: qm.delete_list(listed),
}
LIST_CHANGERS: Final = {"owner-of-the-queues": "alice", "administrator": "root", "other": "bob"}


@pytest.mark.parametrize("change", LIST_CHANGES)
@pytest.mark.parametrize("who", LIST_CHANGERS)
def test_only_administrators_change_distribution_lists(
    deployment: Deployment, who: str, change: str
) -> None:
    site = deployment.p1
    first, second = fresh("listed"), fresh("listed")
    for queue in (first, second):
        own_queue(site, queue, "send")
    listed = fresh("list")
    with site.client("root") as root:
        root.create_list(listed, [first])
    allowed = _administrators_only(
        site, who, LIST_CHANGERS[who], lambda qm: LIST_CHANGES[change](qm, listed, first, second)
    )
    with site.client("root") as root:
        lists = {found.name: found.targets for found in root.lists()}
    changed: dict[str, dict[str, tuple[str, ...]]] = {
        "create": {listed: (first,), f"{listed}-new": (second,)},
        "add": {listed: (first, second)},
        "remove": {listed: ()},
        "delete": {},
    }
    expected = changed[change] if allowed else {listed: (first,)}
    assert {key: lists[key] for key in (listed, f"{listed}-new") if key in lists} == expected


def _administrators_only(
    site: Site, who: str, name: str, action: Callable[[QueueManager], object]
) -> bool:
    """``action`` by ``name`` (the role ``who``) on ``site``: checks that only the
    administrator may, and is told why not otherwise; returns whether it was allowed."""
    with site.client(name) as qm:
        denial = attempt(lambda: action(qm))
    allowed = who == "administrator"
    check_answer(denial, allowed, f"'{name}' is not an administrator (auth.admins)")
    return allowed


OUTGOING_CONTROLS: Final[dict[str, Callable[[QueueManager, str], object]]] = {
    "pause": lambda qm, destination: qm.pause_outgoing(destination),
    "resume": lambda qm, destination: qm.resume_outgoing(destination),
    "purge": lambda qm, destination: qm.purge_outgoing(destination),
}
OUTGOING_CONTROLLERS: Final = {"sender": "alice", "administrator": "root", "other": "bob"}


@pytest.mark.parametrize("control", OUTGOING_CONTROLS)
@pytest.mark.parametrize("who", OUTGOING_CONTROLLERS)
def test_only_administrators_control_outgoing_queues(
    deployment: Deployment, who: str, control: str
) -> None:
    site = deployment.p1
    destination = unreachable(fresh("far"))
    with site.client("alice") as alice:
        alice.send(destination, b"waits")  # no right is checked for another queue manager's queue
    with site.client("root") as root:
        if control == "resume":
            assert root.pause_outgoing(destination).state == "paused"
    allowed = _administrators_only(
        site, who, OUTGOING_CONTROLLERS[who], lambda qm: OUTGOING_CONTROLS[control](qm, destination)
    )
    with site.client("root") as root:
        [info] = [info for info in root.outgoing() if info.destination == destination]
        root.purge_outgoing(destination)
    # Refused, nothing changed; allowed, the control did what it says.
    paused = {"pause": allowed, "resume": not allowed, "purge": False}[control]
    assert (info.state == "paused") == paused
    assert info.waiting == (0 if allowed and control == "purge" else 1)


class NamingSend(NamedTuple):
    """A send that named another queue, as :func:`send_naming` made it."""

    queue: str
    named: str
    body: bytes
    sent: str | None
    allowed: bool


def send_naming(site: Site, who: str, role: str, **options: Any) -> NamingSend:
    """``who`` sends to a new queue open to everyone, naming as its ``role``
    queue (``admin`` or ``response``) a new queue of alice's that carol may not
    send on; checks that it was allowed for those that may send there, and
    refused otherwise, saying why."""
    queue, named = fresh("destination"), fresh(role)
    open_to_everyone(site, queue)
    own_queue(site, named, "send")
    body = f"{queue} from {who}".encode()
    with site.client(WHO[who]) as qm:
        sent, denial = try_send(qm, queue, body, **{f"{role}_queue": named}, **options)
    allowed = allowed_for(who)
    check_answer(
        denial, allowed, f"'carol' may not send on queue '{named}'", f"named as the {role} queue"
    )
    return NamingSend(queue, named, body, sent, allowed)


@pytest.mark.parametrize("who", WHO)
def test_naming_an_admin_queue_for_acknowledgments(deployment: Deployment, who: str) -> None:
    site = deployment.p1
    send = send_naming(site, who, "admin", acknowledge=Acknowledge.FULL_REACH_QUEUE)
    if send.allowed:
        assert site.bodies(send.queue) == [send.body]
        [ack] = site.messages(send.named)
        assert ack.message_class == MessageClass.ACK_REACH_QUEUE
        assert ack.acknowledged_id == send.sent
    else:
        assert site.bodies(send.queue) == []
        assert site.bodies(send.named) == []


def test_acknowledgments_go_only_to_the_admin_queue_checked_at_the_send(
    deployment: Deployment,
) -> None:
    """bob may not name a queue that does not exist yet as his admin queue (nothing to
    check), nor have his acknowledgments written into alice's queue of the name of his
    own admin queue, deleted since: both would put his label and body in her queue."""
    site = deployment.p1
    queue, later, own = fresh("destination"), fresh("later"), fresh("own-acks")
    open_to_everyone(site, queue)
    nack = Acknowledge.NACK_RECEIVE
    with site.client("bob") as bob:
        _, denial = try_send(bob, queue, b"early", acknowledge=nack, admin_queue=later)
        check_answer(denial, False, f"the admin queue '{later}' does not exist")
        bob.create_queue(own)
        sent, denial = try_send(
            bob, queue, b"mine", acknowledge=Acknowledge.FULL_RECEIVE, admin_queue=own
        )
        assert denial is None
        bob.delete_queue(own)
    own_queue(site, own, "receive")  # alice's now; bob may only receive from it
    with site.client("alice") as alice:
        assert alice.receive(queue, timeout=5).body == b"mine"
    assert site.bodies(own) == []
    [dead] = [m for m in site.messages("system$;deadletter") if m.acknowledged_id == sent]
    assert dead.message_class == MessageClass.NACK_BAD_DST_Q


@pytest.mark.parametrize("who", WHO)
def test_naming_a_response_queue(deployment: Deployment, who: str) -> None:
    site = deployment.p1
    send = send_naming(site, who, "response")
    if send.allowed:
        [message] = site.messages(send.queue)
        assert message.body == send.body
        assert send.named in message.response_queue
    else:
        assert site.bodies(send.queue) == []
    assert site.bodies(send.named) == []  # naming it writes nothing there


@pytest.mark.parametrize("who", WHO)
def test_the_journal_copy_of_a_receive(deployment: Deployment, who: str) -> None:
    site = deployment.p1
    queue = fresh("journaled")
    own_queue(site, queue, "receive", journal=True)
    body = f"{queue} for {who}".encode()
    with site.client("root") as root:
        root.send(queue, body)
    with site.client(WHO[who]) as qm:
        message, denial = try_receive(lambda: qm.receive(queue, timeout=0))
    allowed = allowed_for(who)
    check_answer(denial, allowed, f"'carol' may not receive on queue '{queue}'")
    if allowed:
        assert message is not None
        assert message.body == body
    assert site.bodies(queue) == ([] if allowed else [body])
    assert site.bodies(f"{queue};journal") == ([body] if allowed else [])


@pytest.mark.parametrize("direction", ["queue-to-subqueue", "subqueue-to-queue"])
@pytest.mark.parametrize("who", WHO)
def test_a_move_between_a_queue_and_its_subqueue(
    deployment: Deployment, who: str, direction: str
) -> None:
    site = deployment.p1
    queue = fresh("moving")
    own_queue(site, queue, "receive", transactional=True)
    poison = f"{queue};poison"
    source, target = (queue, poison) if direction == "queue-to-subqueue" else (poison, queue)
    body = f"{queue} moved by {who}".encode()
    with site.client("root") as root:
        root.send(queue, body)
        if source == poison:
            assert root.move(queue, poison).count == 1
    with site.client(WHO[who]) as qm:
        denial = attempt(lambda: qm.move(source, target))
    allowed = allowed_for(who)
    check_answer(denial, allowed, "'carol' may not receive on queue")
    assert site.bodies(target) == ([body] if allowed else [])
    assert site.bodies(source) == ([] if allowed else [body])


@pytest.mark.parametrize("subqueue", ["retry", "poison"])
@pytest.mark.parametrize("who", WHO)
def test_an_aborted_receive_moves_the_message_to_retry_or_poison(
    deployment: Deployment, who: str, subqueue: str
) -> None:
    site = deployment.p1
    queue = fresh("poisoned")
    cycles = 1 if subqueue == "retry" else 0
    own_queue(
        site,
        queue,
        "receive",
        transactional=True,
        retry_count=0,
        retry_cycles=cycles,
        retry_delay=3600,
    )
    body = f"{queue} for {who}".encode()
    with site.client("root") as root:
        root.send(queue, body)
    with site.client(WHO[who]) as qm:
        tx = qm.begin()
        message, denial = try_receive(lambda: tx.receive(queue, timeout=0))
        tx.abort()
    allowed = allowed_for(who)
    check_answer(denial, allowed, f"'carol' may not receive on queue '{queue}'")
    moved_to = f"{queue};{subqueue}"
    if allowed:
        assert message is not None
        assert message.body == body
        wait_until(lambda: site.bodies(moved_to) == [body], timeout=10)
        assert site.bodies(queue) == []
    else:
        [left] = site.messages(queue)
        assert (left.body, left.abort_count) == (body, 0)
        assert site.bodies(moved_to) == []


# --------------------------------------------------------------------------- two-phase

#: Who resolves or lists a prepared transaction: its preparer (alice), an
#: administrator, or another principal (bob, with full control of the queue).
RESOLVERS: Final = {"preparer": "alice", "administrator": "root", "another-principal": "bob"}
RESOLUTIONS: Final[dict[str, Callable[[QueueManager, str], object]]] = {
    "commit": lambda qm, xid: qm.commit_prepared(xid),
    "abort": lambda qm, xid: qm.abort_prepared(xid),
    "commit-all": lambda qm, xid: qm.commit_prepared_all([xid]),
    "abort-all": lambda qm, xid: qm.abort_prepared_all([xid]),
}


def prepared_by_alice(site: Site, queue: str, xid: str) -> None:
    """Queue ``queue`` (bob has full control) with b"old" in it; alice prepares
    ``xid``, which sends b"new" and receives b"old"."""
    with site.client("alice") as alice:
        alice.create_queue(queue, transactional=True)
        alice.grant(queue, "bob", "full")
        alice.send(queue, b"old")
        tx = alice.begin(xid=xid)
        tx.send(queue, b"new")
        taken = tx.receive(queue, timeout=0)
        assert taken is not None
        assert taken.body == b"old"
        tx.prepare()


def states(site: Site, prefix: str, who: str = "root") -> dict[str, TransactionStatus]:
    with site.client(who) as qm:
        return {info.xid: info.state for info in qm.transactions(prefix, resolved=True)}


@pytest.mark.parametrize("verb", RESOLUTIONS)
@pytest.mark.parametrize("who", RESOLVERS)
def test_resolving_a_prepared_transaction(deployment: Deployment, who: str, verb: str) -> None:
    site = deployment.p1
    queue, xid = fresh("prepared"), fresh("xid") + "."
    prepared_by_alice(site, queue, xid)
    name = RESOLVERS[who]
    with site.client(name) as qm:
        denial = attempt(lambda: RESOLUTIONS[verb](qm, xid))
    allowed = who != "another-principal"
    check_answer(denial, allowed, f"'bob' may not resolve transaction '{xid}'")
    if not allowed:
        # Still in doubt: its send unseen, the message it received still held.
        assert states(site, xid) == {xid: TransactionStatus.PREPARED}
        assert site.bodies(queue) == []
    elif verb.startswith("commit"):
        assert states(site, xid) == {xid: TransactionStatus.COMMITTED}
        assert site.bodies(queue) == [b"new"]
    else:
        assert states(site, xid) == {xid: TransactionStatus.ABORTED}
        assert site.bodies(queue) == [b"old"]


@pytest.mark.parametrize("who", RESOLVERS)
def test_a_one_phase_commit_with_an_xid_keeps_its_outcome_with_its_owner(
    deployment: Deployment, who: str
) -> None:
    site = deployment.p1
    queue, xid = fresh("one-phase"), fresh("xid") + "."
    with site.client("alice") as alice:
        alice.create_queue(queue, transactional=True)
        alice.grant(queue, "bob", "full")
        tx = alice.begin(xid=xid)
        tx.send(queue, b"once")
        tx.commit()
    answers: list[object] = []
    with site.client(RESOLVERS[who]) as qm:
        denial = attempt(lambda: answers.append(qm.commit_prepared(xid)))
    allowed = who != "another-principal"
    check_answer(denial, allowed, f"'bob' may not resolve transaction '{xid}'")
    assert answers == ([Resolution.ALREADY_COMMITTED] if allowed else [])
    assert site.bodies(queue) == [b"once"]


@pytest.mark.parametrize("who", RESOLVERS)
def test_listing_transactions(deployment: Deployment, who: str) -> None:
    """``tx list`` shows a principal its own prepared transactions and kept
    outcomes only; an administrator sees every one."""
    site = deployment.p1
    prefix = fresh("listing") + ":"
    queue = fresh("listing")
    with site.client("alice") as alice:
        alice.create_queue(queue, transactional=True)
        alice.grant(queue, "bob", "send")
    for owner, xid, prepare in (
        ("alice", "alice-prepared", True),
        ("alice", "alice-committed", False),
        ("bob", "bob-prepared", True),
        ("root", "root-prepared", True),
    ):
        with site.client(owner) as qm:
            tx = qm.begin(xid=prefix + xid)
            tx.send(queue, xid.encode())
            if prepare:
                tx.prepare()
            else:
                tx.commit()
    listed = {
        xid.removeprefix(prefix): state
        for xid, state in states(site, prefix, RESOLVERS[who]).items()
    }
    prepared, committed = TransactionStatus.PREPARED, TransactionStatus.COMMITTED
    expected = {
        "preparer": {"alice-prepared": prepared, "alice-committed": committed},
        "administrator": {
            "alice-prepared": prepared,
            "alice-committed": committed,
            "bob-prepared": prepared,
            "root-prepared": prepared,
        },
        "another-principal": {"bob-prepared": prepared},
    }
    assert listed == expected[who]
