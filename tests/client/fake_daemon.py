"""A scripted daemon on a real TCP port, for the SDK's and the CLI's tests.

It answers with the sample values of ``wire_samples`` (in ``tests/wire``): the
status, the outgoing queues ``ORDERS`` and ``BILLING`` and one incoming sequence.

:class:`FakeDaemon` accepts any number of connections (a thread each),
answers Hello with its protocol ``version``, and hands every other request
to :class:`FakePeering`, which plays the daemon's part for ``GetStatus``,
``ListOutgoing``, ``ControlOutgoing`` and ``GetRouting``, or to :class:`FakeTwoPhase`, which
plays it for transactions (global ones, prepare and resolve), ranges of
queues and plain sends, with the error codes the real one uses. Every
request is recorded, so a test can check what the client sent, and any
kind of request can be given a reply of its own (``canned``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
from collections.abc import Iterator
from typing import TypeVar

import pytest
from wire_samples import (
    CONNECTED_INFO,
    INCOMING_INFO,
    OUTGOING_INFO,
    ROUTING_INFO,
    STATUS_INFO,
    hop_info,
)

from wire import client as cf
from wire import quoted

T = TypeVar("T")


def sample_outgoing() -> dict[str, cf.OutgoingInfo]:
    """Two outgoing queues: one waiting to retry (``ORDERS``), one connected (``BILLING``)."""
    return {info.destination: info for info in (OUTGOING_INFO, CONNECTED_INFO)}


def sample_incoming() -> tuple[cf.IncomingInfo, ...]:
    return (INCOMING_INFO,)


def _error(code: cf.ErrorCode, message: str) -> cf.ErrorReply:
    return cf.ErrorReply(code=int(code), message=message)


class _Refused(Exception):
    """Raised by a script's helper: the request gets ``reply``, an error."""

    def __init__(self, code: cf.ErrorCode, message: str) -> None:
        super().__init__(message)
        self.reply = _error(code, message)


class FakePeering:
    """The daemon's answers to the outgoing-queue requests (``running=False``: peering off)."""

    def __init__(self) -> None:
        self.running = True
        self.outgoing = sample_outgoing()
        self.incoming = sample_incoming()

    def status(self) -> cf.StatusInfo:
        return dataclasses.replace(
            STATUS_INFO,
            queues=(),
            outgoing=tuple(self.outgoing.values()) if self.running else (),
            incoming=self.incoming if self.running else (),
        )

    def routing(self, destination: str) -> cf.RoutingInfo:
        """``ROUTING_INFO``; the outgoing queue ``ORDERS`` uses its route's first
        hop, the other destinations have no route."""
        if not destination:
            return ROUTING_INFO
        if destination == "127.0.0.1":
            return dataclasses.replace(ROUTING_INFO, destination="127.0.0.1:1801", local=True)
        if destination == OUTGOING_INFO.destination:
            return dataclasses.replace(
                ROUTING_INFO,
                destination="10.0.0.5:1801",
                entry="10.0.0.0/24",
                hops=(
                    hop_info("10.0.0.9:1801", "waiting", in_use=True, down_since=1_700_000_000.0),
                    hop_info("10.0.0.10:1801", "unused"),
                ),
            )
        hop = hop_info("10.1.0.7:1801", "connected", in_use=True)
        return dataclasses.replace(ROUTING_INFO, destination="10.1.0.7:1801", hops=(hop,))

    def answer(self, request: cf.FrameValue) -> cf.ServerReply:
        if isinstance(request, cf.GetStatus):
            return self.status()
        if isinstance(request, cf.GetRouting) and self.running:
            return self.routing(request.destination)
        if not isinstance(request, cf.ListOutgoing | cf.ControlOutgoing):
            return _error(cf.ErrorCode.NOT_SUPPORTED, f"{type(request).__name__} is not scripted")
        if not self.running:
            return _error(cf.ErrorCode.NOT_SUPPORTED, "peering is not running")
        if isinstance(request, cf.ListOutgoing):
            return cf.OutgoingList(outgoing=tuple(self.outgoing.values()))
        info = self.outgoing.get(request.destination)
        if request.action not in (1, 2, 3):
            return _error(cf.ErrorCode.INVALID_ARGUMENT, f"bad action {request.action}")
        if info is None:
            message = f"there is no outgoing queue for {quoted(request.destination)}"
            return _error(cf.ErrorCode.QUEUE_NOT_FOUND, message)
        purged = 0
        if request.action == 1:
            info = dataclasses.replace(info, state="paused", next_attempt=None)
        elif request.action == 2:
            info = dataclasses.replace(info, state="connecting")
        else:
            purged = info.waiting
            info = dataclasses.replace(info, waiting=0)
        self.outgoing[request.destination] = info
        return cf.OutgoingList(outgoing=(info,), purged=purged)


