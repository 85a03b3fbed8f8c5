"""The authorization matrix with real daemons (docs/security.md): every way a
message is written into a queue, and every way one is read, removed or
resolved, against the queue's owner, a principal given only the right in
question, a principal given every right but that one, and - where a queue
manager can do it at all - a peer without TLS (``peer:anonymous``) and a
peer with a queue manager's certificate (mutual TLS). Each case checks the
answer (allowed, or ACCESS_DENIED / NACK_ACCESS_DENIED) and the effect (the
message written or not; nothing removed when refused).

Four daemons serve the whole module, with ``auth.required``, no rights by
default (``auth.default_acl = {}``) and ``root`` as administrator: ``qm-p1``
and ``qm-p2`` without TLS (each is ``peer:anonymous`` to the other), ``qm-t1``
and ``qm-t2`` with mutual TLS on the peer port (``peer:qm-t1``,
``peer:qm-t2``). Clients authenticate with tokens: ``alice`` creates the
queues (their owner, with full control), ``bob`` is given only the right in
question, ``carol`` every other right. Every case has queues and transaction
ids of its own.
"""

from __future__ import annotations

import itertools
import socket
import ssl
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, Unpack

import pytest
from helpers import (
    PEER_FAST,
    RIGHTS,
    DaemonProcess,
    auth_required,
    free_port,
    log_events,
    remote_queue,
    send_in_transaction,
    wait_until,
)
from pki import Pki

from qmgr.client import (
    AccessDenied,
    Acknowledge,
    Journal,
    Message,
    MessageClass,
    QueueManager,
    Resolution,
    SendOptions,
    TransactionStatus,
    connect,
    tls_context,
)

TOKENS: Final = {
    name: f"{name}-token-0123456789abcdefghijklmnopqrstuvwxyz"
    for name in ("root", "alice", "bob", "carol")
}
#: The client columns of the matrix: who makes the request.
WHO: Final = {"owner": "alice", "only-the-right": "bob", "without-the-right": "carol"}
#: The peer columns: the peer port without TLS, and with mutual TLS.
PEERS: Final = ("anonymous", "qm-certificate")
#: Where a dead message's copy is kept, by kind of message.
DEAD: Final = {"non-transactional": "system$;deadletter", "transactional": "system$;deadxact"}
#: The admin queue on each sending queue manager, for the NACKs of refused arrivals.
SENDER_ACKS: Final = "sender-acks"

_numbers = itertools.count(1)


def fresh(prefix: str) -> str:
    """A name no other case uses."""
    return f"{prefix}-{next(_numbers)}"


def all_but(*rights: str) -> list[str]:
    """Every right except ``rights``."""
    return [right for right in RIGHTS if right not in rights]


def allowed_for(who: str) -> bool:
    """Whether a client column is allowed (the owner, and the principal with the right)."""
    return who != "without-the-right"


# --------------------------------------------------------------------------- the deployment


def secured(*more: str) -> list[str]:
    """``qmgr serve`` arguments: tokens, ``root`` administrator, no rights by default."""
    return [*auth_required(TOKENS, admins=["root"]), *PEER_FAST, *more]


@dataclass(frozen=True)
class Site:
    """One queue manager of the deployment, and how its clients connect."""

    daemon: DaemonProcess
    tls: ssl.SSLContext | None

    def client(self, who: str) -> QueueManager:
        return connect(self.daemon.address, tls=self.tls, token=TOKENS[who])

    def queue(self, name: str) -> str:
        """The direct format name of queue ``name`` here, as a peer sends to it."""
        return remote_queue(self.daemon, name)

    def bodies(self, queue: str) -> list[bytes]:
        """The bodies of the visible messages of ``queue``, as the administrator sees them."""
        return [message.body for message in self.messages(queue)]

    def messages(self, queue: str) -> list[Message]:
        with self.client("root") as root:
            return root.peek_range(queue)

    def queue_names(self) -> set[str]:
        with self.client("root") as root:
            return {info.name for info in root.list_queues()}


