"""The sans-IO client core on its own, no sockets: request ids and transaction ids,
requests out (one buffer, pipelined sends, the write threshold, bad arguments that pack
nothing), what the calls and the clients ask of it, and that it does no I/O. Replies in
and a broken stream: test_protocol_replies."""

from __future__ import annotations

import array
import ast
import math
from pathlib import Path
from typing import cast

import pytest
from client_kit import (
    ADDRESS,
    NOW,
    begin,
    error,
    frames,
    new_protocol,
    pipeline_send,
    replies,
)
from wire_samples import QUEUED

import qmgr.client
from qmgr.client import (
    ConnectionLost,
    InvalidArgument,
    InvalidName,
    Message,
    MessageTooLarge,
    NotSupported,
    QueueNotFound,
    TransactionUsageError,
)
from qmgr.client._codec import RawMessageList, SendOptions
from qmgr.client._common import MAX_CLIENT_TX_ID, PIPELINE_FLUSH_AGE, PIPELINE_FLUSH_BYTES
from qmgr.client._protocol import MAX_REQUEST_ID
from qmgr.client._transaction import TransactionState
from wire import MessageProperties
from wire import client as cf

# ----------------------------------------------------------------------
# Ids
# ----------------------------------------------------------------------


def test_request_ids_count_up_and_wrap_past_zero() -> None:
    proto = new_protocol()
    assert [proto.new_id() for _ in range(3)] == [1, 2, 3]
    proto._next_id = MAX_REQUEST_ID - 1
    assert [proto.new_id() for _ in range(3)] == [MAX_REQUEST_ID, 1, 2]


def test_pipelined_sends_wrap_request_ids_too() -> None:
    proto = new_protocol()
    state = TransactionState(7)
    proto._next_id = MAX_REQUEST_ID - 2
    proto.begin(state)
    for _ in range(3):
        pipeline_send(proto, state)
    waiter = proto.request(proto.out, cf.GetStatus())
    ids = [rid for rid, _ in frames(proto.out)]
    assert ids == [MAX_REQUEST_ID - 1, MAX_REQUEST_ID, 1, 2, 3]
    assert waiter.request_id == 3
    assert proto.pipelined == dict.fromkeys(ids[:4], state)
    assert state.request_ids == ids[:4]
    # An error for the send that got id 1 after the wrap is routed to the transaction.
    proto.receive_data(replies((1, error(cf.ErrorCode.QUEUE_NOT_FOUND, "wrapped")), (3, cf.Ok())))
    assert state.failed
    assert waiter.reply == cf.Ok()


def test_transaction_ids_are_chosen_by_the_client_and_wrap() -> None:
    proto = new_protocol()
    assert [begin(proto).id for _ in range(3)] == [1, 2, 3]
    proto._next_tx_id = MAX_CLIENT_TX_ID - 1
    assert [proto.next_tx_id() for _ in range(3)] == [MAX_CLIENT_TX_ID, 1, 2]
    begins = [value for _, value in frames(proto.out)]
    assert begins == [cf.Begin(tx_id=1), cf.Begin(tx_id=2), cf.Begin(tx_id=3)]


def test_no_transaction_id_is_taken_on_a_closed_connection() -> None:
    proto = new_protocol()
    proto.close("the connection was closed")
    with pytest.raises(ConnectionLost, match="was closed"):
        proto.next_tx_id()
    proto.broken = None
    assert proto.next_tx_id() == 1


# ----------------------------------------------------------------------
# Requests out
# ----------------------------------------------------------------------


def test_begin_send_and_commit_share_one_buffer() -> None:
    proto = new_protocol()
    state = begin(proto)
    assert pipeline_send(proto, state) is False
    state.end(commit=True)
    waiter = proto.end_request(proto.out, state)
    message = MessageProperties(destination="q", body=b"body")
    assert frames(proto.out) == [
        (1, cf.Begin(tx_id=1)),
        (2, cf.Send(tx_id=1, mode=0, message=message)),
        (3, cf.Commit(tx_id=1)),
    ]
    # Begin and the send are answered only if they fail: their ids wait
    # until the commit's reply, which comes after any such failure.
    assert proto.pipelined == {1: state, 2: state}
    assert waiter.request_id == 3
    data = proto.data_to_send()
    assert frames(data)[-1] == (3, cf.Commit(tx_id=1))
    assert not proto.out


def test_data_to_send_puts_a_separate_frame_after_the_buffer() -> None:
    proto = new_protocol()
    state = begin(proto)
    frame = bytearray()
    proto.receive_request(frame, state, "in", 5, False, None)
    assert proto.out  # the Begin waits in the buffer, the receive in its own frame
    data = proto.data_to_send(frame)
    assert [type(value) for _, value in frames(data)] == [cf.Begin, cf.Receive]
    assert not proto.out
    assert proto.data_to_send(b"") == b""


