"""The authorization matrix's peer columns (docs/security.md): what a peer
without TLS (``peer:anonymous``) and a peer with a queue manager's certificate
(mutual TLS) may write into a queue here, their acknowledgments, and the
client certificates the peer port refuses. The deployment is
:mod:`authorization_kit`'s."""

from __future__ import annotations

import socket
import ssl
from typing import Final

import pytest
from authorization_kit import (
    DEAD,
    SENDER_ACKS,
    Deployment,
    Site,
    dead_copies,
    fresh,
    grant_if,
)
from helpers import (
    log_events,
    wait_until,
)

from qmgr.client import (
    Acknowledge,
    Journal,
    MessageClass,
)

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


@by_peer(ARRIVALS)
def test_a_message_from_a_peer(
    deployment: Deployment, peer: str, entry: str | None, allowed: bool
) -> None:
    """Let in if the destination's list gives send to that peer; else refused at
    arrival with NACK_ACCESS_DENIED: kept in the sender's system$;deadxact (it
    asked for MQMSG_DEADLETTER, so its source keeps the copy on the FinalAck, as
    MSMQ's does), none at the receiver, and the NACK goes to the sender's admin
    queue."""
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
    wait_until(lambda: bool(dead_copies(sender, DEAD["transactional"], label)), timeout=20)
    [kept] = dead_copies(sender, DEAD["transactional"], label)
    assert kept.message_class == MessageClass.NACK_ACCESS_DENIED
    assert dead_copies(receiver, DEAD["transactional"], label) == []
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
