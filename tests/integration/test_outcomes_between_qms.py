"""Delivery outcomes between real queue managers on loopback: remote
acknowledgments, FinalAcks and the transaction confirmation process, timers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Unpack

import pytest
from click.testing import CliRunner
from helpers import (
    PEER_FAST,
    ROUTER,
    DaemonProcess,
    Peers,
    depth,
    free_port,
    log_events,
    remote_queue,
    route_args,
    send_in_transaction,
    settings,
    wait_until,
)

from qmgr.cli import cli
from qmgr.client import (
    Acknowledge,
    Journal,
    Message,
    MessageClass,
    QueueManager,
    SendOptions,
    connect,
)


def take_all(qm: QueueManager, queue: str) -> list[Message]:
    found = []
    while (message := qm.receive(queue, timeout=0)) is not None:
        found.append(message)
    return found


def wait_for(qm: QueueManager, queue: str, count: int, timeout: float = 20.0) -> list[Message]:
    """Wait until ``queue`` holds ``count`` messages; return them (received)."""
    wait_until(lambda: depth(qm, queue) >= count, timeout=timeout)
    return take_all(qm, queue)


@pytest.fixture
def orders(peers: Peers) -> Peers:
    """``peers``, with a queue ``acks`` on A and a transactional queue ``orders`` on B."""
    peers.qa.create_queue("acks")
    peers.qb.create_queue("orders", transactional=True)
    return peers


def send_order(peers: Peers, body: bytes, **options: Unpack[SendOptions]) -> None:
    """Send ``body`` from A to queue ``orders`` of B in a transaction of its own,
    acknowledgments to ``acks``."""
    send_in_transaction(
        peers.qa, remote_queue(peers.b, "orders"), body, admin_queue="acks", **options
    )


def send_confirmed(qm: QueueManager, destination: str, body: bytes, ttbr: int) -> None:
    """Send ``body`` in a transaction of its own, asking for the confirmation
    process (dead letter and journal) within ``ttbr`` seconds to be received."""
    send_in_transaction(
        qm,
        destination,
        body,
        journal=Journal.DEADLETTER | Journal.JOURNAL,
        time_to_be_received=ttbr,
    )


def test_a_remote_receipt_is_acknowledged_and_journaled_at_the_source(orders: Peers) -> None:
    _, _, qa, qb = orders
    send_order(
        orders,
        b"order",
        acknowledge=Acknowledge.FULL_RECEIVE | Acknowledge.POS_ARRIVAL,
        journal=Journal.DEADLETTER | Journal.JOURNAL,
        time_to_be_received=60,
    )
    [arrived] = wait_for(qa, "acks", 1)
    assert arrived.message_class == MessageClass.ACK_REACH_QUEUE
    message = qb.receive("orders", timeout=10)
    assert message is not None
    [received] = wait_for(qa, "acks", 1)
    assert received.message_class == MessageClass.ACK_RECEIVE
    assert received.acknowledged_id == message.id == arrived.acknowledged_id
    # The FinalAck settled the source's copy: into its journal, not its deadxact.
    [journaled] = wait_for(qa, "system$;journal", 1)
    assert journaled.id == message.id
    assert take_all(qa, "system$;deadxact") == []


def test_expiry_at_the_destination_reaches_the_source_deadxact(orders: Peers) -> None:
    _, _, qa, qb = orders
    send_order(
        orders,
        b"late",
        acknowledge=Acknowledge.NACK_RECEIVE,
        journal=Journal.DEADLETTER,
        time_to_be_received=2,
    )
    [nack] = wait_for(qa, "acks", 1)
    assert nack.message_class == MessageClass.NACK_RECEIVE_TIMEOUT
    assert nack.body == b"late"
    [dead] = wait_for(qa, "system$;deadxact", 1)
    assert (dead.body, dead.message_class) == (b"late", MessageClass.NACK_RECEIVE_TIMEOUT)
    assert depth(qb, "orders") == 0
    assert take_all(qb, "system$;deadxact") == []


def test_a_prepared_transactions_remote_send_is_confirmed_like_any_other(
    orders: Peers,
) -> None:
    """Its copy is kept with the prepared transaction and added by its commit, so
    a send that expires unread at the destination lands in the source's deadxact."""
    _, b, qa, qb = orders
    tx = qa.begin(xid="two-phase-confirmed")
    tx.send(remote_queue(b, "orders"), b"late", journal=Journal.DEADLETTER, time_to_be_received=2)
    tx.prepare()
    assert qa.commit_prepared("two-phase-confirmed") is not None
    [dead] = wait_for(qa, "system$;deadxact", 1)
    assert (dead.body, dead.message_class) == (b"late", MessageClass.NACK_RECEIVE_TIMEOUT)
    assert depth(qb, "orders") == 0
    assert take_all(qb, "system$;deadxact") == []