def test_pipeline_send_asks_for_a_write_once_the_buffer_is_large() -> None:
    proto = new_protocol()
    state = TransactionState(1)
    body = b"x" * 1000
    express: SendOptions = {"delivery": "express"}
    answers = [proto.pipeline_send(state, "q", body, express, NOW) for _ in range(40)]
    flush_at = answers.index(True)
    assert not any(answers[:flush_at])
    frame_size = len(proto.out) // len(answers)
    # The first send after which the buffer holds more than the threshold asks for the write.
    assert frame_size * flush_at <= PIPELINE_FLUSH_BYTES < frame_size * (flush_at + 1)
    assert all(answers[flush_at:])  # and every one after it, until the buffer is written
    proto.data_to_send()
    assert pipeline_send(proto, state) is False


@pytest.mark.parametrize("over", [0, 1])
def test_the_write_threshold_counts_every_byte_of_the_buffer_exactly(over: int) -> None:
    scratch = new_protocol()
    pipeline_send(scratch, TransactionState(1))
    overhead = len(scratch.out) - len(b"body")  # a send frame without its body
    proto = new_protocol()
    state = begin(proto)  # the Begin in the buffer counts too
    filler = b"f" * (PIPELINE_FLUSH_BYTES + over - len(proto.out) - overhead)
    flush = proto.pipeline_send(state, "q", filler, {}, NOW)
    assert len(proto.out) == PIPELINE_FLUSH_BYTES + over
    assert flush is bool(over)  # exactly at the threshold: not yet; one byte more: now


@pytest.mark.parametrize(
    "options",
    [{"time_to_reach_queue": 30.0}, {"time_to_be_received": 0.5}],
    ids=["time-to-reach-queue", "time-to-be-received"],
)
def test_a_send_with_a_time_limit_asks_for_a_write_at_once(options: SendOptions) -> None:
    """Its time counts from its send time, which the daemon stamps as it reads it:
    the same for every send of a transaction, whatever was sent before."""
    proto = new_protocol()
    state = begin(proto)
    assert pipeline_send(proto, state) is False
    assert proto.pipeline_send(state, "q", b"timed", options, NOW) is True
    proto.data_to_send()
    for unlimited in (
        {"time_to_be_received": None},
        {"time_to_be_received": math.inf, "time_to_reach_queue": math.inf},
    ):
        assert (
            proto.pipeline_send(state, "q", b"unlimited", cast(SendOptions, unlimited), NOW)
            is False
        )


def test_pipelined_sends_go_once_the_oldest_is_a_second_old() -> None:
    """A transaction that keeps sending small messages is not idle to the daemon;
    one that sends now and then still packs its Begin, send and Commit together."""
    proto = new_protocol()
    state = begin(proto)
    later = NOW + 100.0  # long after the last write: the first send starts the clock
    assert proto.pipeline_send(state, "q", b"first", {}, later) is False
    assert proto.pipeline_send(state, "q", b"soon", {}, later + PIPELINE_FLUSH_AGE) is False
    assert proto.pipeline_send(state, "q", b"late", {}, later + PIPELINE_FLUSH_AGE + 0.1) is True
    proto.data_to_send()
    assert proto.pipeline_send(state, "q", b"next", {}, later + 5.0) is False  # clock again


def test_one_large_send_asks_for_a_write_at_once() -> None:
    proto = new_protocol()
    large = b"b" * PIPELINE_FLUSH_BYTES
    assert proto.pipeline_send(TransactionState(1), "q", large, {}, NOW) is True


BAD_SENDS = [
    pytest.param(("q", b"", {"delivery": "fast"}, InvalidArgument, "delivery"), id="delivery"),
    pytest.param(
        ("q", b"", {"colour": 1}, InvalidArgument, "unknown message properties: colour"),
        id="unknown",
    ),
    pytest.param(("q", b"", {"priority": 256}, InvalidArgument, "priority"), id="priority"),
    pytest.param(("q", b"", {"app_specific": -1}, InvalidArgument, "app_specific"), id="app"),
    pytest.param(
        ("q", b"", {"correlation_id": b"short"}, InvalidArgument, "20 bytes"), id="correlation"
    ),
    pytest.param(
        ("q", b"", {"time_to_be_received": -1.0}, InvalidArgument, "time_to_be_received"), id="ttbr"
    ),
    pytest.param(("q", b"", {"label": 5}, InvalidArgument, "text field"), id="label-type"),
    pytest.param(
        ("q", b"", {"admin_queue": "a" * 70_000}, InvalidArgument, "admin_queue"), id="admin-length"
    ),
    pytest.param(("x" * 70_000, b"", {}, InvalidArgument, "destination"), id="destination-length"),
    pytest.param(
        ("q\udc80", b"", {}, InvalidArgument, "destination is not valid Unicode text"),
        id="surrogate",
    ),
    pytest.param(
        ("q", b"b" * (cf.MAX_MESSAGE_BODY + 1), {}, MessageTooLarge, "4 MB"), id="body-too-large"
    ),
]


