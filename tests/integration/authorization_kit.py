"""The deployment of the authorization matrix (docs/security.md) and the helpers
its tests share: four daemons with ``auth.required``, no rights by default
(``auth.default_acl = {}``) and ``root`` as administrator: ``qm-p1`` and
``qm-p2`` without TLS (each is ``peer:anonymous`` to the other), ``qm-t1`` and
``qm-t2`` with mutual TLS on the peer port (``peer:qm-t1``, ``peer:qm-t2``).
Clients authenticate with tokens: ``alice`` creates the queues (their owner,
with full control), ``bob`` is given only the right in question, ``carol``
every other right. The ``deployment`` fixture (``conftest.py``) starts it once
for the matrix's test modules; every case has queues and transaction ids of
its own.
"""

from __future__ import annotations

import itertools
import ssl
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Unpack

from helpers import (
    PEER_FAST,
    RIGHTS,
    DaemonProcess,
    auth_required,
    free_port,
    remote_queue,
)
from pki import Pki

from qmgr.client import (
    AccessDenied,
    Message,
    QueueManager,
    SendOptions,
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


def try_receive(
    receive: Callable[[], Message | None],
) -> tuple[Message | None, AccessDenied | None]:
    """``(what the receive returned, None)`` for a receive that was allowed,
    ``(None, refusal)`` otherwise."""
    try:
        return receive(), None
    except AccessDenied as exc:
        return None, exc


def open_to_everyone(site: Site, name: str) -> None:
    """Queue ``name``, created by alice, to which everyone may send."""
    with site.client("alice") as alice:
        alice.create_queue(name)
        alice.grant(name, "everyone", "send")


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


def unreachable(name: str) -> str:
    """A remote queue on a queue manager that does not answer: messages to it wait."""
    return f"DIRECT=TCP:127.0.0.1:{free_port()}\\private$\\{name}"


def grant_if(site: Site, queue: str, entry: str | None, *, transactional: bool = False) -> None:
    """Create ``queue`` on ``site``; ``entry`` (if any) may send to it."""
    with site.client("root") as root:
        root.create_queue(queue, transactional=transactional)
        if entry is not None:
            root.grant(queue, entry, "send")
        assert set(root.permissions(queue)) == {"root"} | ({entry} if entry else set())


@contextmanager
def started_deployment(directory: Path) -> Iterator[Deployment]:
    """The four daemons started in ``directory`` (stopped on exit), each sender's
    admin queue open to its receiver's NACKs."""
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
