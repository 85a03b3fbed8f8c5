"""Two and three real queue managers on loopback exchanging messages."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from helpers import (
    PEER_FAST,
    ROUTER,
    DaemonProcess,
    Peers,
    log_events,
    remote_queue,
    route_args,
    send_in_transaction,
    settings,
    wait_until,
)

from qmgr.client import OutgoingInfo, QueueManager, connect
from wire import MessageClass


def drain(qm: QueueManager, queue: str, count: int, timeout: float = 30.0) -> list[bytes]:
    bodies: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(bodies) < count and time.monotonic() < deadline:
        message = qm.receive(queue, timeout=max(0.0, deadline - time.monotonic()))
        if message is None:
            break
        bodies.append(message.body)
    return bodies


def send_transactions(qm: QueueManager, destination: str, sizes: list[int]) -> list[bytes]:
    """Commit one transaction per size, of that many messages ``b"T-I"`` (the
    transaction's and the message's numbers) to ``destination``; return the
    bodies in commit order."""
    expected = []
    for t, size in enumerate(sizes):
        with qm.begin() as tx:
            for i in range(size):
                body = f"{t}-{i}".encode()
                tx.send(destination, body)
                expected.append(body)
    return expected


def settled(qm: QueueManager, timeout: float = 10.0) -> list[OutgoingInfo]:
    """Its outgoing queues once none has a message waiting or unacknowledged
    (or as they are when ``timeout`` runs out)."""
    deadline = time.monotonic() + timeout
    while True:
        outgoing = qm.outgoing()
        quiet = all(q.waiting == 0 and q.unacknowledged == 0 for q in outgoing)
        if (outgoing and quiet) or time.monotonic() > deadline:
            return outgoing
        time.sleep(0.05)


def assert_exactly(qm: QueueManager, queue: str, expected: list[bytes]) -> None:
    """``expected`` arrive in ``queue``, in that order, and nothing more (within 0.3 s)."""
    assert drain(qm, queue, len(expected)) == expected
    assert qm.receive(queue, timeout=0.3) is None


def assert_quiet(outgoing: list[OutgoingInfo]) -> None:
    """There is an outgoing queue, and nothing in the first waits or is unacknowledged."""
    assert outgoing
    assert outgoing[0].waiting == 0
    assert outgoing[0].unacknowledged == 0


@pytest.fixture
def stopped_receiver(
    daemon_factory: Callable[..., DaemonProcess],
) -> tuple[DaemonProcess, DaemonProcess]:
    """``(a, b)``: ``qm-a`` running, and ``qm-b`` (started first) with a transactional
    queue ``orders``, stopped."""
    b = daemon_factory(name="qm-b", extra_args=PEER_FAST)
    a = daemon_factory(name="qm-a", extra_args=PEER_FAST)
    with connect(b.address) as qb:
        qb.create_queue("orders", transactional=True)
    b.stop()
    return a, b


def test_transactions_arrive_once_in_commit_order(peers: Peers) -> None:
    _, b, qa, qb = peers
    qb.create_queue("orders", transactional=True)
    expected = send_transactions(qa, remote_queue(b, "orders"), [t % 5 + 1 for t in range(20)])
    assert_exactly(qb, "orders", expected)
    assert_quiet(settled(qa))


def test_a_message_for_a_missing_queue_is_dead_lettered_at_the_destination(peers: Peers) -> None:
    _, b, qa, qb = peers
    qb.create_queue("plain")
    with qa.begin() as tx:
        tx.send(remote_queue(b, "missing"), b"lost?")
        tx.send(remote_queue(b, "plain"), b"not transactional")
    dead = drain(qb, "system$;deadxact", 2)
    assert dead == [b"lost?", b"not transactional"]
    assert qb.peek("plain", timeout=0) is None


@pytest.mark.parametrize("delivery", [0, 1])
def test_non_transactional_messages_arrive(peers: Peers, delivery: int) -> None:
    _, b, qa, qb = peers
    qb.create_queue("plain")
    for i in range(10):
        qa.send(remote_queue(b, "plain"), f"m{i}".encode(), delivery=delivery)
    got = drain(qb, "plain", 10)
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(10))


def test_a_router_relays_exactly_once_in_order(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    c = daemon_factory(name="qm-c", extra_args=PEER_FAST)
    r = daemon_factory(name="qm-r", extra_args=(*PEER_FAST, *ROUTER))
    a = daemon_factory(name="qm-a", extra_args=(*PEER_FAST, *route_args(c.peer_port, r.peer_port)))
    with connect(a.address) as qa, connect(c.address) as qc, connect(r.address) as qr:
        qc.create_queue("orders", transactional=True)
        expected = send_transactions(qa, remote_queue(c, "orders"), [3] * 10)
        assert drain(qc, "orders", len(expected)) == expected
        (outgoing,) = qa.outgoing()
        assert outgoing.next_hop == f"127.0.0.1:{r.peer_port}"
        (outgoing,) = settled(qa)
        assert outgoing.unacknowledged == 0, "the destination's OrderAck came back through R"
        assert_quiet(settled(qr))


def test_status_shows_outgoing_and_incoming_sequences(peers: Peers) -> None:
    _, b, qa, qb = peers
    qb.create_queue("orders", transactional=True)
    send_in_transaction(qa, remote_queue(b, "orders"), b"x")
    assert drain(qb, "orders", 1) == [b"x"]
    status_a = qa.status()
    assert [q.destination for q in status_a.outgoing] == [remote_queue(b, "orders")]
    assert not [q.name for q in status_a.queues if q.name.startswith("outgoing$")]
    incoming = qb.status().incoming
    assert len(incoming) == 1
    assert incoming[0].queue == "orders"
    assert incoming[0].last_number == 1
    assert str(incoming[0].source_qm) == str(qa.qm_guid)


def test_purge_pause_and_resume_of_an_outgoing_queue(
    stopped_receiver: tuple[DaemonProcess, DaemonProcess],
) -> None:
    a, b = stopped_receiver
    dest = remote_queue(b, "orders")
    with connect(a.address) as qa:
        with qa.begin() as tx:
            for i in range(5):
                tx.send(dest, f"purged {i}".encode())
        (info,) = qa.outgoing()
        assert info.waiting + info.unacknowledged == 5
        assert qa.purge_outgoing(dest) == 5
        (info,) = qa.outgoing()
        assert info.waiting == 0
        assert info.unacknowledged == 0
        qa.pause_outgoing(dest)
        send_in_transaction(qa, dest, b"after the purge")
    a.stop()
    a.start()  # the pause is kept across a restart
    b.start()
    with connect(a.address) as qa, connect(b.address) as qb:
        (info,) = qa.outgoing()
        assert info.state == "paused"
        assert info.waiting == 1
        assert qb.receive("orders", timeout=0.5) is None
        qa.resume_outgoing(dest)
        assert_exactly(qb, "orders", [b"after the purge"])


def test_a_restarted_sender_delivers_what_it_had_committed(
    stopped_receiver: tuple[DaemonProcess, DaemonProcess],
) -> None:
    a, b = stopped_receiver
    with connect(a.address) as qa:
        for t in range(30):
            send_in_transaction(qa, remote_queue(b, "orders"), f"{t}".encode())
    a.kill()
    a.start()
    b.start()
    with connect(b.address) as qb:
        assert_exactly(qb, "orders", [f"{t}".encode() for t in range(30)])


def test_rejections_at_arrival_keep_the_message_with_its_class(peers: Peers) -> None:
    _, b, qa, qb = peers
    qb.create_queue("small", transactional=True, quota=10)
    qb.create_queue("txq", transactional=True)
    with qa.begin() as tx:
        tx.send(remote_queue(b, "small"), b"fits")
        tx.send(remote_queue(b, "small"), b"does not fit")
        tx.send(remote_queue(b, "missing"), b"nowhere")
    qa.send(remote_queue(b, "txq"), b"not transactional", transactional=False)
    send_in_transaction(qa, remote_queue(b, "small"), b"later")
    assert drain(qb, "small", 2) == [b"fits", b"later"]
    dead = []

    def three_dead() -> bool:
        for queue in ("system$;deadxact", "system$;deadletter"):
            while (message := qb.receive(queue, timeout=0)) is not None:
                dead.append((message.body, message.message_class))
        return len(dead) >= 3

    wait_until(three_dead, timeout=10)
    three_dead()  # and whatever more came meanwhile (the check below counts it)
    assert sorted(dead) == sorted(
        [
            (b"does not fit", MessageClass.NACK_Q_EXCEED_QUOTA),
            (b"nowhere", MessageClass.NACK_BAD_DST_Q),
            (b"not transactional", MessageClass.NACK_NOT_TRANSACTIONAL_MSG),
        ]
    )
    assert '"message_rejected"' in b.log()


def test_an_emptied_outgoing_queue_is_removed_and_a_new_message_makes_it_again(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    """``peers.outgoing_cleanup_after``: a queue delivered and quiet that long leaves
    the list; the next message to the destination comes through a new one, whose
    sequence goes on where the old one's stopped (one stream on the receiver)."""
    quick = [*PEER_FAST, *settings("peers.outgoing_cleanup_after=1")]
    a = daemon_factory(name="qm-a", extra_args=quick)
    b = daemon_factory(name="qm-b", extra_args=PEER_FAST)
    dest = remote_queue(b, "orders")
    with connect(a.address) as qa, connect(b.address) as qb:
        qb.create_queue("orders", transactional=True)
        send_in_transaction(qa, dest, b"first")
        assert_exactly(qb, "orders", [b"first"])
        [first] = [s for s in qb.status().incoming if s.source_qm == qa.qm_guid]
        wait_until(lambda: not qa.outgoing(), timeout=20.0)
        [removed] = log_events(a, "outgoing_queue_removed")
        assert "orders" in str(removed["queue"])
        send_in_transaction(qa, dest, b"second")
        assert_exactly(qb, "orders", [b"second"])
        # B took it as the same stream's next sequence: no stream more.
        [second] = [s for s in qb.status().incoming if s.source_qm == qa.qm_guid]
        assert second.sequence_timestamp == first.sequence_timestamp
        assert second.sequence_ordinal > first.sequence_ordinal