BadSend = tuple[str, bytes, dict[str, object], type[Exception], str]


@pytest.mark.parametrize("bad", BAD_SENDS)
def test_a_bad_pipelined_send_packs_nothing_and_leaves_the_transaction_usable(
    bad: BadSend,
) -> None:
    destination, body, options, raised, match = bad
    proto = new_protocol()
    state = begin(proto)
    pipeline_send(proto, state)
    before = bytes(proto.out)
    with pytest.raises(raised, match=match):
        proto.pipeline_send(state, destination, body, options, NOW)  # type: ignore[arg-type]
    assert proto.out == before
    assert proto.pipelined == {1: state, 2: state}
    assert state.request_ids == [1, 2]
    assert not state.failed
    pipeline_send(proto, state)  # still usable, and no request id was used up
    assert [rid for rid, _ in frames(proto.out)] == [1, 2, 3]


@pytest.mark.parametrize("bad", BAD_SENDS)
def test_a_bad_send_packs_nothing_into_a_buffer_that_holds_other_requests(bad: BadSend) -> None:
    destination, body, options, raised, match = bad
    proto = new_protocol()
    out = bytearray()
    proto.request(out, cf.ListQueues())
    before = bytes(out)
    with pytest.raises(raised, match=match):
        proto.send_request(out, destination, body, None, options)  # type: ignore[arg-type]
    assert out == before
    assert not proto.out
    assert not proto.pipelined


def test_a_non_contiguous_memoryview_body_is_sent_as_its_bytes() -> None:
    proto = new_protocol()
    state = begin(proto)
    proto.pipeline_send(state, "q", memoryview(b"abcdef")[::2], {}, NOW)
    value = frames(proto.out)[-1][1]
    assert isinstance(value, cf.Send)
    assert value.message.body == b"ace"


def test_a_body_that_is_not_bytes_is_an_invalid_argument_and_packs_nothing() -> None:
    proto = new_protocol()
    state = begin(proto)
    before = bytes(proto.out)
    with pytest.raises(InvalidArgument, match="not int"):
        proto.pipeline_send(state, "q", 5, {}, NOW)  # type: ignore[arg-type]
    assert proto.out == before


def test_a_send_frame_that_cannot_be_packed_leaves_nothing_behind() -> None:
    out = bytearray(b"earlier frames")
    with pytest.raises(TypeError):
        cf.append_send_frame(out, 1, 1, 0, (b"head", [1, 2]))  # type: ignore[arg-type]
    assert out == b"earlier frames"  # else the next write sends a truncated frame


def test_a_memoryview_body_of_wider_items_is_sent_as_its_bytes() -> None:
    proto = new_protocol()
    body = memoryview(array.array("H", [1, 2, 3]))
    proto.pipeline_send(TransactionState(1), "q", body, {}, NOW)
    waiter = proto.request(proto.out, cf.GetStatus())
    sent = frames(proto.out)
    assert [rid for rid, _ in sent] == [1, waiter.request_id]
    value = sent[0][1]
    assert isinstance(value, cf.Send)
    assert value.message.body == body.tobytes()


def test_arguments_are_checked_before_anything_is_packed() -> None:
    proto = new_protocol()
    out = bytearray()
    with pytest.raises(InvalidArgument, match="transactional"):
        proto.send_request(out, "q", b"", "yes", {})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="timeout"):
        proto.receive_request(out, None, "q", -1, False, None)
    with pytest.raises(InvalidArgument, match="delivery"):
        proto.pipeline_send(TransactionState(1), "q", b"", {"delivery": "fast"}, NOW)
    with pytest.raises(InvalidArgument, match="unknown message properties: colour"):
        proto.pipeline_send(TransactionState(1), "q", b"", {"colour": 1}, NOW)  # type: ignore[typeddict-unknown-key]
    with pytest.raises(InvalidArgument, match="cannot send this request"):
        proto.request(out, cf.DeleteQueue(name="x" * 70_000))
    assert not out
    assert not proto.out
    assert not proto.pipelined