def test_a_rejection_at_arrival_is_reported_once(peers: Peers) -> None:
    _, b, qa, qb = peers
    qa.create_queue("acks")
    qb.create_queue("plain")  # not transactional
    send_in_transaction(
        qa,
        remote_queue(b, "plain"),
        b"misaddressed",
        acknowledge=Acknowledge.NACK_REACH_QUEUE,
        admin_queue="acks",
        journal=Journal.DEADLETTER,
    )
    [nack] = wait_for(qa, "acks", 1)
    assert nack.message_class == MessageClass.NACK_NOT_TRANSACTIONAL_Q
    # Seed 000: kept in the destination's deadxact; and the source, which runs the
    # confirmation process, keeps its own on the FinalAck's NACK, as MSMQ's does.
    [kept] = wait_for(qb, "system$;deadxact", 1)
    assert kept.message_class == MessageClass.NACK_NOT_TRANSACTIONAL_Q
    [own] = wait_for(qa, "system$;deadxact", 1)
    assert (own.body, own.message_class) == (b"misaddressed", kept.message_class)


def test_a_refusal_at_arrival_is_kept_by_the_source_that_confirms_it(peers: Peers) -> None:
    """A confirmed transactional message (MQMSG_DEADLETTER) refused at arrival for
    another reason than its queue's not being transactional goes to its source's
    deadxact on the FinalAck's NACK, as MSMQ's source does; the destination keeps no
    second copy."""
    _, b, qa, qb = peers
    send_in_transaction(qa, remote_queue(b, "nowhere"), b"lost?", journal=Journal.DEADLETTER)
    [kept] = wait_for(qa, "system$;deadxact", 1)
    assert (kept.body, kept.message_class) == (b"lost?", MessageClass.NACK_BAD_DST_Q)
    assert take_all(qb, "system$;deadxact") == []