@dataclass(frozen=True)
class Deployment:
    p1: Site
    p2: Site
    t1: Site
    t2: Site
    pki: Pki

    def pair(self, peer: str) -> tuple[Site, Site]:
        """``(sender, receiver)``: two queue managers that are ``peer`` to each other."""
        return (self.p2, self.p1) if peer == "anonymous" else (self.t2, self.t1)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    directory = tmp_path_factory.mktemp("matrix")
    pki = Pki(directory / "pki")
    arguments = {
        "qm-p1": secured(),
        "qm-p2": secured(),
        "qm-t1": pki.serve_args("qm-t1", *secured()),
        "qm-t2": pki.serve_args("qm-t2", *secured()),
    }
    daemons = {
        name: DaemonProcess(directory / name, extra_args=args, name=name)
        for name, args in arguments.items()
    }
    try:
        with ThreadPoolExecutor(len(daemons)) as pool:
            list(pool.map(DaemonProcess.start, daemons.values()))
        context = tls_context(pki.ca)
        found = Deployment(
            p1=Site(daemons["qm-p1"], None),
            p2=Site(daemons["qm-p2"], None),
            t1=Site(daemons["qm-t1"], context),
            t2=Site(daemons["qm-t2"], context),
            pki=pki,
        )
        # Each sender's admin queue lets its receiver's NACKs in.
        for sender, receiver_entry in ((found.p2, "peer:anonymous"), (found.t2, "peer:qm-t1")):
            with sender.client("root") as root:
                root.create_queue(SENDER_ACKS)
                root.grant(SENDER_ACKS, receiver_entry, "send")
        yield found
    finally:
        for process in daemons.values():
            process.close()


def own_queue(site: Site, name: str, right: str, *implied: str, **create: Any) -> None:
    """Queue ``name``, created by alice (full control); bob gets ``right`` alone, and
    carol every other right but those that include it (``implied``)."""
    with site.client("alice") as alice:
        alice.create_queue(name, **create)
        assert alice.grant(name, "bob", right)["bob"] == [right]
        alice.grant(name, "carol", *all_but(right, *implied))


def attempt(action: Callable[[], object]) -> AccessDenied | None:
    """Run ``action``: None if it was allowed, the refusal if it was not."""
    try:
        action()
    except AccessDenied as exc:
        return exc
    return None


def try_send(
    qm: QueueManager,
    destination: str,
    body: bytes,
    *,
    transactional: bool | None = None,
    **options: Unpack[SendOptions],
) -> tuple[str | None, AccessDenied | None]:
    """``(message id, None)`` for a send that was allowed, ``(None, refusal)`` otherwise."""
    try:
        return qm.send(destination, body, transactional=transactional, **options), None
    except AccessDenied as exc:
        return None, exc


def check_answer(denial: AccessDenied | None, allowed: bool, *parts: str) -> None:
    """The answer: allowed, or ACCESS_DENIED saying each of ``parts``."""
    if allowed:
        assert denial is None, f"refused: {denial}"
        return
    assert denial is not None, "allowed, but it should have been refused"
    for part in parts:
        assert part in denial.message, denial.message


def dead_copies(site: Site, queue: str, label: str) -> list[Message]:
    """The messages labelled ``label`` in ``site``'s dead-letter queue ``queue``."""
    return [message for message in site.messages(queue) if message.label == label]


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


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("who", WHO)
def test_send_to_a_multiple_element_name(deployment: Deployment, who: str, mode: str) -> None:
    site = deployment.p1
    first, second = two_queues_for_carol(site, mode)
    body = f"{first},{second} from {who}".encode()
    with site.client(WHO[who]) as qm:
        _, denial = send_as(qm, mode, f"{first},{second}", body)
    allowed = allowed_for(who)
    check_answer(denial, allowed, f"'carol' may not send on queue '{second}'")
    # All copies or none: carol's refusal writes nothing into the queue she may send to.
    assert site.bodies(first) == site.bodies(second) == ([body] if allowed else [])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("who", WHO)