def test_a_request_gives_its_waiter_and_its_frame() -> None:
    proto = new_protocol()
    out = bytearray()
    waiter = proto.send_request(
        out, "q", "é", True, {"label": "l", "delivery": "express", "time_to_reach_queue": 1.5}
    )
    ((request_id, value),) = frames(out)
    assert request_id == waiter.request_id == 1
    assert isinstance(value, cf.Send)
    message = value.message
    assert (value.mode, message.body, message.label, message.delivery) == (2, "é".encode(), "l", 0)
    assert message.time_to_reach_queue == 2
    assert message.destination == "q"
    assert not proto.pipelined


# ----------------------------------------------------------------------
# What the calls and the clients ask of the core
# ----------------------------------------------------------------------


def test_a_call_packs_its_request_into_a_frame_of_its_own() -> None:
    proto = new_protocol()
    state = begin(proto)  # the Begin waits in the buffer
    waiter, frame = proto.call(cf.ListQueues())
    assert frames(frame) == [(waiter.request_id, cf.ListQueues())]
    assert frames(proto.out) == [(1, cf.Begin(tx_id=state.id))]
    with pytest.raises(InvalidArgument, match="cannot send this request"):
        proto.call(cf.DeleteQueue(name="x" * 70_000))


def test_require_names_the_call_the_versions_and_the_address() -> None:
    proto = new_protocol(version=2)
    proto.require(2, "x()")
    with pytest.raises(
        NotSupported, match=f"x\\(\\) needs .* version 3; the one at {ADDRESS} speaks"
    ):
        proto.require(3, "x()", "y")
    with pytest.raises(NotSupported, match=r"begin\(xid=\.\.\.\) needs"):
        proto.begin(TransactionState(proto.next_tx_id(), "g"))
    assert not proto.out


def test_a_receive_result_checks_its_transaction_again() -> None:
    proto = new_protocol()
    message = cf.MessageReply(message=QUEUED)
    assert proto.receive_result(message, None) == Message.from_wire(QUEUED)
    assert proto.receive_result(cf.NoMessage(), TransactionState(1)) is None
    state = TransactionState(1)
    state.fail(int(cf.ErrorCode.INVALID_NAME), "bad")  # a send's reply came before
    with pytest.raises(InvalidName, match="cannot commit: bad"):
        proto.receive_result(cf.NoMessage(), state)
    with pytest.raises(ConnectionLost, match="not MessageReply or NoMessage"):
        proto.receive_result(cf.Ok(), None)


def test_a_page_comes_raw_and_only_its_own_reply() -> None:
    proto = new_protocol()
    waiter = proto.page_request(proto.out, "q", 3, 10)
    assert frames(proto.out) == [(1, cf.PeekRange(queue="q", after=3, max_count=10))]
    listed = cf.MessageList(messages=(QUEUED,))
    proto.receive_data(replies((waiter.request_id, listed)))
    reply = proto.result(waiter)
    assert type(reply) is RawMessageList
    assert reply.body == cf.encode_frame(1, listed)[12:]
    failed = proto.page_request(proto.out, "gone", 0, 1)
    proto.receive_data(replies((failed.request_id, error(cf.ErrorCode.QUEUE_NOT_FOUND, "gone"))))
    with pytest.raises(QueueNotFound):
        proto.result(failed)
    proto.forget_page(failed)
    later = proto.request(proto.out, cf.PeekRange(queue="q"))
    proto.receive_data(replies((later.request_id, listed)))
    assert proto.result(later) == listed  # decoded: not asked for raw


def test_a_prepare_request_waits_behind_the_transactions_pipelined_requests() -> None:
    proto = new_protocol(version=cf.PROTOCOL_VERSION)
    state = TransactionState(proto.next_tx_id(), "g")
    proto.begin(state)
    pipeline_send(proto, state)
    waiter = proto.prepare_request(proto.out, state)
    assert waiter.ends is state
    assert frames(proto.out)[-1] == (3, cf.Prepare(tx_id=state.id))
    proto.receive_data(replies((3, cf.Ok())))
    assert not proto.pipelined
    with pytest.raises(TransactionUsageError, match="has no xid"):
        proto.prepare_request(bytearray(), begin(proto))


#: The modules that may do no I/O: all but the clients' own. Values may read the
#: clock (``TransactionInfo.age``); the core and the calls may not.
SANS_IO = sorted(
    path
    for path in Path(str(qmgr.client.__file__)).parent.rglob("*.py")
    if path.parent.name == "calls"
    or path.stem in {"_codec", "_common", "_exceptions", "_levels", "_message", "_protocol"}
    or path.stem in {"_replies", "_transaction"}
)
CLOCK_READERS = {"two_phase.py"}


@pytest.mark.parametrize("path", SANS_IO, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_core_and_the_calls_do_no_io(path: Path) -> None:
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    forbidden = {"socket", "select", "ssl", "trio", "asyncio", "selectors", "threading"}
    if path.name not in CLOCK_READERS:
        forbidden.add("time")
    assert not imported & forbidden