#: The requests :class:`FakeTwoPhase` answers.
TWO_PHASE_SCRIPTED = (
    cf.Begin,
    cf.BeginGlobal,
    cf.Send,
    cf.Receive,
    cf.Commit,
    cf.Abort,
    cf.Prepare,
    cf.Resolve,
    cf.ListTransactions,
    cf.RemoveThrough,
    cf.MeasureRange,
)


@dataclasses.dataclass
class FakeTransaction:
    xid: str | None
    sends: list[cf.Send] = dataclasses.field(default_factory=list)
    failure: cf.ErrorReply | None = None


class FakeTwoPhase:
    """The daemon's part for transactions, global transactions and queue ranges.

    A send to a queue called ``missing`` fails; a prepare of an xid that
    starts with ``full`` fails with LIMIT_EXCEEDED (the transaction stays
    open). ``queues`` maps a queue's name to its id and its messages' lookup ids.
    """

    def __init__(self) -> None:
        self.open: dict[int, FakeTransaction] = {}
        #: xid -> (since, sends, receives, bytes)
        self.prepared: dict[str, tuple[float, int, int, int]] = {}
        #: xid -> (committed, resolved_at)
        self.outcomes: dict[str, tuple[bool, float]] = {}
        self.queues: dict[str, tuple[int, list[int]]] = {"orders": (7, [3, 4, 5, 9, 12])}
        self._next_tx = 1 << 63

    def answer(self, request: cf.FrameValue) -> cf.ServerReply | None:
        """The reply, or None for a pipelined request that succeeded."""
        method = getattr(self, f"_{type(request).__name__.lower()}")
        try:
            reply: cf.ServerReply | None = method(request)
        except _Refused as refused:
            return refused.reply
        return reply

    def _in_use(self, xid: str) -> bool:
        opened = any(tx.xid == xid for tx in self.open.values())
        return opened or xid in self.prepared or xid in self.outcomes

    def _open(self, tx_id: int, xid: str | None) -> cf.ServerReply | None:
        if xid is not None and self._in_use(xid):
            return _error(cf.ErrorCode.INVALID_ARGUMENT, f"transaction id {quoted(xid)} is in use")
        reply = None
        if tx_id == 0:
            tx_id = self._next_tx = self._next_tx + 1
            reply = cf.Ok(value=tx_id)
        self.open[tx_id] = FakeTransaction(xid)
        return reply

    def _begin(self, request: cf.Begin) -> cf.ServerReply | None:
        return self._open(request.tx_id, None)

    def _beginglobal(self, request: cf.BeginGlobal) -> cf.ServerReply | None:
        return self._open(request.tx_id, request.xid)

    def _send(self, request: cf.Send) -> cf.ServerReply | None:
        failure = None
        if request.message.destination == "missing":
            failure = _error(cf.ErrorCode.QUEUE_NOT_FOUND, "queue 'missing' does not exist")
        if request.tx_id == 0:
            return failure or cf.Sent(
                message_id="m", queue=request.message.destination, lookup_id=1
            )
        tx = self._transaction(request.tx_id)
        tx.sends.append(request)
        tx.failure = tx.failure or failure
        return failure

    def _receive(self, request: cf.Receive) -> cf.ServerReply:
        return cf.NoMessage()

    def _transaction(self, tx_id: int) -> FakeTransaction:
        tx = self.open.get(tx_id)
        if tx is None:
            raise _Refused(cf.ErrorCode.TRANSACTION_NOT_FOUND, f"no transaction {tx_id}")
        return tx

    def _commit(self, request: cf.Commit) -> cf.ServerReply:
        tx = self._transaction(request.tx_id)
        del self.open[request.tx_id]
        if tx.failure is not None:
            return tx.failure
        if tx.xid is not None:
            self.outcomes[tx.xid] = (True, 1_700_000_000.0)
        return cf.Ok()

    def _abort(self, request: cf.Abort) -> cf.ServerReply:
        self._transaction(request.tx_id)
        del self.open[request.tx_id]
        return cf.Ok()

    def _prepare(self, request: cf.Prepare) -> cf.ServerReply:
        tx = self._transaction(request.tx_id)
        if tx.xid is None:
            return _error(cf.ErrorCode.TRANSACTION_USAGE, "only a global transaction")
        if tx.failure is not None:
            del self.open[request.tx_id]
            return tx.failure
        if tx.xid.startswith("full"):
            return _error(cf.ErrorCode.LIMIT_EXCEEDED, "10000 transactions are prepared")
        del self.open[request.tx_id]
        size = sum(s.message.body_size for s in tx.sends)
        self.prepared[tx.xid] = (1_700_000_000.0, len(tx.sends), 0, size)
        return cf.Ok()

    def _resolve(self, request: cf.Resolve) -> cf.ServerReply:
        found: list[cf.Resolution] = []
        for xid in request.xids:
            outcome = self.outcomes.get(xid)
            if xid in self.prepared:
                found.append(cf.Resolution.COMMITTED if request.commit else cf.Resolution.ABORTED)
            elif outcome is None:
                message = f"transaction {quoted(xid)} is not prepared"
                return _error(cf.ErrorCode.TRANSACTION_NOT_FOUND, message)
            elif outcome[0] != request.commit:
                code = cf.ErrorCode.TRANSACTION_COMMITTED
                if request.commit:
                    code = cf.ErrorCode.TRANSACTION_ABORTED
                return _error(
                    code,
                    f"transaction {quoted(xid)} was {'committed' if outcome[0] else 'aborted'}",
                )
            else:
                found.append(
                    cf.Resolution.ALREADY_COMMITTED
                    if request.commit
                    else cf.Resolution.ALREADY_ABORTED
                )
        for xid in request.xids:
            if self.prepared.pop(xid, None) is not None:
                self.outcomes[xid] = (request.commit, 1_700_000_100.0)
        return cf.Resolutions(outcomes=tuple(int(r) for r in found))

    def _listtransactions(self, request: cf.ListTransactions) -> cf.ServerReply:
        listed = [
            cf.TransactionInfo(
                xid=xid, state=1, since=since, sends=sends, receives=receives, bytes=size
            )
            for xid, (since, sends, receives, size) in sorted(self.prepared.items())
            if xid.startswith(request.prefix)
        ][: request.max_count]
        if request.resolved:
            outcomes = sorted(self.outcomes.items())
            listed += [
                cf.TransactionInfo(
                    xid=xid, state=2 if ok else 3, since=at, sends=0, receives=0, bytes=0
                )
                for xid, (ok, at) in outcomes
                if xid.startswith(request.prefix)
            ][: request.max_count]
        return cf.TransactionList(transactions=tuple(listed))

    def _queue(self, name: str) -> tuple[int, list[int]]:
        queue = self.queues.get(name)
        if queue is None:
            raise _Refused(cf.ErrorCode.QUEUE_NOT_FOUND, f"queue {quoted(name)} does not exist")
        return queue

    def _removethrough(self, request: cf.RemoveThrough) -> cf.ServerReply:
        queue_id, ids = self._queue(request.queue)
        kept = [i for i in ids if i > request.lookup_id]
        self.queues[request.queue] = (queue_id, kept)
        return cf.Ok(value=len(ids) - len(kept))

    def _measurerange(self, request: cf.MeasureRange) -> cf.ServerReply:
        queue_id, ids = self._queue(request.queue)
        counted = [i for i in ids if i > request.after]
        if request.max_count:
            counted = counted[: request.max_count]
        last = counted[-1] if counted else request.after
        return cf.RangeInfo(queue_id=queue_id, count=len(counted), last=last)