def test_send_to_a_distribution_list(deployment: Deployment, who: str, mode: str) -> None:
    site = deployment.p1
    first, second = two_queues_for_carol(site, mode)
    listed = fresh("list")
    with site.client("root") as root:
        root.create_list(listed, [first, second])
    body = f"DL={listed} from {who}".encode()
    with site.client(WHO[who]) as qm:
        _, denial = send_as(qm, mode, f"DL={listed}", body)
    allowed = allowed_for(who)
    check_answer(denial, allowed, f"'carol' may not send on queue '{second}'")
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
    name = LIST_CHANGERS[who]
    with site.client(name) as qm:
        denial = attempt(lambda: LIST_CHANGES[change](qm, listed, first, second))
    allowed = who == "administrator"
    check_answer(denial, allowed, f"'{name}' is not an administrator (auth.admins)")
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


OUTGOING_CONTROLS: Final[dict[str, Callable[[QueueManager, str], object]]] = {
    "pause": lambda qm, destination: qm.pause_outgoing(destination),
    "resume": lambda qm, destination: qm.resume_outgoing(destination),
    "purge": lambda qm, destination: qm.purge_outgoing(destination),
}
OUTGOING_CONTROLLERS: Final = {"sender": "alice", "administrator": "root", "other": "bob"}


def unreachable(name: str) -> str:
    """A remote queue on a queue manager that does not answer: messages to it wait."""
    return f"DIRECT=TCP:127.0.0.1:{free_port()}\\private$\\{name}"


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
    name = OUTGOING_CONTROLLERS[who]
    with site.client(name) as qm:
        denial = attempt(lambda: OUTGOING_CONTROLS[control](qm, destination))
    allowed = who == "administrator"
    check_answer(denial, allowed, f"'{name}' is not an administrator (auth.admins)")
    with site.client("root") as root:
        [info] = [info for info in root.outgoing() if info.destination == destination]
        root.purge_outgoing(destination)
    # Refused, nothing changed; allowed, the control did what it says.
    paused = {"pause": allowed, "resume": not allowed, "purge": False}[control]
    assert (info.state == "paused") == paused
    assert info.waiting == (0 if allowed and control == "purge" else 1)


@pytest.mark.parametrize("who", WHO)
def test_naming_an_admin_queue_for_acknowledgments(deployment: Deployment, who: str) -> None:
    site = deployment.p1
    queue, acks = fresh("destination"), fresh("acks")
    with site.client("alice") as alice:
        alice.create_queue(queue)
        alice.grant(queue, "everyone", "send")  # the destination lets everyone send
    own_queue(site, acks, "send")
    body = f"{queue} from {who}".encode()
    with site.client(WHO[who]) as qm:
        sent, denial = try_send(
            qm, queue, body, acknowledge=Acknowledge.FULL_REACH_QUEUE, admin_queue=acks
        )
    allowed = allowed_for(who)
    check_answer(
        denial, allowed, f"'carol' may not send on queue '{acks}'", "named as the admin queue"
    )
    if allowed:
        assert site.bodies(queue) == [body]
        [ack] = site.messages(acks)
        assert ack.message_class == MessageClass.ACK_REACH_QUEUE
        assert ack.acknowledged_id == sent
    else:
        assert site.bodies(queue) == []
        assert site.bodies(acks) == []


@pytest.mark.parametrize("who", WHO)
def test_naming_a_response_queue(deployment: Deployment, who: str) -> None:
    site = deployment.p1
    queue, responses = fresh("destination"), fresh("responses")
    with site.client("alice") as alice:
        alice.create_queue(queue)
        alice.grant(queue, "everyone", "send")
    own_queue(site, responses, "send")
    body = f"{queue} from {who}".encode()
    with site.client(WHO[who]) as qm:
        _, denial = try_send(qm, queue, body, response_queue=responses)
    allowed = allowed_for(who)
    check_answer(
        denial,
        allowed,
        f"'carol' may not send on queue '{responses}'",
        "named as the response queue",
    )
    if allowed:
        [message] = site.messages(queue)
        assert message.body == body
        assert responses in message.response_queue
    else:
        assert site.bodies(queue) == []
    assert site.bodies(responses) == []  # naming it writes nothing there


