"""The blocking client's I/O against a scripted peer: pipelining with tiny socket buffers,
and how a call is driven.

The peer answers every frame as soon as it reads it and does not read while
it writes, like the daemon. A client that wrote a large pipelined buffer
without reading the replies would fill both directions and hang.

The client runs in a thread of its own, so that a deadlock fails the test
instead of hanging it: after ``DEADLOCK_TIMEOUT`` both ends are shut down,
which wakes both threads, and both are joined. Nothing sleeps; the timeout
only bounds a join.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from qmgr.client import ConnectionLost, InvalidArgument, InvalidName, QueueManager
from qmgr.client._blocking_io import SocketConnection, open_socket
from qmgr.client._protocol import ClientProtocol, Flow, Waiter
from qmgr.client.calls import queues
from wire import client as cf

T = TypeVar("T")

#: Seconds a client call may take before it counts as deadlocked (it takes well under one).
DEADLOCK_TIMEOUT = 30.0
#: The peer's error message: longer than a send frame, so the replies to a
#: buffer of failing sends are several times the socket buffers.
LONG_ERROR = "queue 'bad' does not exist on this queue manager; " * 8


def _small_buffers(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by its owner
        sock.shutdown(socket.SHUT_RDWR)


class ScriptedPeer(threading.Thread):
    """Answers as the daemon does: Begin and a send in a transaction only if it fails
    (a send to 'bad' fails and dooms its transaction), everything else with Ok, and
    the Commit of a doomed transaction with an error."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(name="scripted-peer", daemon=True)
        self.sock = sock
        self.requests: list[cf.FrameValue] = []
        self.request_ids: list[int] = []
        self.doomed: set[int] = set()
        self.failure: BaseException | None = None

    def run(self) -> None:
        decoder = cf.ClientFrameDecoder()
        try:
            with self.sock:
                while data := self.sock.recv(4096):
                    decoder.receive_data(data)
                    while (frame := decoder.next_frame()) is not None:
                        self.requests.append(frame.value)
                        self.request_ids.append(frame.request_id)
                        reply = self.answer(frame.value)
                        if reply is not None:
                            self.sock.sendall(cf.encode_frame(frame.request_id, reply))
        except BaseException as exc:
            self.failure = exc

    def answer(self, value: cf.FrameValue) -> cf.ServerReply | None:
        if isinstance(value, cf.Begin):
            return None
        if isinstance(value, cf.Send) and value.tx_id:
            if value.message.destination != "bad":
                return None
            self.doomed.add(value.tx_id)
            return cf.ErrorReply(code=int(cf.ErrorCode.INVALID_NAME), message=LONG_ERROR)
        if isinstance(value, cf.Commit) and value.tx_id in self.doomed:
            code = int(cf.ErrorCode.TRANSACTION_ABORTED)
            return cf.ErrorReply(code=code, message="a request in it failed")
        return cf.Ok()

    def sends(self) -> list[cf.Send]:
        return [r for r in self.requests if isinstance(r, cf.Send)]


class Harness:
    """A client connected to a scripted peer, and a way to run client code with a deadline."""

    def __init__(self) -> None:
        self.client_sock, self.server_sock = socket.socketpair()
        _small_buffers(self.client_sock)
        _small_buffers(self.server_sock)
        self.peer = ScriptedPeer(self.server_sock)
        self.qm = QueueManager(self.client_sock, "scripted")
        #: True once a deadlock made the harness shut both ends down.
        self.broken = False
        self.peer.start()

    def run(self, work: Callable[[], T]) -> T:
        """``work()`` in a client thread; fail (without leaking the thread) if it deadlocks."""
        outcome: list[tuple[T | None, BaseException | None]] = []

        def target() -> None:
            try:
                outcome.append((work(), None))
            except BaseException as exc:
                outcome.append((None, exc))

        worker = threading.Thread(target=target, name="client", daemon=True)
        worker.start()
        worker.join(DEADLOCK_TIMEOUT)
        if worker.is_alive():
            self.broken = True
            _shut(self.client_sock)
            _shut(self.server_sock)
            worker.join(DEADLOCK_TIMEOUT)
            assert not worker.is_alive(), "the client thread did not end after shutdown"
            pytest.fail(f"the client deadlocked against its peer ({DEADLOCK_TIMEOUT} s)")
        ((value, error),) = outcome
        if error is not None:
            raise error
        return value  # type: ignore[return-value]

    def close(self) -> None:
        self.qm.close()
        _shut(self.server_sock)  # only matters if the peer is stuck writing
        self.peer.join(DEADLOCK_TIMEOUT)
        assert not self.peer.is_alive(), "the scripted peer did not end"


