"""The authorization matrix's reads (docs/security.md): reading, removing and
tracing messages, and the dead-letter copies kept of messages that die here,
each tried by the owner, a principal given only the right in question and one
given every other right. The deployment is :mod:`authorization_kit`'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import pytest
from authorization_kit import (
    DEAD,
    PEERS,
    WHO,
    Deployment,
    Site,
    allowed_for,
    attempt,
    check_answer,
    dead_copies,
    fresh,
    grant_if,
    own_queue,
    try_send,
    unreachable,
)
from helpers import (
    wait_until,
)

from qmgr.client import (
    AccessDenied,
    Journal,
    Message,
    MessageClass,
    QueueManager,
)

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