@pytest.mark.parametrize("who", WHO)
def test_the_journal_copy_of_a_receive(deployment: Deployment, who: str) -> None:
    site = deployment.p1
    queue = fresh("journaled")
    own_queue(site, queue, "receive", journal=True)
    body = f"{queue} for {who}".encode()
    with site.client("root") as root:
        root.send(queue, body)
    received: list[Message | None] = []
    with site.client(WHO[who]) as qm:
        denial = attempt(lambda: received.append(qm.receive(queue, timeout=0)))
    allowed = allowed_for(who)
    check_answer(denial, allowed, f"'carol' may not receive on queue '{queue}'")
    if allowed:
        [message] = received
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
    received: list[Message | None] = []
    with site.client(WHO[who]) as qm:
        tx = qm.begin()
        denial = attempt(lambda: received.append(tx.receive(queue, timeout=0)))
        tx.abort()
    allowed = allowed_for(who)
    check_answer(denial, allowed, f"'carol' may not receive on queue '{queue}'")
    moved_to = f"{queue};{subqueue}"
    if allowed:
        [message] = received
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


# --------------------------------------------------------------------------- peers

#: A peer's message to a queue whose list has one entry (or none) with send:
#: ``(peer, entry, allowed)``.
ARRIVALS: Final = {
    "anonymous-peer:anonymous": ("anonymous", "peer:anonymous", True),
    "anonymous-peer:any": ("anonymous", "peer:*", True),
    "anonymous-everyone": ("anonymous", "everyone", True),
    "anonymous-peer:qm-t2": ("anonymous", "peer:qm-t2", False),
    "anonymous-nothing": ("anonymous", None, False),
    "qm-certificate-peer:qm-t2": ("qm-certificate", "peer:qm-t2", True),
    "qm-certificate-peer:any": ("qm-certificate", "peer:*", True),
    "qm-certificate-everyone": ("qm-certificate", "everyone", True),
    "qm-certificate-peer:anonymous": ("qm-certificate", "peer:anonymous", False),
    "qm-certificate-user-qm-t2": ("qm-certificate", "qm-t2", False),
    "qm-certificate-peer:qm-other": ("qm-certificate", "peer:qm-other", False),
    "qm-certificate-nothing": ("qm-certificate", None, False),
}


def by_peer(table: dict[str, tuple[str, str | None, bool]]) -> pytest.MarkDecorator:
    """Parametrize a test with ``(peer, entry, allowed)`` from ``table``, its keys the ids."""
    return pytest.mark.parametrize(
        ("peer", "entry", "allowed"), list(table.values()), ids=list(table)
    )


def send_for_acknowledgment(
    sender: Site, receiver: Site, queue: str, label: str, admin_queue: str
) -> str:
    """Send ``label`` (as label and body) from ``sender`` to ``queue`` on ``receiver``,
    asking for full reach-queue acknowledgments into ``admin_queue``; return its id."""
    with sender.client("root") as root:
        return root.send(
            receiver.queue(queue),
            label.encode(),
            label=label,
            acknowledge=Acknowledge.FULL_REACH_QUEUE,
            admin_queue=admin_queue,
        )


def grant_if(site: Site, queue: str, entry: str | None, *, transactional: bool = False) -> None:
    """Create ``queue`` on ``site``; ``entry`` (if any) may send to it."""
    with site.client("root") as root:
        root.create_queue(queue, transactional=transactional)
        if entry is not None:
            root.grant(queue, entry, "send")
        assert set(root.permissions(queue)) == {"root"} | ({entry} if entry else set())


