"""The blocking SDK against a real daemon: connecting, queues, sending and receiving
messages, and the daemon going away. Its transactions: test_sdk_blocking_transactions."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import pytest
from helpers import DaemonProcess, free_port, settings, wait_until
from sdk_blocking_kit import send_when
from sdk_kit import check_closed_by_daemon

from qmgr.client import (
    AccessDenied,
    ConnectionLost,
    Delivery,
    InvalidArgument,
    InvalidName,
    LimitExceeded,
    MessageClass,
    MessageTooLarge,
    QueueError,
    QueueExists,
    QueueKind,
    QueueManager,
    QueueNotFound,
    QuotaExceeded,
    connect,
)
from wire.client import MAX_MESSAGE_BODY, ErrorCode

# --------------------------------------------------------------------------
# Connecting
# --------------------------------------------------------------------------


def test_connect_reports_the_queue_manager(shared_daemon: DaemonProcess) -> None:
    with connect(shared_daemon.address) as qm:
        assert qm.qm_name == "qmgr-shared"
        assert qm.qm_guid == qm.status().qm_guid
        assert qm.server_version
    assert qm.closed


def test_connect_refused_says_where() -> None:
    port = free_port()
    with pytest.raises(ConnectionLost, match=rf"127\.0\.0\.1:{port}.*refused"):
        connect(f"127.0.0.1:{port}", timeout=2)


def test_use_after_close_is_a_clear_error(qm: QueueManager) -> None:
    qm.close()
    with pytest.raises(ConnectionLost, match="closed"):
        qm.list_queues()
    qm.close()  # twice is fine


def test_a_connection_refused_at_a_limit_raises_limit_exceeded(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(extra_args=settings("limits.max_connections_per_address=2"))
    with connect(daemon.address), connect(daemon.address):
        with pytest.raises(LimitExceeded) as refused:
            connect(daemon.address)
    assert refused.value.message == (
        f"the queue manager at {daemon.address} refused the connection: too many connections "
        "from 127.0.0.1: at most 2 at once (limits.max_connections_per_address)"
    )


def test_a_connection_the_daemon_closed_when_idle_is_lost_with_its_reason(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(extra_args=settings("server.idle_timeout=0.5"))
    with connect(daemon.address) as observer, connect(daemon.address) as idle:
        # The observer keeps asking, so it never idles; the other one is closed.
        wait_until(lambda: observer.status().connections == 1, timeout=10)
        check_closed_by_daemon(idle, daemon.address, "closing a connection idle for 0.5 s")


# --------------------------------------------------------------------------
# Queues
# --------------------------------------------------------------------------


def test_queue_admin(qm: QueueManager, queue_name: str) -> None:
    qm.create_queue(queue_name, transactional=True, journal=True, quota=10_000)
    with pytest.raises(QueueExists, match="already exists"):
        qm.create_queue(queue_name.upper())
    info = {q.name: q for q in qm.list_queues()}
    queue = info[queue_name]
    assert (queue.transactional, queue.journal, queue.quota) == (True, True, 10_000)
    assert queue.kind is QueueKind.NORMAL
    assert queue.format_name == f".\\private$\\{queue_name.lower()}"
    assert info[f"{queue_name};journal"].kind is QueueKind.JOURNAL
    assert info["system$;deadletter"].kind is QueueKind.DEADLETTER

    for i in range(3):
        qm.send(queue_name, f"m{i}")
    assert qm.purge_queue(queue_name) == 3
    qm.send(queue_name, "left")
    assert qm.delete_queue(queue_name) == 1
    assert queue_name not in {q.name for q in qm.list_queues()}
    with pytest.raises(QueueNotFound, match="does not exist"):
        qm.delete_queue(queue_name)
    with pytest.raises(QueueNotFound):
        qm.purge_queue(queue_name)


@pytest.mark.parametrize("name", ["bad;name", "bad\\name", "ends$", "", " padded ", "x" * 125])
def test_bad_queue_names(qm: QueueManager, name: str) -> None:
    with pytest.raises(InvalidName) as info:
        qm.create_queue(name)
    assert info.value.code is ErrorCode.INVALID_NAME
    assert info.value.message


def test_system_queues_cannot_be_deleted_or_sent_to(qm: QueueManager, plainq: str) -> None:
    with pytest.raises(AccessDenied):
        qm.delete_queue("system$;deadletter")
    for destination in ("system$;deadletter", "system$;deadxact", f"{plainq};journal"):
        with pytest.raises(AccessDenied, match="cannot send"):
            qm.send(destination, b"x")


def test_status(qm: QueueManager, plainq: str) -> None:
    qm.send(plainq, b"12345")
    status = qm.status()
    assert status.qm_name == "qmgr-shared"
    assert status.connections >= 1
    assert status.uptime.total_seconds() >= 0
    queue = next(q for q in status.queues if q.name == plainq)
    assert (queue.depth, queue.bytes, queue.locked) == (1, 5, 0)


# --------------------------------------------------------------------------
# Sending and receiving
# --------------------------------------------------------------------------


def test_send_receive_round_trips_every_property(qm: QueueManager, plainq: str) -> None:
    correlation = bytes(range(20))
    message_id = qm.send(
        plainq,
        "héllo",
        label="greeting",
        correlation_id=correlation,
        app_specific=0xDEADBEEF,
        priority=5,
        delivery=Delivery.EXPRESS,
        response_queue=plainq,
        admin_queue=plainq,
        acknowledge=1,
        journal=2,
        time_to_reach_queue=60,
        time_to_be_received=3600.5,
    )
    assert message_id.startswith(f"{{{qm.qm_guid}}}\\")
    peeked = qm.peek(plainq)
    assert peeked is not None
    message = qm.receive(plainq)
    assert message == peeked
    assert message.body == "héllo".encode()
    assert message.text == "héllo"
    assert message.id == message_id
    assert message.label == "greeting"
    assert message.correlation_id == correlation
    assert message.app_specific == 0xDEADBEEF
    assert message.priority == 5
    assert message.delivery is Delivery.EXPRESS
    assert (message.response_queue, message.admin_queue) == (plainq, plainq)
    assert (message.acknowledge, message.journal) == (1, 2)
    assert (message.time_to_reach_queue, message.time_to_be_received) == (60, 3601)
    assert message.source_qm == qm.qm_guid
    assert message.queue == plainq
    assert message.destination == plainq
    assert not message.transactional
    assert message.message_class == 0
    assert message.sent_time <= message.arrived_time
    assert message.sent_time.tzinfo is not None
    assert message.acknowledged_id is None
    # acknowledge=1 (POS_ARRIVAL) with the queue as its own admin queue.
    ack = qm.receive(plainq)
    assert ack is not None
    assert (ack.message_class, ack.class_name) == (MessageClass.ACK_REACH_QUEUE, "ACK_REACH_QUEUE")
    assert ack.acknowledged_id == message_id
    assert (ack.label, ack.body, ack.destination) == ("greeting", b"", plainq)
    assert qm.receive(plainq) is None


def test_defaults_and_infinite_times(qm: QueueManager, plainq: str) -> None:
    qm.send(plainq, b"\x00\xff")
    message = qm.receive(plainq)
    assert message is not None
    assert message.correlation_id is None
    assert message.time_to_reach_queue is None
    assert message.time_to_be_received is None
    assert message.delivery is Delivery.RECOVERABLE
    assert message.priority == 3


def test_priority_order_on_a_plain_queue(qm: QueueManager, plainq: str) -> None:
    for priority in (1, 7, 3):
        qm.send(plainq, str(priority), priority=priority)
    bodies = [m.text for m in iter(lambda: qm.receive(plainq), None)]
    assert bodies == ["7", "3", "1"]


def test_receive_and_peek_by_lookup_id(qm: QueueManager, plainq: str) -> None:
    for body in ("a", "b", "c"):
        qm.send(plainq, body)
    second = qm.peek_range(plainq)[1]
    assert qm.peek(plainq, lookup_id=second.lookup_id) == second
    assert qm.receive(plainq, lookup_id=second.lookup_id) == second
    assert qm.receive(plainq, lookup_id=second.lookup_id) is None
    assert [m.text for m in qm.peek_range(plainq)] == ["a", "c"]


def test_receive_timeout_returns_none_after_waiting(qm: QueueManager, plainq: str) -> None:
    started = time.monotonic()
    assert qm.receive(plainq) is None
    assert qm.peek(plainq, 0.0) is None
    assert time.monotonic() - started < 0.5
    started = time.monotonic()
    assert qm.receive(plainq, timeout=0.3) is None
    assert 0.25 <= time.monotonic() - started < 2.0


def test_waiting_receive_wakes_when_another_client_commits(
    shared_daemon: DaemonProcess, qm: QueueManager, txq: str
) -> None:
    result: dict[str, object] = {}
    waiting = threading.Event()

    def receiver() -> None:
        with connect(shared_daemon.address) as other:
            started = time.monotonic()
            waiting.set()  # (see send_when)
            result["message"] = other.receive(txq, timeout=5.0)
            result["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=receiver)
    thread.start()
    assert waiting.wait(10)
    with qm.begin() as tx:
        tx.send(txq, b"wake up")
    thread.join(10)
    message = result["message"]
    assert message is not None
    assert message.body == b"wake up"
    assert result["elapsed"] < 2.0  # type: ignore[operator]


@pytest.mark.parametrize("transactional", [True, False])
def test_close_from_another_thread_stops_a_waiting_receive_which_takes_nothing(
    shared_daemon: DaemonProcess, qm: QueueManager, queue_name: str, transactional: bool
) -> None:
    qm.create_queue(queue_name, transactional=transactional)
    worker_qm = connect(shared_daemon.address)
    connections = qm.status().connections
    errors: list[BaseException] = []

    def wait_for_a_message() -> None:
        try:
            worker_qm.receive(queue_name, timeout=None)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=wait_for_a_message, daemon=True)
    worker.start()
    conn = worker_qm._conn
    # The receive is written, and the worker waits for its answer.
    wait_until(lambda: conn._exchanging.locked() and not conn.proto.out, 10)
    worker_qm.close()  # from this thread, to stop the worker
    worker.join(10)
    assert not worker.is_alive(), "the waiting receive did not end"
    [error] = errors
    assert isinstance(error, ConnectionLost)
    assert "was closed" in str(error)
    # The daemon saw the connection end: the receive waits no more.
    wait_until(lambda: qm.status().connections == connections - 1, 10)
    qm.send(queue_name, b"for someone else")
    queue = next(q for q in qm.status().queues if q.name == queue_name)
    assert queue.depth == 1


@pytest.mark.parametrize("transactional", [True, False])
def test_waiting_receives_get_every_message_once_and_in_order_under_load(
    shared_daemon: DaemonProcess, qm: QueueManager, queue_name: str, transactional: bool
) -> None:
    """Four producers and four receives outside a transaction, most of them waiting
    and so handed their messages in the senders' writes: every message is
    received once, and each receiver sees each producer's messages in order."""
    qm.create_queue(queue_name, transactional=transactional)
    producers, per_producer, receivers = 4, 150, 4
    total = producers * per_producer
    got: list[list[bytes]] = [[] for _ in range(receivers)]
    lock = threading.Lock()
    received = [0]
    done = threading.Event()
    failures: list[BaseException] = []

    def receive(index: int) -> None:
        try:
            with connect(shared_daemon.address) as receiver:
                while not done.is_set():
                    message = receiver.receive(queue_name, timeout=0.2)
                    if message is None:
                        continue
                    got[index].append(message.body)
                    with lock:
                        received[0] += 1
                        if received[0] == total:
                            done.set()
        except BaseException as exc:
            failures.append(exc)
            done.set()

    def produce(index: int) -> None:
        with connect(shared_daemon.address) as sender:
            for number in range(per_producer):
                body = f"{index}:{number:04d}".encode()
                if transactional:
                    with sender.begin() as tx:
                        tx.send(queue_name, body)
                else:
                    sender.send(queue_name, body)

    threads = [threading.Thread(target=receive, args=(i,)) for i in range(receivers)]
    for thread in threads:
        thread.start()
    senders = [threading.Thread(target=produce, args=(i,)) for i in range(producers)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join(60)
    assert done.wait(60), f"received {received[0]} of {total}"
    for thread in threads:
        thread.join(10)
    assert failures == []
    everything = sorted(body for bodies in got for body in bodies)
    expected = sorted(
        f"{p}:{n:04d}".encode() for p in range(producers) for n in range(per_producer)
    )
    assert everything == expected
    for bodies in got:
        for producer in range(producers):
            mine = [body for body in bodies if body.startswith(f"{producer}:".encode())]
            assert mine == sorted(mine)
    assert qm.receive(queue_name) is None


def test_receive_with_no_timeout_waits_for_a_message(
    shared_daemon: DaemonProcess, qm: QueueManager, plainq: str
) -> None:
    ready = threading.Event()
    thread = send_when(ready, shared_daemon.address, plainq, b"late")
    ready.set()
    message = qm.receive(plainq, timeout=None)
    thread.join(10)
    assert message is not None
    assert message.body == b"late"


def test_peek_range_pages(qm: QueueManager, plainq: str) -> None:
    for i in range(25):
        qm.send(plainq, str(i))
    seen: list[str] = []
    after = 0
    while page := qm.peek_range(plainq, after=after, max=10):
        assert len(page) <= 10
        seen.extend(m.text for m in page)
        after = page[-1].lookup_id
    assert seen == [str(i) for i in range(25)]
    assert qm.peek_range(plainq, after=after) == []
    assert qm.receive(plainq) is not None  # peeking removed nothing


def test_peek_range_gathers_more_than_one_reply_holds(qm: QueueManager, plainq: str) -> None:
    big = b"x" * (2 * 1024 * 1024)
    for _ in range(3):
        qm.send(plainq, big)
    messages = qm.peek_range(plainq)
    assert [len(m.body) for m in messages] == [len(big)] * 3
    assert len({m.lookup_id for m in messages}) == 3


def test_body_limits(qm: QueueManager, plainq: str) -> None:
    qm.send(plainq, b"\x01" * MAX_MESSAGE_BODY)
    message = qm.receive(plainq)
    assert message is not None
    assert len(message.body) == MAX_MESSAGE_BODY
    with pytest.raises(MessageTooLarge, match="4 MB"):
        qm.send(plainq, b"\x01" * (MAX_MESSAGE_BODY + 1))
    assert qm.peek(plainq) is None


def test_quota(qm: QueueManager, queue_name: str) -> None:
    qm.create_queue(queue_name, quota=100)
    qm.send(queue_name, b"x" * 60)
    with pytest.raises(QuotaExceeded):
        qm.send(queue_name, b"x" * 60)
    qm.send(queue_name, b"x" * 40)


def test_bad_arguments(qm: QueueManager, plainq: str) -> None:
    with pytest.raises(InvalidArgument, match="priority"):
        qm.send(plainq, b"x", priority=8)
    with pytest.raises(InvalidArgument):
        qm.send(plainq, b"x", priority=300)
    with pytest.raises(InvalidArgument, match="label"):
        qm.send(plainq, b"x", label="l" * 251)
    with pytest.raises(InvalidArgument, match="correlation"):
        qm.send(plainq, b"x", correlation_id=b"short")
    with pytest.raises(InvalidArgument, match="delivery"):
        qm.send(plainq, b"x", delivery="fast")
    with pytest.raises(InvalidArgument, match="timeout"):
        qm.receive(plainq, timeout=-1)
    # The connection is still fine.
    qm.send(plainq, b"ok")
    assert qm.receive(plainq) is not None


def test_unknown_queue(qm: QueueManager) -> None:
    missing = f"missing-{uuid.uuid4().hex}"
    with pytest.raises(QueueNotFound, match=missing):
        qm.send(missing, b"x")
    with pytest.raises(QueueNotFound):
        qm.receive(missing)
    with pytest.raises(QueueNotFound):
        qm.peek_range(missing)


def test_journal_copies(qm: QueueManager, queue_name: str) -> None:
    qm.create_queue(queue_name, journal=True)
    qm.send(queue_name, b"keep a copy", label="j")
    received = qm.receive(queue_name)
    assert received is not None
    copy = qm.peek(f"{queue_name};journal")
    assert copy is not None
    assert (copy.body, copy.label, copy.id) == (b"keep a copy", "j", received.id)
    assert qm.peek(queue_name) is None


def test_format_names_and_multiple_destinations(qm: QueueManager, queue_name: str) -> None:
    other = f"{queue_name}-b"
    qm.create_queue(queue_name)
    qm.create_queue(other)
    qm.send(f"DIRECT=OS:.\\private$\\{queue_name}", b"direct")
    qm.send(f"{queue_name},{other}", b"both")
    assert [m.text for m in qm.peek_range(queue_name)] == ["direct", "both"]
    assert [m.text for m in qm.peek_range(f".\\private$\\{other}")] == ["both"]


# --------------------------------------------------------------------------
# The daemon going away
# --------------------------------------------------------------------------


def test_daemon_stop_and_restart(daemon: DaemonProcess) -> None:
    with connect(daemon.address) as qm:
        qm.create_queue("durable", transactional=True)
        with qm.begin() as tx:
            tx.send("durable", b"survives")
        daemon.stop()
        with pytest.raises(ConnectionLost, match=daemon.address):
            qm.list_queues()
        with pytest.raises(ConnectionLost):
            qm.list_queues()
    daemon.start()
    with connect(daemon.address) as qm:
        message = qm.receive("durable")
        assert message is not None
        assert message.body == b"survives"


def test_kill_loses_nothing_committed(daemon: DaemonProcess) -> None:
    with connect(daemon.address) as qm:
        qm.create_queue("q", transactional=True)
        with qm.begin() as tx:
            tx.send("q", b"committed")
        tx = qm.begin()
        assert tx.receive("q") is not None
        tx.send("q", b"uncommitted")
        qm.status()  # everything above has reached the daemon
        daemon.kill()
    daemon.restart()
    with connect(daemon.address) as qm:
        assert [m.body for m in qm.peek_range("q")] == [b"committed"]


def test_sigterm_while_a_receive_waits(daemon: DaemonProcess) -> None:
    with connect(daemon.address) as qm:
        qm.create_queue("idle")
        errors: list[BaseException] = []
        waiting = threading.Event()

        def waiter() -> None:
            try:
                waiting.set()  # (see send_when; a stop that comes first is ConnectionLost)
                qm.receive("idle", timeout=None)
            except QueueError as exc:
                errors.append(exc)

        thread = threading.Thread(target=waiter)
        thread.start()
        assert waiting.wait(10)
        daemon.stop()
        thread.join(10)
        assert not thread.is_alive()
        assert errors
        assert isinstance(errors[0], QueueError)