def test_refusals_past_the_room_for_them_stay_with_their_source(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    """Once the destination's dead-letter queue holds peers.max_rejected_bytes of
    refusals it keeps no more; their FinalAcks' NACKs have the source keep its
    copies, so every message ends in a dead-letter queue, with its class."""
    a = daemon_factory(
        name="qm-a",
        extra_args=(*PEER_FAST, *settings("transactions.xact_delay_receive_nack=0")),
    )
    b = daemon_factory(
        name="qm-b", extra_args=(*PEER_FAST, *settings("peers.max_rejected_bytes=2048"))
    )
    with connect(a.address) as qa, connect(b.address) as qb:
        qb.create_queue("plain")  # not transactional: refused, kept here while there is room
        bodies = [bytes([65 + i]) * 1000 for i in range(3)]
        for i, body in enumerate(bodies):
            send_in_transaction(
                qa,
                remote_queue(b, "plain"),
                body,
                journal=Journal.DEADLETTER,
                time_to_be_received=2,
            )
            if i == 0:  # kept; the next two find no room (a run's refusals are judged together)
                wait_until(lambda: depth(qb, "system$;deadxact") == 1, 20)
        # The first is kept at B (seed 000) and at A; the two B had no room for, at A.
        at_a = wait_for(qa, "system$;deadxact", 3)
        at_b = take_all(qb, "system$;deadxact")
        assert sorted(m.body for m in at_a) == bodies
        assert [m.body for m in at_b] == bodies[:1]
        assert {m.message_class for m in at_a + at_b} == {MessageClass.NACK_NOT_TRANSACTIONAL_Q}


def test_time_to_reach_queue_at_the_source_dead_letters_without_a_hole(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    a = daemon_factory(name="qm-a", extra_args=PEER_FAST)
    nobody = f"DIRECT=TCP:127.0.0.1:{free_port()}\\private$\\orders"  # nothing listens
    with connect(a.address) as qa:
        qa.create_queue("acks")
        with qa.begin() as tx:
            tx.send(
                nobody,
                b"never sent",
                acknowledge=Acknowledge.NACK_REACH_QUEUE,
                admin_queue="acks",
                journal=Journal.DEADLETTER,
                time_to_reach_queue=1,
            )
            tx.send(nobody, b"no limit")
            tx.commit()
        qa.send(nobody, b"plain", journal=Journal.DEADLETTER, time_to_reach_queue=1)
        [dead] = wait_for(qa, "system$;deadxact", 1)
        assert (dead.body, dead.message_class) == (
            b"never sent",
            MessageClass.NACK_REACH_QUEUE_TIMEOUT,
        )
        [nack] = wait_for(qa, "acks", 1)
        assert nack.message_class == MessageClass.NACK_REACH_QUEUE_TIMEOUT
        [plain] = wait_for(qa, "system$;deadletter", 1)
        assert (plain.body, plain.message_class) == (
            b"plain",
            MessageClass.NACK_REACH_QUEUE_TIMEOUT,
        )
        [outgoing] = qa.outgoing()
        assert outgoing.waiting == 1  # "no limit" waits; the stream has no hole


@pytest.mark.parametrize("how", ["orderly", "kill"])
def test_time_to_reach_queue_after_a_restart(
    daemon_factory: Callable[..., DaemonProcess], how: str
) -> None:
    """A message committed before a restart that never went out (nothing listens at
    its destination) is given up on time after an orderly restart, which recorded
    what had gone out; after a crash, nothing says it never went out, so it stays
    (the destination may have it) until it is delivered or purged."""
    a = daemon_factory(name="qm-a", extra_args=PEER_FAST)
    nobody = f"DIRECT=TCP:127.0.0.1:{free_port()}\\private$\\orders"
    with connect(a.address) as qa:
        with qa.begin() as tx:
            tx.send(nobody, b"before", journal=Journal.DEADLETTER, time_to_reach_queue=2)
            tx.commit()
    if how == "orderly":
        a.restart()
    else:
        a.kill()
        a.start()
    with connect(a.address) as qa:
        with qa.begin() as tx:  # the same deadline's neighbour, sent after the restart
            tx.send(nobody, b"after", journal=Journal.DEADLETTER, time_to_reach_queue=1)
            tx.commit()
        expected = [b"before", b"after"] if how == "orderly" else [b"after"]
        dead = wait_for(qa, "system$;deadxact", len(expected))
        assert sorted(m.body for m in dead) == sorted(expected)
        assert {m.message_class for m in dead} == {MessageClass.NACK_REACH_QUEUE_TIMEOUT}
        [outgoing] = qa.outgoing()
        # After a crash it may have gone out: unacknowledged, not waiting to go first.
        expected_counts = (0, 0) if how == "orderly" else (0, 1)
        assert (outgoing.waiting, outgoing.unacknowledged) == expected_counts


def test_the_confirmation_process_under_a_broken_link(peers: Peers) -> None:
    _, b, qa, qb = peers
    qb.create_queue("orders", transactional=True)
    with qa.begin() as tx:
        for body in (b"received in time", b"never confirmed"):
            tx.send(
                remote_queue(b, "orders"),
                body,
                journal=Journal.DEADLETTER | Journal.JOURNAL,
                # Room for a loaded machine to deliver within the time to reach
                # the queue (and to be received: the test receives at once);
                # the confirmation deadline is then 3 + min(3, 3) s.
                time_to_be_received=3,
                time_to_reach_queue=3,
            )
        tx.commit()
    message = qb.receive("orders", timeout=10)
    assert message is not None
    assert message.body == b"received in time"
    # Both arrived (OrderAck): "delivered" at the source; the first one's
    # FinalAck (ACK_RECEIVE) put its copy in the source's journal.
    wait_until(lambda: qa.outgoing()[0].waiting + qa.outgoing()[0].unacknowledged == 0, 10)
    [confirmed] = wait_for(qa, "system$;journal", 1)
    assert confirmed.id == message.id
    b.kill()
    # The extended interval: 3 s to be received + min(3, 3) s.
    [dead] = wait_for(qa, "system$;deadxact", 1, timeout=15)
    assert (dead.body, dead.message_class) == (
        b"never confirmed",
        MessageClass.NACK_RECEIVE_TIMEOUT,
    )
    # The one received in time was confirmed, and never lands there.
    assert take_all(qa, "system$;deadxact") == []


def test_a_message_received_after_its_session_went_idle_is_still_confirmed(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    # Sessions that carry nothing close after 1 s; the message is received
    # later, so its FinalAck needs a session that no message opens.
    idle = (*PEER_FAST, *settings("peers.idle_timeout=1"))
    a = daemon_factory(name="qm-a", extra_args=idle)
    b = daemon_factory(name="qm-b", extra_args=idle)
    with connect(a.address) as qa, connect(b.address) as qb:
        qb.create_queue("orders", transactional=True)
        send_confirmed(qa, remote_queue(b, "orders"), b"late reader", 20)
        wait_until(lambda: depth(qb, "orders") == 1, 10)
        # The session that delivered it closes for idleness (whichever side's
        # timer fires first).
        wait_until(lambda: any("idle" in str(e["reason"]) for e in closed(a) + closed(b)), 10)
        message = qb.receive("orders", timeout=0)
        assert message is not None
        # Confirmed, well before the deadline: into the source's journal.
        [journaled] = wait_for(qa, "system$;journal", 1, timeout=15)
        assert journaled.id == message.id
        assert take_all(qa, "system$;deadxact") == []
        # Confirmed, the source no longer keeps a session up for it.
        wait_until(lambda: qa.outgoing()[0].state == "idle", 10)


def test_each_destinations_final_ack_settles_its_own_copy_through_a_router(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    # One send to two queue managers through a router keeps two copies. Their
    # OrderAcks come late, so B2's FinalAck comes before A knows which queue
    # manager took which copy: the FinalAck's own sequence says which.
    late = (*PEER_FAST, *settings("peers.order_ack_delay=4", "peers.order_ack_max_delay=10"))
    b1 = daemon_factory(name="qm-b1", extra_args=late)
    b2 = daemon_factory(name="qm-b2", extra_args=late)
    r = daemon_factory(name="qm-r", extra_args=(*PEER_FAST, *ROUTER))
    routes = (*route_args(b1.peer_port, r.peer_port), *route_args(b2.peer_port, r.peer_port))
    a = daemon_factory(name="qm-a", extra_args=(*PEER_FAST, *routes))
    for b in (b1, b2):
        with connect(b.address) as qb:
            qb.create_queue("orders", transactional=True)
    with connect(a.address) as qa:
        qa.create_list("fan", [remote_queue(b1, "orders"), remote_queue(b2, "orders")])
        send_confirmed(qa, "DL=fan", b"fan", 60)
        with connect(b2.address) as qb2:
            message = qb2.receive("orders", timeout=10)
            assert message is not None

        def awaiting() -> list[str]:
            findings = qa.trace(message.id).findings
            return [f.place for f in findings if f.kind == "awaiting-confirmation"]

        # B2's FinalAck settled B2's copy: B1's is left.
        wait_until(lambda: len(awaiting()) == 1, 10)
        [left] = awaiting()
        assert f":{b1.peer_port}" in left
        with connect(b1.address) as qb1:
            assert qb1.receive("orders", timeout=10) is not None
        wait_until(lambda: not awaiting(), 20)
        assert len(take_all(qa, "system$;journal")) == 2
        assert take_all(qa, "system$;deadxact") == []


def test_one_send_to_two_queues_of_one_queue_manager_is_confirmed_twice(peers: Peers) -> None:
    # The same message comes in two streams (one per outgoing queue of A) and
    # leaves both queues in one transaction: B owes A two FinalAcks.
    _, b, qa, qb = peers
    for queue in ("o1", "o2"):
        qb.create_queue(queue, transactional=True)
    qa.create_list("fan", [remote_queue(b, "o1"), remote_queue(b, "o2")])
    send_confirmed(qa, "DL=fan", b"twice", 60)
    wait_until(lambda: depth(qb, "o1") == depth(qb, "o2") == 1, 10)
    with qb.begin() as tx:
        assert tx.receive("o1", timeout=0) is not None
        assert tx.receive("o2", timeout=0) is not None
        tx.commit()
    journaled = wait_for(qa, "system$;journal", 2)
    assert [m.body for m in journaled] == [b"twice", b"twice"]
    assert take_all(qa, "system$;deadxact") == []
    assert not [f for f in qa.trace(journaled[0].id).findings if f.kind == "awaiting-confirmation"]


def test_a_router_keeps_a_final_ack_while_the_source_is_down(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    long = (*PEER_FAST, *settings("peers.idle_timeout=120"))
    b = daemon_factory(name="qm-b", extra_args=long)
    r = daemon_factory(name="qm-r", extra_args=(*long, *ROUTER))
    a = daemon_factory(name="qm-a", extra_args=(*PEER_FAST, *route_args(b.peer_port, r.peer_port)))
    with connect(b.address) as qb:
        qb.create_queue("orders", transactional=True)
    with connect(a.address) as qa:
        send_confirmed(qa, remote_queue(b, "orders"), b"through r", 60)
        wait_until(lambda: qa.outgoing()[0].waiting + qa.outgoing()[0].unacknowledged == 0, 10)
    a.stop()
    with connect(b.address) as qb:
        message = qb.receive("orders", timeout=10)
        assert message is not None
        # B's FinalAck reaches R, which cannot pass it on to A now: R keeps it,
        # and only then does B forget it.
        wait_until(
            lambda: not [f for f in qb.trace(message.id).findings if f.kind == "final-ack"], 10
        )
    a.start()
    with connect(a.address) as qa:
        [journaled] = wait_for(qa, "system$;journal", 1, timeout=15)
        assert journaled.id == message.id
        assert take_all(qa, "system$;deadxact") == []


@pytest.mark.parametrize(
    "how", ["destination-restarted", "router-restarted", "router-session-idle"]
)
def test_a_final_ack_finds_its_way_back_through_the_router_after_its_session_ended(
    daemon_factory: Callable[..., DaemonProcess], how: str
) -> None:
    # A -> R -> B. The message is delivered, then the session between R and B
    # ends (B or R is killed and started again, or the session closes for
    # idleness) before anyone reads it, and no other message goes that way:
    # R keeps a session to B while the message's source awaits its FinalAck
    # (across its restart too), and B sends the FinalAck to A through R's next
    # session.
    idle = settings("peers.idle_timeout=1") if how == "router-session-idle" else ()
    b = daemon_factory(name="qm-b", extra_args=(*PEER_FAST, *idle))
    r = daemon_factory(name="qm-r", extra_args=(*PEER_FAST, *ROUTER, *idle))
    a = daemon_factory(name="qm-a", extra_args=(*PEER_FAST, *route_args(b.peer_port, r.peer_port)))
    with connect(b.address) as qb:
        qb.create_queue("orders", transactional=True)
    with connect(a.address) as qa:
        send_confirmed(qa, remote_queue(b, "orders"), b"through r", 60)
        with connect(b.address) as qb:
            wait_until(lambda: depth(qb, "orders") == 1, 10)
        if how != "router-session-idle":
            wait_until(lambda: r_delivered(r), 10)
            restarted = b if how == "destination-restarted" else r
            restarted.kill()
            restarted.start()
        else:
            wait_until(lambda: any("idle" in str(e["reason"]) for e in closed(b)), 10)
        with connect(b.address) as qb:
            message = qb.receive("orders", timeout=10)
            assert message is not None
        [journaled] = wait_for(qa, "system$;journal", 1, timeout=20)
        assert journaled.id == message.id
        assert take_all(qa, "system$;deadxact") == []


def r_delivered(r: DaemonProcess) -> bool:
    """Whether the router's outgoing queue holds nothing unacknowledged."""
    with connect(r.address) as qr:
        return all(o.waiting + o.unacknowledged == 0 for o in qr.outgoing())


def closed(daemon: DaemonProcess) -> list[dict[str, object]]:
    return log_events(daemon, "peer_session_closed")


def test_a_plain_message_is_journaled_at_the_source_once_the_next_hop_has_it(peers: Peers) -> None:
    _, b, qa, qb = peers
    qb.create_queue("plain")
    message_id = qa.send(remote_queue(b, "plain"), b"hello", journal=Journal.JOURNAL)
    [copy] = wait_for(qa, "system$;journal", 1)
    assert (copy.id, copy.body) == (message_id, b"hello")
    arrived = qb.receive("plain", timeout=10)
    assert arrived is not None
    assert arrived.id == message_id


def test_trace_follows_a_message_to_the_destination(orders: Peers) -> None:
    a, b, qa, qb = orders
    send_order(
        orders,
        b"traced",
        acknowledge=Acknowledge.POS_ARRIVAL,
        journal=Journal.DEADLETTER,
    )
    wait_until(lambda: depth(qa, "acks") == 1, timeout=20)
    # Delivered: the OrderAck took it out of the outgoing queue.
    wait_until(lambda: qa.outgoing()[0].waiting + qa.outgoing()[0].unacknowledged == 0, 10)
    message = qb.peek("orders")
    assert message is not None
    at_source = qa.trace(message.id)
    kinds = {finding.kind: finding for finding in at_source.findings}
    assert set(kinds) == {"awaiting-confirmation", "acknowledgment"}
    assert kinds["acknowledgment"].class_name == "ACK_REACH_QUEUE"
    assert kinds["awaiting-confirmation"].next_hop == f"127.0.0.1:{b.peer_port}"
    at_destination = qb.trace(message.id)
    [waiting] = at_destination.findings
    assert (waiting.kind, waiting.place) == ("queue", "orders")
    # The command follows the message from the source to the destination.
    result = CliRunner().invoke(
        cli,
        [
            "--server",
            a.address,
            "trace",
            message.id,
            "--json",
            "--via",
            f"127.0.0.1:{b.peer_port}={b.address}",
        ],
    )
    assert result.exit_code == 0, result.output
    visits = json.loads(result.output)
    assert [visit["qm"] for visit in visits] == ["qm-a", "qm-b"]
    assert visits[1]["findings"][0]["kind"] == "queue"
    qb.receive("orders", timeout=5)
    unknown = CliRunner().invoke(
        cli, ["--server", b.address, "trace", "{00000000-0000-0000-0000-000000000001}\\9"]
    )
    assert unknown.exit_code == 1
    assert "no queue manager visited knows" in unknown.output


def test_plain_copies_for_two_queues_of_one_queue_manager_both_arrive(peers: Peers) -> None:
    """One message id, two destinations on one peer: the receiver's duplicate
    filter must not take the second copy for a resend of the first."""
    _, b, qa, qb = peers
    qb.create_queue("one")
    qb.create_queue("two")
    message_id = qa.send(f"{remote_queue(b, 'one')},{remote_queue(b, 'two')}", b"both")
    for queue in ("one", "two"):
        message = qb.receive(queue, timeout=20)
        assert message is not None, queue
        assert (message.id, message.body) == (message_id, b"both")


def test_a_poison_message_received_from_its_subqueue_is_confirmed_to_the_source(
    peers: Peers,
) -> None:
    _, _, qa, qb = peers
    qa.create_queue("acks")
    qb.create_queue("orders", transactional=True, retry_count=0, retry_cycles=0)
    send_order(
        peers,
        b"poison",
        acknowledge=Acknowledge.FULL_RECEIVE,
        journal=Journal.DEADLETTER | Journal.JOURNAL,
        time_to_be_received=120,
    )
    wait_until(lambda: depth(qb, "orders") == 1, timeout=20)
    with qb.begin() as tx:
        assert tx.receive("orders", timeout=0) is not None
        tx.abort()  # one aborted receive past a retry count of 0: to ;poison
    wait_until(lambda: depth(qb, "orders;poison") == 1, timeout=10)
    [finding] = qb.trace(qb.peek("orders;poison").id).findings  # type: ignore[union-attr]
    assert (finding.kind, finding.place) == ("subqueue", "orders;poison")
    # Moves report nothing to the source.
    assert depth(qa, "acks") == 0
    with qb.begin() as tx:
        message = tx.receive("orders;poison", timeout=0)
        assert message is not None
        assert (message.abort_count, message.move_count) == (0, 1)
        tx.commit()
    [received] = wait_for(qa, "acks", 1)
    assert received.message_class == MessageClass.ACK_RECEIVE
    assert received.acknowledged_id == message.id
    [journaled] = wait_for(qa, "system$;journal", 1)
    assert journaled.id == message.id
    assert take_all(qa, "system$;deadxact") == []


def test_a_plain_message_expires_at_the_router_that_holds_it(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    """A router whose next hop stays down gives up a plain message it holds once its
    time to reach the queue passes, as MSMQ's hop does: its NACK to the source's
    admin queue, its dead-letter copy at the router (the source keeps none), and
    nothing left in the router's outgoing queue."""
    gone = free_port()  # nothing listens: the destination never comes
    r = daemon_factory(name="qm-r", extra_args=(*PEER_FAST, *ROUTER))
    a = daemon_factory(name="qm-a", extra_args=(*PEER_FAST, *route_args(gone, r.peer_port)))
    destination = f"DIRECT=TCP:127.0.0.1:{gone}\\private$\\orders"
    with connect(a.address) as qa, connect(r.address) as qr:
        qa.create_queue("acks")
        for body in (b"one", b"two"):
            qa.send(
                destination,
                body,
                acknowledge=Acknowledge.NACK_REACH_QUEUE,
                admin_queue="acks",
                journal=Journal.DEADLETTER,
                time_to_reach_queue=2,
            )
        nacks = wait_for(qa, "acks", 2, timeout=30)
        assert {m.message_class for m in nacks} == {MessageClass.NACK_REACH_QUEUE_TIMEOUT}
        dead = wait_for(qr, "system$;deadletter", 2)
        assert sorted(m.body for m in dead) == [b"one", b"two"]
        assert {m.message_class for m in dead} == {MessageClass.NACK_REACH_QUEUE_TIMEOUT}
        assert take_all(qa, "system$;deadletter") == []
        wait_until(lambda: all(q.waiting == 0 and q.unacknowledged == 0 for q in qr.outgoing()), 10)