@by_peer(ARRIVALS)
def test_a_message_from_a_peer(
    deployment: Deployment, peer: str, entry: str | None, allowed: bool
) -> None:
    """Let in if the destination's list gives send to that peer; else refused at
    arrival with NACK_ACCESS_DENIED: kept in system$;deadxact, and the NACK
    goes to the sender's admin queue."""
    sender, receiver = deployment.pair(peer)
    queue = fresh("arrival")
    grant_if(receiver, queue, entry, transactional=True)
    label = f"{queue} from {peer}"
    with sender.client("root") as root:
        with root.begin() as tx:
            tx.send(
                receiver.queue(queue),
                label.encode(),
                label=label,
                acknowledge=Acknowledge.NACK_REACH_QUEUE,
                admin_queue=SENDER_ACKS,
                journal=Journal.DEADLETTER,
            )
            tx.commit()
    if allowed:
        with receiver.client("root") as root:
            message = root.receive(queue, timeout=20)
            assert message is not None
            assert message.body == label.encode()
        assert dead_copies(receiver, DEAD["transactional"], label) == []
        return
    wait_until(lambda: bool(dead_copies(receiver, DEAD["transactional"], label)), timeout=20)
    [kept] = dead_copies(receiver, DEAD["transactional"], label)
    assert kept.message_class == MessageClass.NACK_ACCESS_DENIED
    assert receiver.bodies(queue) == []
    wait_until(lambda: bool(dead_copies(sender, SENDER_ACKS, label)), timeout=20)
    [nack] = dead_copies(sender, SENDER_ACKS, label)
    assert nack.message_class == MessageClass.NACK_ACCESS_DENIED


#: The admin queue's entry (or none) for an acknowledgment: ``(peer, entry, allowed)``.
ACKNOWLEDGMENTS_HERE: Final = {
    "anonymous-peer:anonymous": ("anonymous", "peer:anonymous", True),
    "anonymous-peer:any": ("anonymous", "peer:*", True),
    "anonymous-nothing": ("anonymous", None, False),
    "qm-certificate-peer:qm-t2": ("qm-certificate", "peer:qm-t2", True),
    "qm-certificate-peer:anonymous": ("qm-certificate", "peer:anonymous", False),
    "qm-certificate-nothing": ("qm-certificate", None, False),
}


@by_peer(ACKNOWLEDGMENTS_HERE)
def test_a_peers_message_names_an_admin_queue_here(
    deployment: Deployment, peer: str, entry: str | None, allowed: bool
) -> None:
    """A message from a peer whose admin queue is a queue of the receiving queue
    manager: its acknowledgment is written there only if that queue lets the
    peer (the message's source) send; otherwise it is kept in
    system$;deadletter with NACK_ACCESS_DENIED."""
    sender, receiver = deployment.pair(peer)
    queue, acks = fresh("destination"), fresh("acks-here")
    grant_if(receiver, queue, "peer:*")
    grant_if(receiver, acks, entry)
    label = f"{queue} from {peer}"
    sent = send_for_acknowledgment(sender, receiver, queue, label, receiver.queue(acks))
    with receiver.client("root") as root:
        message = root.receive(queue, timeout=20)  # the report is written with it
        assert message is not None
        assert message.body == label.encode()
    refused = dead_copies(receiver, DEAD["non-transactional"], label)
    if allowed:
        [ack] = receiver.messages(acks)
        assert ack.message_class == MessageClass.ACK_REACH_QUEUE
        assert ack.acknowledged_id == sent
        assert refused == []
    else:
        assert receiver.messages(acks) == []
        [kept] = refused
        assert kept.message_class == MessageClass.NACK_ACCESS_DENIED
        assert kept.correlation_id is not None
        assert kept.response_queue.endswith(queue)  # an acknowledgment names its message's queue


#: The sender's admin queue's entry (or none) for the receiver's acknowledgment.
ACKNOWLEDGMENTS_BACK: Final = {
    "anonymous-peer:anonymous": ("anonymous", "peer:anonymous", True),
    "anonymous-nothing": ("anonymous", None, False),
    "qm-certificate-peer:qm-t1": ("qm-certificate", "peer:qm-t1", True),
    "qm-certificate-peer:qm-t2": ("qm-certificate", "peer:qm-t2", False),
    "qm-certificate-nothing": ("qm-certificate", None, False),
}


