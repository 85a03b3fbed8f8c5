"""The sans-IO client core on its own: requests out, bytes in, no sockets."""

from __future__ import annotations

import array
import ast
import itertools
import uuid
from pathlib import Path

import pytest
from client_kit import (
    ADDRESS,
    NOT_FOUND,
    RecordingWaiter,
    error,
    frames,
    new_protocol,
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
    ProtocolViolation,
    QueueError,
    QueueNotFound,
    ShuttingDown,
    TransactionNotFound,
    TransactionUsageError,
)
from qmgr.client._codec import RawMessageList
from qmgr.client._common import MAX_CLIENT_TX_ID, PIPELINE_FLUSH_BYTES
from qmgr.client._protocol import MAX_REQUEST_ID, ClientProtocol
from qmgr.client._replies import message_or_none, queue_list
from qmgr.client._transaction import TransactionState, transaction_ended
from wire import MessageProperties
from wire import client as cf


def pipeline_send(proto: ClientProtocol[RecordingWaiter], state: TransactionState) -> bool:
    return proto.pipeline_send(state, "q", b"body", {})


def begin(proto: ClientProtocol[RecordingWaiter]) -> TransactionState:
    state = TransactionState(proto.next_tx_id())
    proto.begin(state)
    return state


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
    answers = [proto.pipeline_send(state, "q", body, {"delivery": "express"}) for _ in range(40)]
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
    flush = proto.pipeline_send(state, "q", filler, {})
    assert len(proto.out) == PIPELINE_FLUSH_BYTES + over
    assert flush is bool(over)  # exactly at the threshold: not yet; one byte more: now


def test_one_large_send_asks_for_a_write_at_once() -> None:
    proto = new_protocol()
    assert proto.pipeline_send(TransactionState(1), "q", b"b" * PIPELINE_FLUSH_BYTES, {}) is True


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
    pytest.param(("q\udc80", b"", {}, InvalidArgument, "UnicodeEncodeError"), id="surrogate"),
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
        proto.pipeline_send(state, destination, body, options)  # type: ignore[arg-type]
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
    proto.pipeline_send(state, "q", memoryview(b"abcdef")[::2], {})
    value = frames(proto.out)[-1][1]
    assert isinstance(value, cf.Send)
    assert value.message.body == b"ace"


def test_a_body_that_is_not_bytes_is_an_invalid_argument_and_packs_nothing() -> None:
    proto = new_protocol()
    state = begin(proto)
    before = bytes(proto.out)
    with pytest.raises(InvalidArgument, match="not int"):
        proto.pipeline_send(state, "q", 5, {})  # type: ignore[arg-type]
    assert proto.out == before


def test_a_send_frame_that_cannot_be_packed_leaves_nothing_behind() -> None:
    out = bytearray(b"earlier frames")
    with pytest.raises(TypeError):
        cf.append_send_frame(out, 1, 1, 0, (b"head", [1, 2]))  # type: ignore[arg-type]
    assert out == b"earlier frames"  # else the next write sends a truncated frame


def test_a_memoryview_body_of_wider_items_is_sent_as_its_bytes() -> None:
    proto = new_protocol()
    body = memoryview(array.array("H", [1, 2, 3]))
    proto.pipeline_send(TransactionState(1), "q", body, {})
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
        proto.pipeline_send(TransactionState(1), "q", b"", {"delivery": "fast"})
    with pytest.raises(InvalidArgument, match="unknown message properties: colour"):
        proto.pipeline_send(TransactionState(1), "q", b"", {"colour": 1})  # type: ignore[typeddict-unknown-key]
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
# Replies in
# ----------------------------------------------------------------------


def test_replies_reach_their_own_waiters_in_any_order_and_chunking() -> None:
    proto = new_protocol()
    out = bytearray()
    first = proto.request(out, cf.ListQueues())
    second = proto.receive_request(out, None, "q", 0, True, None)
    third = proto.request(out, cf.PurgeQueue(name="q"))
    stream = replies(
        (third.request_id, cf.Ok(value=4)),
        (second.request_id, cf.NoMessage()),
        (first.request_id, cf.QueueList(queues=())),
    )
    for start, end in itertools.pairwise([0, 3, 21, 22, len(stream)]):
        proto.receive_data(stream[start:end])
    assert proto.result(third) == cf.Ok(value=4)
    assert message_or_none(proto.result(second)) is None
    assert queue_list(proto.result(first)) == []
    assert (first.wakes, second.wakes, third.wakes) == (1, 1, 1)