@pytest.fixture
def peer() -> Iterator[Harness]:
    harness = Harness()
    try:
        yield harness
    finally:
        harness.close()
    assert harness.client_sock.fileno() == -1
    assert harness.server_sock.fileno() == -1
    if not harness.broken:  # else the peer's write failed when its end was shut down
        assert harness.peer.failure is None, f"the peer failed: {harness.peer.failure!r}"


def test_large_pipelined_transaction_does_not_deadlock(peer: Harness) -> None:
    qm = peer.qm

    def work() -> None:
        tx = qm.begin()
        for i in range(20_000):
            tx.send("q", b"m" * 100, label=str(i))
        tx.commit()

    peer.run(work)
    assert isinstance(peer.peer.requests[0], cf.Begin)
    sends = peer.peer.sends()
    assert [s.message.label for s in sends] == [str(i) for i in range(20_000)]
    assert isinstance(peer.peer.requests[-1], cf.Commit)
    assert len(peer.peer.requests) == 20_002
    ids = peer.peer.request_ids
    assert ids == list(range(1, 20_003))
    assert not qm._conn.proto.pipelined  # nothing is left waiting for a reply


def test_failing_sends_answered_while_the_client_writes_do_not_deadlock(peer: Harness) -> None:
    """Every send fails: the peer writes replies, several times the socket buffers,
    while the client is still writing its buffer. The client must read them as it writes."""
    qm = peer.qm
    tx = qm.begin()
    sent: list[int] = []

    def work() -> None:
        for i in range(20_000):
            tx.send("bad", b"m" * 100, label=str(i))
            sent.append(i)

    with pytest.raises(InvalidName, match="cannot commit: queue 'bad' does not exist"):
        peer.run(work)
    # The failure was read while the first buffer was written: the next send raised it.
    assert 0 < len(sent) < 1_000
    with pytest.raises(InvalidName, match="aborted because a send in it failed"):
        peer.run(tx.commit)
    assert peer.peer.requests[-1] == cf.Abort(tx_id=tx.id)
    assert not any(isinstance(r, cf.Commit) for r in peer.peer.requests)
    assert len(peer.peer.sends()) == len(sent)
    assert not qm._conn.proto.pipelined
    assert qm.purge_queue("q") == 0  # the connection is still in step


def test_pipelined_error_is_kept_on_its_transaction(peer: Harness) -> None:
    qm = peer.qm
    good, bad = qm.begin(), qm.begin()
    good.send("q", b"1")
    bad.send("bad", b"2")
    bad.send("q", b"3")
    good.send("q", b"4")
    peer.run(good.commit)  # reads every reply: only `bad` failed
    with pytest.raises(InvalidName, match="cannot commit: queue 'bad'"):
        bad.receive("q")
    with pytest.raises(InvalidName, match="aborted because a send in it failed"):
        peer.run(bad.commit)
    assert peer.peer.requests[-1] == cf.Abort(tx_id=bad.id)  # it aborted instead of committing
    assert cf.Commit(tx_id=good.id) in peer.peer.requests
    assert cf.Commit(tx_id=bad.id) not in peer.peer.requests
    assert peer.peer.doomed == {bad.id}
    assert not qm._conn.proto.pipelined


def test_a_send_that_fails_unseen_fails_the_commit(peer: Harness) -> None:
    qm = peer.qm
    tx = qm.begin()
    tx.send("q", b"1")
    tx.send("bad", b"2")  # its error is not read before commit() sends the Commit
    with pytest.raises(InvalidName, match="aborted because a send in it failed: queue 'bad'"):
        peer.run(tx.commit)
    # Begin, both sends and the Commit went out in one write, the Commit last.
    assert [type(r) for r in peer.peer.requests] == [cf.Begin, cf.Send, cf.Send, cf.Commit]
    assert peer.peer.doomed == {tx.id}  # the peer refused the commit: nothing was applied
    assert tx.ended
    assert not qm._conn.proto.pipelined


# ----------------------------------------------------------------------
# Driving a call
# ----------------------------------------------------------------------