class FakeDaemon:
    """Serves :class:`FakePeering` and :class:`FakeTwoPhase` on ``127.0.0.1``; close it when done.

    ``version`` is the highest protocol version it agrees to.
    """

    def __init__(
        self, peering: FakePeering | None = None, *, version: int = cf.PROTOCOL_VERSION
    ) -> None:
        self.peering = peering or FakePeering()
        self.two_phase = FakeTwoPhase()
        self.version = version
        self.requests: list[cf.FrameValue] = []
        #: Request type -> the reply to every request of that type (before the scripts).
        self.canned: dict[type, cf.ServerReply] = {}
        self.failures: list[BaseException] = []
        #: Sent (request id 0) to every new connection, before any Hello is
        #: answered, which is then closed: the daemon refusing connections.
        self.refusal: cf.ErrorReply | None = None
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._stopping = False
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        #: The connections being served, and those told they are closed (``farewell``).
        self._open: set[socket.socket] = set()
        self._closing: set[socket.socket] = set()
        self._acceptor = threading.Thread(target=self._accept, name="fake-daemon", daemon=True)
        self._acceptor.start()

    def requests_of(self, cls: type[T]) -> list[T]:
        """The requests of one kind, in the order they came."""
        with self._lock:
            return [r for r in self.requests if isinstance(r, cls)]

    def _accept(self) -> None:
        while True:
            conn, _ = self._listener.accept()
            if self._stopping:
                conn.close()
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def farewell(self, reason: str) -> int:
        """Close every open connection as the daemon does one that idled too long:
        an ``ErrorReply(LIMIT_EXCEEDED, reason)`` for request id 0, then the end of
        the stream (requests that come after it are read and dropped). Returns how
        many connections were told."""
        notice = cf.encode_frame(0, _error(cf.ErrorCode.LIMIT_EXCEEDED, reason))
        with self._lock:
            told = list(self._open - self._closing)
            for conn in told:
                self._closing.add(conn)
                conn.sendall(notice)
                conn.shutdown(socket.SHUT_WR)
        return len(told)

    def _serve(self, conn: socket.socket) -> None:
        decoder = cf.ClientFrameDecoder()
        try:
            with conn:
                if self.refusal is not None:
                    self._refuse(conn, self.refusal)
                    return
                with self._lock:
                    self._open.add(conn)
                while data := conn.recv(65536):
                    decoder.receive_data(data)
                    while (frame := decoder.next_frame()) is not None:
                        with self._lock:
                            if conn in self._closing:
                                continue  # closed by ``farewell``: nothing more is answered
                        reply = self._answer(frame.value)
                        if reply is not None:
                            conn.sendall(cf.encode_frame(frame.request_id, reply))
        except ConnectionResetError:
            pass
        except BaseException as exc:
            self.failures.append(exc)
        finally:
            with self._lock:
                self._open.discard(conn)
                self._closing.discard(conn)

    @staticmethod
    def _refuse(conn: socket.socket, refusal: cf.ErrorReply) -> None:
        """Send ``refusal`` for request id 0 and end the stream; read until the client
        closes (so that its Hello, unread, does not turn the close into a reset)."""
        conn.sendall(cf.encode_frame(0, refusal))
        conn.shutdown(socket.SHUT_WR)
        while conn.recv(65536):
            pass

    def _answer(self, request: cf.FrameValue) -> cf.ServerReply | None:
        if isinstance(request, cf.Hello):
            return cf.HelloOk(
                version=min(request.max_version, self.version),
                server_version=STATUS_INFO.server_version,
                qm_name=STATUS_INFO.qm_name,
                qm_guid=STATUS_INFO.qm_guid,
            )
        with self._lock:
            self.requests.append(request)
            canned = self.canned.get(type(request))
            if canned is not None:
                return canned
            if isinstance(request, TWO_PHASE_SCRIPTED):
                return self.two_phase.answer(request)
            return self.peering.answer(request)

    def close(self) -> None:
        """Stop accepting, wait for every connection to end, and fail on the daemon's errors."""
        self._stopping = True
        with contextlib.suppress(OSError), socket.create_connection(self._listener.getsockname()):
            pass  # wakes the acceptor
        self._acceptor.join(10)
        self._listener.close()
        for thread in self._threads:
            thread.join(10)
            assert not thread.is_alive(), "a client connection was left open"
        assert not self.failures, f"the fake daemon failed: {self.failures!r}"


@pytest.fixture
def fake_daemon() -> Iterator[FakeDaemon]:
    """A :class:`FakeDaemon` with two outgoing queues and one incoming sequence (the
    fixture of the SDK's and the CLI's tests: their ``conftest.py`` import it)."""
    with contextlib.closing(FakeDaemon()) as daemon:
        yield daemon