def test_error_replies_raise_their_exception_and_others_are_dropped() -> None:
    proto = new_protocol()
    out = bytearray()
    waiter = proto.request(out, cf.DeleteQueue(name="gone"))
    abandoned = proto.request(out, cf.GetStatus())
    proto.forget(abandoned)
    proto.receive_data(
        replies(
            (abandoned.request_id, cf.Ok()),
            (waiter.request_id, cf.ErrorReply(code=NOT_FOUND, message="no 'gone'")),
            (999, cf.Ok()),
        )
    )
    with pytest.raises(QueueNotFound, match="no 'gone'"):
        proto.result(waiter)
    assert abandoned.reply is None
    assert abandoned.wakes == 0
    assert not proto.closed


def test_a_pipelined_send_error_surfaces_at_the_next_call_and_at_commit() -> None:
    proto = new_protocol()
    state = begin(proto)
    pipeline_send(proto, state)
    pipeline_send(proto, state)
    proto.receive_data(
        replies(
            (2, cf.ErrorReply(code=NOT_FOUND, message="queue 'q' does not exist")),
            (3, cf.ErrorReply(code=int(cf.ErrorCode.INVALID_NAME), message="second")),
        )
    )
    assert state.failed
    assert state.phase == "failed"
    assert proto.pipelined == {1: state}  # the Begin's id, until the transaction ends
    with pytest.raises(QueueNotFound, match="cannot commit: queue 'q' does not exist"):
        pipeline_send(proto, state)
    with pytest.raises(QueueNotFound, match="cannot commit"):
        proto.receive_request(bytearray(), state, "q", 0, False, None)
    # commit() aborts instead, then raises the first send's error.
    state.end(commit=True)
    out = bytearray()
    waiter = proto.end_request(out, state)
    assert frames(out) == [(waiter.request_id, cf.Abort(tx_id=state.id))]
    proto.receive_data(replies((waiter.request_id, cf.Ok())))
    assert not proto.pipelined
    with pytest.raises(QueueNotFound, match=r"aborted because a send in it failed: queue 'q'"):
        transaction_ended(state, proto.result(waiter))
    with pytest.raises(TransactionNotFound, match="already ended"):
        state.end(commit=False)


@pytest.mark.parametrize(
    "commit_reply",
    [
        error(cf.ErrorCode.TRANSACTION_ABORTED, "refused"),
        error(cf.ErrorCode.QUEUE_NOT_FOUND, "refused"),
        cf.Ok(),  # a daemon that committed anyway must not make commit() succeed
    ],
    ids=["aborted", "the-sends-error", "ok"],
)
@pytest.mark.parametrize("split", [None, 5, 30], ids=["one-read", "split-5", "split-30"])
def test_a_send_error_arriving_with_the_commit_reply_fails_the_commit(
    commit_reply: cf.ServerReply, split: int | None
) -> None:
    proto = new_protocol()
    state = begin(proto)
    pipeline_send(proto, state)
    pipeline_send(proto, state)
    state.end(commit=True)  # no failure known yet: a Commit goes out
    waiter = proto.end_request(proto.out, state)
    assert frames(proto.data_to_send())[-1] == (4, cf.Commit(tx_id=state.id))
    stream = replies((2, error(cf.ErrorCode.QUEUE_NOT_FOUND, "late")), (4, commit_reply))
    for chunk in (stream,) if split is None else (stream[:split], stream[split:]):
        proto.receive_data(chunk)
    assert waiter.wakes == 1
    assert not proto.pipelined  # the commit's reply settled the transaction's ids
    outcome: cf.ServerReply | QueueError
    try:
        outcome = proto.result(waiter)
    except QueueError as exc:
        outcome = exc
    with pytest.raises(QueueNotFound, match="aborted because a send in it failed: late"):
        transaction_ended(state, outcome)


def test_an_error_stays_on_its_own_transaction_when_two_are_pipelined() -> None:
    proto = new_protocol()
    good, bad = begin(proto), begin(proto)  # request ids 1 and 2
    pipeline_send(proto, good)  # 3
    pipeline_send(proto, bad)  # 4
    pipeline_send(proto, bad)  # 5
    pipeline_send(proto, good)  # 6
    good.end(commit=True)
    committed = proto.end_request(proto.out, good)  # 7
    assert proto.pipelined == {1: good, 2: bad, 3: good, 4: bad, 5: bad, 6: good}
    proto.receive_data(
        replies(
            (4, error(cf.ErrorCode.INVALID_NAME, "first")),
            (5, error(cf.ErrorCode.QUEUE_NOT_FOUND, "second")),
            (7, cf.Ok()),
        )
    )
    transaction_ended(good, proto.result(committed))  # good committed
    assert (good.failed, bad.failed) == (False, True)
    assert proto.pipelined == {2: bad}  # bad's Begin waits for bad's end
    with pytest.raises(InvalidName, match="cannot commit: first"):
        pipeline_send(proto, bad)
    bad.end(commit=True)
    aborted = proto.end_request(proto.out, bad)
    assert frames(proto.out)[-1] == (aborted.request_id, cf.Abort(tx_id=bad.id))
    proto.receive_data(replies((aborted.request_id, cf.Ok())))
    assert not proto.pipelined
    with pytest.raises(InvalidName, match="aborted because a send in it failed: first"):
        transaction_ended(bad, proto.result(aborted))