def test_a_call_is_sent_each_reply_and_thrown_each_error(peer: Harness) -> None:
    conn = peer.qm._conn
    seen: list[object] = []

    def call(proto: ClientProtocol[Waiter]) -> Flow[Waiter, str]:
        seen.append((yield proto.call(cf.PurgeQueue(name="q"))))
        try:
            yield proto.call(cf.Begin(tx_id=0))  # the peer answers no Begin: it is closed
        except ConnectionLost as exc:
            seen.append(type(exc))
            return "done"
        return "not reached"

    def work() -> str:
        return conn.run(call)

    def close_after_begin(value: cf.FrameValue) -> cf.ServerReply | None:
        if isinstance(value, cf.Begin):
            peer.server_sock.shutdown(socket.SHUT_RDWR)
            return None
        return cf.Ok(value=3)

    peer.peer.answer = close_after_begin  # type: ignore[method-assign]
    assert peer.run(work) == "done"
    assert seen == [cf.Ok(value=3), ConnectionLost]
    assert peer.qm.closed


def test_a_call_that_returns_at_once_sends_nothing(peer: Harness) -> None:
    def call(proto: ClientProtocol[Waiter]) -> Flow[Waiter, int]:
        if False:  # pragma: no cover - a generator that asks nothing
            yield proto.call(cf.GetStatus())
        return 7

    assert peer.qm._conn.run(call) == 7
    assert peer.qm.purge_queue("q") == 0
    assert [type(r) for r in peer.peer.requests] == [cf.PurgeQueue]


def test_an_interrupted_request_breaks_the_connection(peer: Harness) -> None:
    qm = peer.qm
    original = qm._conn._read

    def interrupted(*, block: bool) -> None:
        raise KeyboardInterrupt

    qm._conn._read = interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        qm.purge_queue("q")
    qm._conn._read = original  # type: ignore[method-assign]
    peer.broken = True  # the peer's reply meets a closed socket
    assert qm.closed
    with pytest.raises(ConnectionLost, match=r"a request was interrupted \(KeyboardInterrupt\)"):
        qm.status()


@pytest.mark.parametrize("second", ["exchange", "write", "call"])
def test_two_threads_at_once_break_the_connection_for_both_loudly(second: str) -> None:
    ours, theirs = socket.socketpair()  # the daemon's end never answers
    conn = SocketConnection(ours, "pair")
    first_error: list[BaseException] = []
    started = threading.Event()
    buffered = conn.proto.out

    def first() -> None:
        waiter = conn.proto.request(conn.proto.out, cf.ListQueues())
        started.set()
        try:
            conn.exchange(waiter)
        except BaseException as exc:
            first_error.append(exc)

    worker = threading.Thread(target=first, daemon=True)
    worker.start()
    started.wait(DEADLOCK_TIMEOUT)
    # The first thread holds the connection and has taken its buffer to write
    # (a request built now goes to a fresh one, not under the write).
    deadline = time.monotonic() + DEADLOCK_TIMEOUT
    while not conn._exchanging.locked() or conn.proto.out is buffered:
        assert time.monotonic() < deadline, "the first thread did not take its buffer"
        threading.Event().wait(0.001)
    with pytest.raises(ConnectionLost, match="used from two threads at once"):
        if second == "call":  # a whole call: refused before it packs anything
            conn.run(queues.purge_queue, "q")
        else:
            # A request built now goes to a fresh buffer, not under the first one's write.
            waiter = conn.proto.request(conn.proto.out, cf.GetStatus())
            if second == "exchange":
                conn.exchange(waiter)
            else:  # a transaction's pipelined sends
                conn.write()
    if second == "call":
        assert not conn.proto.out
    worker.join(DEADLOCK_TIMEOUT)
    assert not worker.is_alive(), "the first thread's wait did not end"
    [error] = first_error
    assert isinstance(error, ConnectionLost)
    assert "used from two threads at once" in str(error)
    theirs.close()


def test_a_call_from_a_second_thread_packs_nothing_beside_the_first_one_s() -> None:
    ours, theirs = socket.socketpair()
    conn = SocketConnection(ours, "pair")
    packed, release = threading.Event(), threading.Event()

    def first() -> None:
        with conn.held():  # a transaction's pipelined sends, packed and not yet written
            conn.proto.request(conn.proto.out, cf.ListQueues())
            packed.set()
            release.wait(DEADLOCK_TIMEOUT)

    worker = threading.Thread(target=first, daemon=True)
    worker.start()
    assert packed.wait(DEADLOCK_TIMEOUT)
    with pytest.raises(ConnectionLost, match="used from two threads at once"):
        conn.run(queues.purge_queue, "q")
    release.set()
    worker.join(DEADLOCK_TIMEOUT)
    assert not worker.is_alive()
    theirs.settimeout(DEADLOCK_TIMEOUT)
    assert theirs.recv(65536) == b""  # closed, and nothing of either call was written
    theirs.close()


