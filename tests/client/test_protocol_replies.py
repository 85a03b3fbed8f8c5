"""The sans-IO client core taking bytes in, no sockets: each reply to its own waiter
in any order and chunking, a pipelined send's error to its own transaction and its
commit, a broken stream waking every waiter, and the handshake's values."""

from __future__ import annotations

import itertools
import uuid

import pytest
from client_kit import (
    ADDRESS,
    NOT_FOUND,
    begin,
    error,
    frames,
    new_protocol,
    pipeline_send,
    replies,
)

from qmgr.client import (
    ConnectionLost,
    InvalidName,
    LimitExceeded,
    QueueError,
    QueueNotFound,
    ShuttingDown,
    TransactionAborted,
    TransactionNotFound,
)
from qmgr.client._replies import message_or_none, queue_list
from qmgr.client._transaction import earlier_failure, transaction_ended
from qmgr.client.calls.handshake import handshake_error, welcome
from wire import client as cf

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


IDLE = "transaction 1 was aborted: idle timeout: no activity for more than 2 s"


def test_a_transaction_the_daemon_aborted_is_not_blamed_on_a_send() -> None:
    """An idle timeout aborted it; the send that met the abort did not fail."""
    proto = new_protocol()
    state = begin(proto)
    pipeline_send(proto, state)
    proto.receive_data(replies((2, error(cf.ErrorCode.TRANSACTION_ABORTED, IDLE))))
    with pytest.raises(TransactionAborted) as raised:
        state.check()
    assert str(raised.value) == IDLE
    state.end(commit=True)
    waiter = proto.end_request(bytearray(), state)
    proto.receive_data(replies((waiter.request_id, error(cf.ErrorCode.TRANSACTION_NOT_FOUND, "x"))))
    with pytest.raises(TransactionAborted) as raised:
        transaction_ended(state, TransactionNotFound("x"))
    assert str(raised.value) == IDLE


def test_a_receive_that_met_the_daemons_abort_makes_the_commit_say_so() -> None:
    """Not "transaction 1 is not open on this connection", as the daemon answers
    a Commit of a transaction it already dropped."""
    proto = new_protocol()
    state = begin(proto)
    with pytest.raises(TransactionAborted) as raised:
        earlier_failure(state, TransactionAborted(IDLE))
    assert str(raised.value) == IDLE
    state.end(commit=True)  # becomes an abort
    with pytest.raises(TransactionAborted) as raised:
        transaction_ended(state, TransactionNotFound("transaction 1 is not open"))
    assert str(raised.value) == IDLE


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


HTTP_ANSWER = b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\n\r\nbad request\n"


@pytest.mark.parametrize("say_where", [False, True], ids=["blocking", "trio"])
def test_an_http_answer_is_named_as_such(say_where: bool) -> None:
    proto = new_protocol(say_where=say_where)
    hello = proto.request(proto.out, cf.Hello(client_name="me"))
    for chunk in (HTTP_ANSWER[:2], HTTP_ANSWER[2:4]):  # "HTTP/" over several reads
        proto.receive_data(chunk)
    with pytest.raises(ConnectionLost) as caught:
        proto.receive_data(HTTP_ANSWER[4:])
    reason = (
        "the server answered in HTTP: this is an HTTP port (the queue manager's HTTP "
        "listener?), not its client port"
    )
    prefix = f"lost the connection to the queue manager at {ADDRESS}: " if say_where else ""
    assert caught.value.message == prefix + reason
    with pytest.raises(ConnectionLost) as woken:
        proto.result(hello)
    failed = handshake_error(proto, woken.value)
    assert type(failed) is ConnectionLost
    failing = f"handshake with the queue manager at {ADDRESS} failed: "
    assert failed.message == failing + prefix + reason


def test_other_bytes_are_a_malformed_frame_whatever_follows() -> None:
    proto = new_protocol()
    with pytest.raises(ConnectionLost, match="malformed frame"):
        proto.receive_data(b"HTTX/1.1 400 Bad Request\r\n")
    after = new_protocol(version=cf.PROTOCOL_VERSION)
    after.receive_data(replies((1, cf.Ok(value=1))))
    with pytest.raises(ConnectionLost, match="malformed frame"):
        after.receive_data(HTTP_ANSWER)  # not the start of the stream


LIMIT = "too many connections from 127.0.0.1: at most 2 at once"