# ----------------------------------------------------------------------
# Breaking
# ----------------------------------------------------------------------


def test_a_framing_error_breaks_the_connection_and_wakes_every_waiter() -> None:
    proto = new_protocol()
    state = begin(proto)
    pipeline_send(proto, state)
    answered = proto.request(proto.out, cf.GetStatus())
    waiter = proto.request(proto.out, cf.ListQueues())
    own_frame = proto.receive_request(bytearray(), None, "q", None, False, None)
    other = begin(proto)
    other.end(commit=True)
    ending = proto.end_request(proto.out, other)
    waiting = [waiter, own_frame, ending]
    # A good reply, then garbage in the same read.
    with pytest.raises(ConnectionLost, match="malformed frame") as caught:
        proto.receive_data(replies((answered.request_id, cf.Ok(value=1))) + b"\xff" * 12)
    assert not caught.value.message.startswith("lost")
    assert proto.closed
    assert (not proto.out, not proto.pipelined) == (True, True)
    assert answered.wakes == 1
    assert proto.result(answered) == cf.Ok(value=1)
    assert [w.wakes for w in waiting] == [1, 1, 1]
    for each in waiting:
        with pytest.raises(ConnectionLost, match="malformed frame"):
            proto.result(each)
    with pytest.raises(ConnectionLost, match="malformed frame"):
        transaction_ended(other, proto.result(ending))
    with pytest.raises(ConnectionLost, match="malformed frame"):
        pipeline_send(proto, state)
    with pytest.raises(ConnectionLost, match="malformed frame"):
        proto.request(bytearray(), cf.GetStatus())
    with pytest.raises(ConnectionLost, match="malformed frame"):
        proto.data_to_send(b"x")


def test_stream_errors_can_name_the_address() -> None:
    proto = new_protocol(say_where=True)
    with pytest.raises(ConnectionLost) as caught:
        proto.receive_data(b"\xff" * 12)
    assert caught.value.message.startswith(f"lost the connection to the queue manager at {ADDRESS}")


def test_a_rejected_stream_raises_the_daemons_error_and_breaks() -> None:
    proto = new_protocol()
    waiter = proto.request(proto.out, cf.GetStatus())
    rejection = cf.ErrorReply(code=int(cf.ErrorCode.BAD_REQUEST), message="frame too large")
    with pytest.raises(ProtocolViolation, match="frame too large"):
        proto.receive_data(replies((0, rejection)))
    assert proto.broken is not None
    assert proto.broken.message == "the queue manager closed the connection: frame too large"
    assert waiter.wakes == 1
    with pytest.raises(ConnectionLost, match="frame too large"):
        proto.result(waiter)


def test_the_first_reason_stays_but_a_failure_after_close_says_what_broke() -> None:
    proto = new_protocol()
    assert proto.fail("first").message == "first"
    assert proto.lost("second").message == "first"
    closed = new_protocol()
    closed.close("the connection was closed")
    closed.close("again")
    assert closed.broken is not None
    assert closed.broken.message == "the connection was closed"
    error = closed.lost("reset by peer")
    assert error.message == f"lost the connection to the queue manager at {ADDRESS}: reset by peer"
    assert closed.fail("later").message == error.message


# ----------------------------------------------------------------------
# Values
# ----------------------------------------------------------------------


def test_handshake_values_and_errors() -> None:
    proto = new_protocol()
    hello_ok = cf.HelloOk(version=1, qm_name="qm", qm_guid=uuid.UUID(int=3), server_version="1.0")
    assert proto.welcome(hello_ok) == ("qm", uuid.UUID(int=3), "1.0")
    with pytest.raises(ConnectionLost, match="answered Ok to Hello"):
        proto.welcome(cf.Ok())
    lost = proto.handshake_error(ConnectionLost("reset"))
    assert type(lost) is ConnectionLost
    assert lost.message == f"handshake with the queue manager at {ADDRESS} failed: reset"
    refused = proto.handshake_error(ShuttingDown("stopping"))
    assert type(refused) is ShuttingDown
    assert refused.message == f"the queue manager at {ADDRESS} refused the connection: stopping"
    assert proto.version == 1


def test_a_commit_whose_waiter_gave_up_still_clears_its_pipelined_ids() -> None:
    proto = new_protocol()
    state = begin(proto)
    pipeline_send(proto, state)
    state.end(commit=True)
    waiter = proto.end_request(proto.out, state)
    proto.forget(waiter)  # a cancelled trio task
    proto.receive_data(replies((waiter.request_id, cf.Ok())))
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