@by_peer(ACKNOWLEDGMENTS_BACK)
def test_a_peers_acknowledgment_into_an_admin_queue_here(
    deployment: Deployment, peer: str, entry: str | None, allowed: bool
) -> None:
    """The acknowledgment a peer sends back is a message from that peer: let
    into the local admin queue only if its list gives the peer send."""
    sender, receiver = deployment.pair(peer)
    queue, acks = fresh("destination"), fresh("acks-back")
    grant_if(receiver, queue, "peer:*")
    grant_if(sender, acks, entry)
    label = f"{queue} from {peer}"
    sent = send_for_acknowledgment(sender, receiver, queue, label, acks)
    if allowed:
        wait_until(lambda: bool(sender.messages(acks)), timeout=20)
        [ack] = sender.messages(acks)
        assert ack.message_class == MessageClass.ACK_REACH_QUEUE
        assert ack.acknowledged_id == sent
        return
    wait_until(lambda: bool(dead_copies(sender, DEAD["non-transactional"], label)), timeout=20)
    [kept] = dead_copies(sender, DEAD["non-transactional"], label)
    assert kept.message_class == MessageClass.NACK_ACCESS_DENIED
    assert kept.acknowledged_id == sent
    assert sender.messages(acks) == []
    assert receiver.bodies(queue) == [label.encode()]  # the message itself was let in


def test_a_client_certificate_is_refused_on_the_peer_port(deployment: Deployment) -> None:
    """The peer port takes queue managers' certificates only: a client's
    (clientAuth alone), though signed by the same CA, opens no session."""
    site = deployment.t1
    cert, key = deployment.pki.client("alice")
    context = ssl.create_default_context(cafile=str(deployment.pki.ca))
    context.load_cert_chain(cert, key)
    answer = b""
    with socket.create_connection(("127.0.0.1", site.daemon.peer_port), timeout=10) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"\x10\xc0\x0b\x00LIOR" + bytes(64))  # an EstablishConnection's start
                answer = tls.recv(4096)
        except (ssl.SSLError, OSError):
            pass  # refused in the handshake, or reset after it
    assert answer == b""

    def refused() -> bool:
        return any(
            "(CN alice) is not a queue manager's" in str(event.get("reason"))
            for event in log_events(site.daemon, "peer_refused")
        )

    wait_until(refused, timeout=10)
    opened = {event.get("identity") for event in log_events(site.daemon, "peer_session_opened")}
    assert "alice" not in opened


# =========================================================================== reads


ONE, TWO = b"one", b"two"


def _peek(qm: QueueManager, queue: str, last: int) -> object:
    message = qm.peek(queue)
    return None if message is None else message.body


def _receive(qm: QueueManager, queue: str, last: int) -> object:
    message = qm.receive(queue, timeout=0)
    return None if message is None else message.body


@dataclass(frozen=True)
class Read:
    """A request that reads or removes: the right it needs (and those that
    include it), what it answers, and what an allowed one leaves."""

    right: str
    implied: tuple[str, ...]
    run: Callable[[QueueManager, str, int], object]
    answer: object
    left: Sequence[bytes] | None  # None: the queue is gone


