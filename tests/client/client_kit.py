"""What the SDK's sans-IO tests share: a protocol core, frames in and out, and calls run
against scripted replies (no socket, no trio)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from wire_samples import STATUS_INFO

from qmgr.client._exceptions import QueueError
from qmgr.client._protocol import ClientProtocol, Flow, Waiter
from qmgr.client._transaction import TransactionState
from wire import client as cf

ADDRESS = "127.0.0.1:1802"
NOT_FOUND = int(cf.ErrorCode.QUEUE_NOT_FOUND)


class RecordingWaiter(Waiter):
    """Counts its wake-ups, as the trio client's waiter sets its event."""

    __slots__ = ("wakes",)

    def __init__(self, request_id: int) -> None:
        super().__init__(request_id)
        self.wakes = 0

    def wake(self) -> None:
        self.wakes += 1


def new_protocol(*, say_where: bool = False, version: int = 0) -> ClientProtocol[RecordingWaiter]:
    """A fresh core for ``ADDRESS`` (``version``: as if the handshake had agreed on it)."""
    proto = ClientProtocol(ADDRESS, RecordingWaiter, address_in_stream_errors=say_where)
    proto.version = version
    return proto


def frames(data: bytes | bytearray) -> list[tuple[int, cf.FrameValue]]:
    """The (request id, value) of every request frame in ``data``."""
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(bytes(data))
    found = []
    while (frame := decoder.next_frame()) is not None:
        found.append((frame.request_id, frame.value))
    assert not decoder.in_frame, "bytes left over after the last frame"
    return found


def replies(*pairs: tuple[int, cf.ServerReply]) -> bytes:
    """The daemon's bytes for these (request id, reply) pairs."""
    return b"".join(cf.encode_frame(request_id, value) for request_id, value in pairs)


def error(code: cf.ErrorCode, message: str) -> cf.ErrorReply:
    return cf.ErrorReply(code=int(code), message=message)


#: The adapter's clock in these tests: the protocol's last write was at 0.0.
NOW = 0.0


def pipeline_send(proto: ClientProtocol[RecordingWaiter], state: TransactionState) -> bool:
    """Pipeline a send of ``b"body"`` to ``q`` in ``state``; whether to write now."""
    return proto.pipeline_send(state, "q", b"body", {}, NOW)


def begin(proto: ClientProtocol[RecordingWaiter]) -> TransactionState:
    """Begin a transaction with the core's next transaction id."""
    state = TransactionState(proto.next_tx_id())
    proto.begin(state)
    return state


#: A scripted answer: a reply, an error reply, or an exception met writing or waiting.
Answer = cf.ServerReply | BaseException


@dataclass
class Run:
    """What a call did against scripted answers: the requests it sent, and its result."""

    requests: list[cf.FrameValue] = field(default_factory=list)
    result: Any = None


def run_call(
    call: Callable[..., Flow[RecordingWaiter, Any]],
    *args: Any,
    answers: Iterable[Answer] = (),
    version: int = cf.PROTOCOL_VERSION,
    proto: ClientProtocol[RecordingWaiter] | None = None,
    **kwargs: Any,
) -> Run:
    """Run ``call(proto, *args, **kwargs)`` as the clients do, answering each request it
    yields with the next of ``answers``: a reply goes through the core as bytes, an
    exception is thrown into the call. Whatever the call raises is raised."""
    proto = proto if proto is not None else new_protocol(version=version)
    script = iter(answers)
    run = Run()
    flow = call(proto, *args, **kwargs)
    try:
        waiter, frame = next(flow)
        while True:
            packed = frames(frame)  # the request waited for comes last
            assert packed[-1][0] == waiter.request_id
            run.requests.extend(value for _, value in packed)
            answer = next(script, None)
            assert answer is not None, f"no answer scripted for {packed[-1][1]!r}"
            outcome: cf.ServerReply | BaseException
            if isinstance(answer, BaseException):
                outcome = answer
            else:
                proto.receive_data(replies((waiter.request_id, answer)))
                try:
                    outcome = proto.result(waiter)
                except QueueError as exc:
                    outcome = exc
            if isinstance(outcome, BaseException):
                waiter, frame = flow.throw(outcome)
            else:
                waiter, frame = flow.send(outcome)
    except StopIteration as done:
        run.result = done.value
    assert next(script, None) is None, "an answer was left over"
    return run


def status_info(**changes: Any) -> cf.StatusInfo:
    """The sample status with its one queue (``QUEUE_INFO``) and peering off, changed by
    ``changes``."""
    return dataclasses.replace(STATUS_INFO, **{"outgoing": (), "incoming": (), **changes})