@pytest.mark.parametrize("say_where", [False, True], ids=["blocking", "trio"])
def test_a_notice_before_the_handshake_is_a_refusal_raised_as_the_daemons_error(
    say_where: bool,
) -> None:
    proto = new_protocol(say_where=say_where)  # no HelloOk yet: version 0
    hello = proto.request(proto.out, cf.Hello(client_name="me"))
    notice = error(cf.ErrorCode.LIMIT_EXCEEDED, LIMIT)
    with pytest.raises(LimitExceeded, match=LIMIT):
        proto.receive_data(replies((0, notice)))
    assert proto.closed
    assert hello.wakes == 1
    # The Hello's waiter (the trio client's reader swallows what receive_data
    # raised), and any request made after the refusal was read, get it too.
    with pytest.raises(LimitExceeded, match=LIMIT) as woken:
        proto.result(hello)
    with pytest.raises(LimitExceeded, match=LIMIT):
        proto.call(cf.Hello(client_name="me"))
    refused = handshake_error(proto, woken.value)
    assert type(refused) is LimitExceeded
    assert refused.message == f"the queue manager at {ADDRESS} refused the connection: {LIMIT}"


def test_a_refusal_of_another_kind_is_raised_as_its_own_error() -> None:
    proto = new_protocol()
    hello = proto.request(proto.out, cf.Hello(client_name="me"))
    with pytest.raises(ShuttingDown, match="stopping"):
        proto.receive_data(replies((0, error(cf.ErrorCode.SHUTTING_DOWN, "stopping"))))
    with pytest.raises(ShuttingDown, match="stopping"):
        proto.result(hello)


@pytest.mark.parametrize("say_where", [False, True], ids=["blocking", "trio"])
@pytest.mark.parametrize(
    ("code", "words"),
    [
        (cf.ErrorCode.LIMIT_EXCEEDED, "closing a connection idle for 3 s"),
        (cf.ErrorCode.LIMIT_EXCEEDED, "closing this idle connection to make room"),
        (cf.ErrorCode.BAD_REQUEST, "frame too large"),
    ],
)
def test_a_notice_after_the_handshake_is_connection_lost_with_the_daemons_words(
    say_where: bool, code: cf.ErrorCode, words: str
) -> None:
    proto = new_protocol(say_where=say_where, version=cf.PROTOCOL_VERSION)
    waiter = proto.request(proto.out, cf.GetStatus())
    lost = (
        f"lost the connection to the queue manager at {ADDRESS}: "
        f"the queue manager closed the connection: {words}"
    )
    with pytest.raises(ConnectionLost) as caught:
        proto.receive_data(replies((0, error(code, words))))
    assert type(caught.value) is ConnectionLost
    assert caught.value.message == lost
    assert proto.broken is not None
    assert proto.broken.message == lost
    assert waiter.wakes == 1
    for raising in (
        lambda: proto.result(waiter),
        lambda: proto.request(bytearray(), cf.GetStatus()),
        lambda: proto.data_to_send(b"x"),
    ):
        with pytest.raises(ConnectionLost) as again:
            raising()
        assert type(again.value) is ConnectionLost
        assert again.value.message == lost


def test_the_first_reason_stays_but_a_breach_after_close_says_what_broke() -> None:
    proto = new_protocol()
    assert proto.fail("first").message == "first"
    assert proto.lost("second").message == "first"
    closed = new_protocol()
    closed.close("the connection was closed")
    closed.close("again")
    assert closed.broken is not None
    assert closed.broken.message == "the connection was closed"
    # A read or write the close cut short (in another thread, say) is not a
    # lost connection: it was closed.
    assert closed.lost("bad file descriptor").message == "the connection was closed"
    # Breaking it on purpose after the close says why.
    error = closed.fail("used from two threads at once")
    assert error.message == "used from two threads at once"
    assert closed.lost("reset by peer").message == error.message


# ----------------------------------------------------------------------
# Values
# ----------------------------------------------------------------------


def test_handshake_values_and_errors() -> None:
    proto = new_protocol()
    hello_ok = cf.HelloOk(version=1, qm_name="qm", qm_guid=uuid.UUID(int=3), server_version="1.0")
    assert welcome(proto, hello_ok) == ("qm", uuid.UUID(int=3), "1.0")
    with pytest.raises(ConnectionLost, match="answered Ok to Hello"):
        welcome(proto, cf.Ok())
    lost = handshake_error(proto, ConnectionLost("reset"))
    assert type(lost) is ConnectionLost
    assert lost.message == f"handshake with the queue manager at {ADDRESS} failed: reset"
    refused = handshake_error(proto, ShuttingDown("stopping"))
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