READS: Final = {
    "peek": Read("peek", ("receive",), _peek, ONE, [ONE, TWO]),
    "receive": Read("receive", (), _receive, ONE, [TWO]),
    "peek_range": Read(
        "peek", ("receive",), lambda qm, q, last: [m.body for m in qm.peek_range(q)], [ONE, TWO],
        [ONE, TWO],
    ),
    "measure_range": Read(
        "peek", ("receive",), lambda qm, q, last: qm.measure_range(q).count, 2, [ONE, TWO]
    ),
    "remove_through": Read("receive", (), lambda qm, q, last: qm.remove_through(q, last), 2, []),
    "purge": Read("purge", (), lambda qm, q, last: qm.purge_queue(q), 2, []),
    "delete": Read("delete", (), lambda qm, q, last: qm.delete_queue(q), 2, None),
}  # fmt: skip
#: Where the messages are read: the queue, its journal, a subqueue (both follow its list).
TARGETS: Final = {"queue": "", "journal": ";journal", "subqueue": ";poison"}
READ_CASES: Final = [
    (operation, target)
    for operation in READS
    for target in TARGETS
    if target == "queue" or operation not in ("purge", "delete")
]


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize(
    ("operation", "target"), READ_CASES, ids=[f"{op}-{target}" for op, target in READ_CASES]
)
def test_reading_and_removing(
    deployment: Deployment, operation: str, target: str, who: str
) -> None:
    site = deployment.p1
    read = READS[operation]
    queue = fresh(operation.replace("_", "-"))
    own_queue(site, queue, read.right, *read.implied, journal=target == "journal")
    name = queue + TARGETS[target]
    with site.client("root") as root:
        root.send(queue, ONE)
        root.send(queue, TWO)
        if target == "journal":
            for _ in range(2):
                assert root.receive(queue, timeout=0) is not None
        elif target == "subqueue":
            assert root.move(queue, name, all=True).count == 2
        last = root.peek_range(name)[-1].lookup_id
    answers: list[object] = []
    with site.client(WHO[who]) as qm:
        denial = attempt(lambda: answers.append(read.run(qm, name, last)))
    allowed = allowed_for(who)
    check_answer(denial, allowed, f"'carol' may not {read.right} on queue")
    if not allowed:
        assert site.bodies(name) == [ONE, TWO]  # nothing removed
        return
    assert answers == [read.answer]
    if read.left is None:
        assert queue not in site.queue_names()
    else:
        assert site.bodies(name) == list(read.left)


#: ``(who, where the message is, the kinds of findings the trace shows)``.
TRACES: Final = {
    "owner": ("alice", "local", ["queue"]),
    "only-the-right": ("bob", "local", ["queue"]),
    "without-the-right": ("carol", "local", []),
    "administrator": ("root", "local", ["queue"]),
    "outgoing-sender": ("alice", "outgoing", []),
    "outgoing-administrator": ("root", "outgoing", ["outgoing"]),
    "confirmation-sender": ("alice", "confirmation", []),
    "confirmation-administrator": ("root", "confirmation", ["awaiting-confirmation"]),
}


@pytest.mark.parametrize(("name", "where", "kinds"), list(TRACES.values()), ids=list(TRACES))
def test_trace(deployment: Deployment, name: str, where: str, kinds: list[str]) -> None:
    """A trace shows a principal only what is in queues it may peek: outgoing
    queues and the queue manager's own records (copies awaiting confirmation)
    only to administrators. It is never refused."""
    site = deployment.p1
    queue = fresh("traced")
    if where == "local":
        own_queue(site, queue, "peek", "receive")
        with site.client("root") as root:
            sent = root.send(queue, b"traced")
    elif where == "outgoing":  # a queue manager that does not answer: it waits there
        with site.client("alice") as alice:
            sent = alice.send(unreachable(queue), b"far")
    else:  # delivered to qm-p2, in doubt until received there
        grant_if(deployment.p2, queue, "peer:anonymous", transactional=True)
        with site.client("alice") as alice:
            sent = alice.send(
                deployment.p2.queue(queue),
                b"confirm me",
                transactional=True,
                journal=Journal.DEADLETTER,  # asks for the confirmation process
            )
    with site.client(name) as qm:
        findings = qm.trace(sent).findings
    found = [finding.kind for finding in findings]
    if where == "confirmation":
        # In flight, it may also still be in the outgoing queue (administrators see that too).
        found = [kind for kind in found if kind != "outgoing"]
    assert found == kinds
    if kinds:
        assert all(finding.place for finding in findings)


# --------------------------------------------------------------------------- dead letters
# Last in the module: their messages, sent before its first test, expire meanwhile.


