"""A scripted daemon on a real TCP port, for the SDK's and the CLI's outgoing-queue calls.

:class:`FakeDaemon` accepts any number of connections (a thread each),
answers Hello, and hands every other request to :class:`FakePeering`, which
plays the daemon's part for ``GetStatus``, ``ListOutgoing`` and
``ControlOutgoing`` with the error codes the real one uses. Every request is
recorded, so a test can check what the client sent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
import uuid
from typing import TypeVar

from wire import client_frames as cf

T = TypeVar("T")

QM_GUID = uuid.UUID("11111111-2222-4333-8444-555555555555")
SOURCE_QM = uuid.UUID("99999999-8888-4777-8666-555555555555")
ORDERS = "DIRECT=TCP:10.0.0.5:1901\\private$\\orders"
BILLING = "DIRECT=TCP:billing.example:1801\\private$\\invoices"


def sample_outgoing() -> dict[str, cf.OutgoingInfo]:
    """Two outgoing queues: one waiting to retry, one connected."""
    return {
        ORDERS: cf.OutgoingInfo(
            destination=ORDERS,
            next_hop="10.0.0.9:1801",
            state="waiting",
            next_attempt=1_700_000_100.0,
            waiting=12,
            unacknowledged=3,
            sequence_timestamp=1_700_000_000,
            sequence_ordinal=2,
            next_number=16,
            last_order_ack=None,
            last_error="connection refused",
        ),
        BILLING: cf.OutgoingInfo(
            destination=BILLING,
            next_hop="billing.example:1801",
            state="connected",
            next_attempt=None,
            waiting=0,
            unacknowledged=1,
            sequence_timestamp=1_690_000_000,
            sequence_ordinal=1,
            next_number=5,
            last_order_ack=1_700_000_050.5,
            last_error="",
        ),
    }


def sample_incoming() -> tuple[cf.IncomingInfo, ...]:
    return (
        cf.IncomingInfo(
            source_qm=SOURCE_QM,
            queue="payments",
            sequence_timestamp=1_650_000_000,
            sequence_ordinal=4,
            last_number=41,
            reject_count=2,
            last_access=1_700_000_002.0,
        ),
    )


def _error(code: cf.ErrorCode, message: str) -> cf.ErrorReply:
    return cf.ErrorReply(code=int(code), message=message)


class FakePeering:
    """The daemon's answers to the outgoing-queue requests (``running=False``: peering off)."""

    def __init__(self) -> None:
        self.running = True
        self.outgoing = sample_outgoing()
        self.incoming = sample_incoming()

    def status(self) -> cf.StatusInfo:
        return cf.StatusInfo(
            qm_name="fake",
            qm_guid=QM_GUID,
            server_version="0.test",
            started_at=1_700_000_000.0,
            connections=1,
            open_transactions=0,
            commits=0,
            aborts=0,
            batches=0,
            uncommitted_bytes=0,
            erasing=0,
            queues=(),
            outgoing=tuple(self.outgoing.values()) if self.running else (),
            incoming=self.incoming if self.running else (),
        )

    def answer(self, request: cf.FrameValue) -> cf.ServerReply:
        if isinstance(request, cf.GetStatus):
            return self.status()
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
            message = f"there is no outgoing queue for {request.destination!r}"
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


class FakeDaemon:
    """Serves :class:`FakePeering` on ``127.0.0.1``; close it when done."""

    def __init__(self, peering: FakePeering | None = None) -> None:
        self.peering = peering or FakePeering()
        self.requests: list[cf.FrameValue] = []
        self.failures: list[BaseException] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._stopping = False
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
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

    def _serve(self, conn: socket.socket) -> None:
        decoder = cf.ClientFrameDecoder()
        try:
            with conn:
                while data := conn.recv(65536):
                    decoder.receive_data(data)
                    while (frame := decoder.next_frame()) is not None:
                        conn.sendall(cf.encode_frame(frame.request_id, self._answer(frame.value)))
        except ConnectionResetError:
            pass
        except BaseException as exc:
            self.failures.append(exc)

    def _answer(self, request: cf.FrameValue) -> cf.ServerReply:
        if isinstance(request, cf.Hello):
            return cf.HelloOk(
                version=cf.PROTOCOL_VERSION,
                server_version="0.test",
                qm_name="fake",
                qm_guid=QM_GUID,
            )
        with self._lock:
            self.requests.append(request)
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