def test_an_ipv6_address_is_named_in_brackets_and_needs_them_for_a_port() -> None:
    with socket.socket(socket.AF_INET6) as bound:  # bound, not listening: refused
        bound.bind(("::1", 0))
        port = bound.getsockname()[1]
        with pytest.raises(ConnectionLost, match=re.escape(f"at [::1]:{port}: ")):
            open_socket(f"[::1]:{port}", 5.0)
    with pytest.raises(
        InvalidArgument, match=re.escape("write an IPv6 address with a port as [addr]:port")
    ):
        open_socket("::1:28002", 5.0)


def test_a_forked_child_cannot_use_its_parents_connection_and_leaves_it_alone() -> None:
    """Two processes on one connection would take each other's replies (and the
    messages in them): the child's calls fail at once, writing nothing, and the
    parent's connection goes on."""
    ours, theirs = socket.socketpair()
    conn = SocketConnection(ours, "pair")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what a call did, then leave without cleaning up
        outcome = b"no error"
        try:
            conn.run(queues.purge_queue, "q")
        except ConnectionLost as exc:
            outcome = str(exc).encode()
        os.write(write, outcome)
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as child:
        said = child.read().decode()
    assert status == 0
    assert said == (
        f"the connection was made by process {os.getpid()}, and this process was forked "
        "from it: connect again in this process"
    )
    theirs.setblocking(False)
    with pytest.raises(BlockingIOError):
        theirs.recv(65536)  # the child wrote nothing, and its close did not end the connection
    waiter = conn.proto.request(conn.proto.out, cf.GetStatus())
    conn.write()
    assert theirs.recv(65536)  # the parent's request went out
    assert not conn.proto.closed
    assert waiter.reply is None
    conn.close()
    theirs.close()


def test_a_write_to_a_closed_connection_says_what_the_daemon_said_before_closing() -> None:
    """A stopping daemon tells even an idle client why; the client's next request
    fails to be written, and the reason waiting in its buffer is what it raises."""
    ours, theirs = socket.socketpair()
    conn = SocketConnection(ours, "pair")
    conn.proto.version = cf.PROTOCOL_VERSION  # past the handshake
    stopping = "the queue manager is shutting down"
    notice = cf.ErrorReply(code=cf.ErrorCode.SHUTTING_DOWN, message=stopping)
    theirs.sendall(cf.encode_frame(0, notice))
    theirs.close()
    waiter = conn.proto.request(conn.proto.out, cf.GetStatus())
    with pytest.raises(ConnectionLost, match=f"closed the connection: {stopping}$"):
        conn.exchange(waiter)


def test_a_reply_read_with_the_daemons_farewell_is_the_calls_answer() -> None:
    """A stopping daemon answers a request and says why it closes, and both come in
    one read: the call gets its answer (it was carried out), the next one the reason."""
    ours, theirs = socket.socketpair()
    conn = SocketConnection(ours, "pair")
    conn.proto.version = cf.PROTOCOL_VERSION  # past the handshake
    waiter = conn.proto.request(conn.proto.out, cf.GetStatus())
    conn.write()
    [request] = [theirs.recv(65536)]
    assert request
    stopping = "the queue manager is shutting down"
    notice = cf.ErrorReply(code=cf.ErrorCode.SHUTTING_DOWN, message=stopping)
    theirs.sendall(cf.encode_frame(waiter.request_id, cf.Ok(value=7)) + cf.encode_frame(0, notice))
    theirs.close()
    assert conn.exchange(waiter) == cf.Ok(value=7)
    with pytest.raises(ConnectionLost, match=f"closed the connection: {stopping}$"):
        conn.proto.request(conn.proto.out, cf.GetStatus())


def test_close_from_another_thread_ends_a_wait_there_and_tells_the_daemon() -> None:
    # A worker waits for a reply (a receive with no timeout); another thread
    # closes the client to stop it. The daemon must see the connection end at
    # once, or it would hand that receive the next message sent.
    ours, theirs = socket.socketpair()
    conn = SocketConnection(ours, "pair")
    errors: list[BaseException] = []

    def wait_for_a_reply() -> None:
        waiter = conn.proto.request(conn.proto.out, cf.ListQueues())
        try:
            conn.exchange(waiter)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=wait_for_a_reply, daemon=True)
    worker.start()
    theirs.settimeout(DEADLOCK_TIMEOUT)
    assert theirs.recv(65536)  # the request: the worker now waits for its reply
    conn.close()
    worker.join(DEADLOCK_TIMEOUT)
    assert not worker.is_alive(), "the wait in the other thread did not end"
    [error] = errors
    assert isinstance(error, ConnectionLost)
    assert "was closed" in str(error)
    assert theirs.recv(65536) == b""  # the daemon's end sees the connection end
    theirs.close()