@dataclass(frozen=True)
class Expiry:
    """A message sent to expire at once with MQMSG_DEADLETTER, and the answer."""

    site: Site
    dead_letter_queue: str
    label: str
    message_id: str | None
    denial: AccessDenied | None

    def copies(self) -> list[Message]:
        """Its copies in the dead-letter queue."""
        return dead_copies(self.site, self.dead_letter_queue, self.label)

    def kept(self) -> bool:
        return bool(self.copies())


@pytest.fixture(scope="module", autouse=True)
def expiring(deployment: Deployment) -> dict[str, Expiry]:
    """Every dead-letter case's message, sent once for the module before its first
    test (so the expirations are waited for together, while the tests before the
    dead-letter ones run)."""
    site = deployment.p1
    found: dict[str, Expiry] = {}
    for kind, dead_letter_queue in DEAD.items():
        queue = fresh("expiring")
        own_queue(site, queue, "send", transactional=kind == "transactional")
        for who, name in WHO.items():
            label = f"{queue} from {who}"
            with site.client(name) as qm:
                sent, denial = try_send(
                    qm,
                    queue,
                    label.encode(),
                    label=label,
                    time_to_be_received=0,
                    journal=Journal.DEADLETTER,
                )
            found[f"{who}-{kind}"] = Expiry(site, dead_letter_queue, label, sent, denial)
    for peer in PEERS:
        sender, receiver = deployment.pair(peer)
        queue = fresh("expiring")
        with receiver.client("root") as root:
            root.create_queue(queue)
            root.grant(queue, "peer:*", "send")
        label = f"{queue} from {peer}"
        with sender.client("root") as root:
            sent = root.send(
                receiver.queue(queue),
                label.encode(),
                label=label,
                time_to_be_received=3,  # arrives first, then dies there
                journal=Journal.DEADLETTER,
            )
        found[peer] = Expiry(receiver, DEAD["non-transactional"], label, sent, None)
    return found


@pytest.fixture(scope="module")
def expired(expiring: dict[str, Expiry]) -> dict[str, Expiry]:
    """The ``expiring`` cases, their copies already kept."""
    for case in expiring.values():
        if case.message_id is not None:
            wait_until(case.kept, timeout=30)
    return expiring


@pytest.mark.parametrize("kind", DEAD)
@pytest.mark.parametrize("who", WHO)
def test_a_dead_letter_copy(
    deployment: Deployment, expired: dict[str, Expiry], who: str, kind: str
) -> None:
    """A message that expires with MQMSG_DEADLETTER is kept in system$;deadletter
    or system$;deadxact if its send was allowed; the dead-letter queues are
    the administrators' to read (and to see in a trace)."""
    case = expired[f"{who}-{kind}"]
    allowed = allowed_for(who)
    check_answer(case.denial, allowed, "'carol' may not send on queue")
    with case.site.client(WHO[who]) as qm:
        refused = attempt(lambda: qm.peek_range(case.dead_letter_queue))
        traced = () if case.message_id is None else qm.trace(case.message_id).findings
    check_answer(refused, False, f"'{WHO[who]}' may not peek on queue")
    assert traced == ()
    copies = case.copies()
    if not allowed:
        assert copies == []
        return
    [copy] = copies
    assert copy.message_class == MessageClass.NACK_RECEIVE_TIMEOUT
    assert copy.id == case.message_id
    with case.site.client("root") as root:
        assert case.message_id is not None
        assert [f.kind for f in root.trace(case.message_id).findings] == ["dead-letter"]


@pytest.mark.parametrize("peer", PEERS)
def test_a_peers_message_that_dies_here_is_kept_in_the_dead_letter_queue(
    expired: dict[str, Expiry], peer: str
) -> None:
    case = expired[peer]
    [copy] = case.copies()
    assert copy.id == case.message_id
    assert copy.message_class in (
        MessageClass.NACK_RECEIVE_TIMEOUT,
        MessageClass.NACK_REACH_QUEUE_TIMEOUT,  # on a slow machine it may die on its way
    )
