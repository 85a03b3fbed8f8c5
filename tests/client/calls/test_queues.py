"""The queue calls: the requests they send, their checks, and what the replies become."""

from __future__ import annotations

import datetime as dt

import pytest
from client_kit import run_call, status_info
from wire_samples import QUEUE_INFO

from qmgr.client import ConnectionLost, InvalidArgument, NotSupported, QueueInfo, Status
from qmgr.client.calls import queues
from wire import client as cf

NO_RETRY = (None, None, None)


def test_create_queue_sends_every_setting() -> None:
    run = run_call(queues.create_queue, "q", True, True, 500, NO_RETRY, answers=[cf.Ok()])
    assert run.requests == [cf.CreateQueue(name="q", transactional=True, journal=True, quota=500)]
    assert run.result is None


@pytest.mark.parametrize(
    ("retry", "sent"),
    [
        ((3, None, None), {"retry_count": 3}),
        ((None, 2, None), {"retry_cycles": 2}),
        ((None, None, 60), {"retry_delay": 60.0}),
        ((None, None, dt.timedelta(minutes=2)), {"retry_delay": 120.0}),
    ],
)
def test_create_queue_with_retry_settings(
    retry: tuple[object, ...], sent: dict[str, object]
) -> None:
    run = run_call(queues.create_queue, "q", False, False, None, retry, answers=[cf.Ok()])
    assert run.requests == [cf.CreateQueue(name="q", **sent)]  # type: ignore[arg-type]


def test_retry_settings_need_a_daemon_with_poison_handling() -> None:
    with pytest.raises(NotSupported, match=r"create_queue\(retry_...=\) needs"):
        run_call(queues.create_queue, "q", False, False, None, (1, None, None), version=4)
    plain = run_call(
        queues.create_queue, "q", False, False, None, NO_RETRY, answers=[cf.Ok()], version=1
    )
    assert plain.requests == [cf.CreateQueue(name="q")]


@pytest.mark.parametrize("delay", ["60", float("nan"), True])
def test_a_retry_delay_is_seconds(delay: object) -> None:
    with pytest.raises(InvalidArgument, match="retry_delay must be seconds"):
        run_call(queues.create_queue, "q", False, False, None, (None, None, delay))


def test_delete_and_purge_say_how_many_messages_went() -> None:
    assert run_call(queues.delete_queue, "q", answers=[cf.Ok(value=4)]).result == 4
    purged = run_call(queues.purge_queue, "q", answers=[cf.Ok(value=2)])
    assert (purged.requests, purged.result) == ([cf.PurgeQueue(name="q")], 2)


def test_list_queues_and_status() -> None:
    listed = run_call(queues.list_queues, answers=[cf.QueueList(queues=(QUEUE_INFO,))])
    assert listed.result == [QueueInfo.from_wire(QUEUE_INFO)]
    info = status_info()
    status = run_call(queues.status, answers=[info])
    assert status.requests == [cf.GetStatus()]
    assert status.result == Status.from_wire(info)


@pytest.mark.parametrize(
    ("call", "wanted"),
    [
        (queues.create_queue, "Ok"),
        (queues.list_queues, "QueueList"),
        (queues.status, "StatusInfo"),
    ],
)
def test_a_reply_of_the_wrong_kind_is_a_protocol_error(call: object, wanted: str) -> None:
    args = ("q", False, False, None, NO_RETRY) if call is queues.create_queue else ()
    with pytest.raises(ConnectionLost, match=f"answered NoMessage, not {wanted}"):
        run_call(call, *args, answers=[cf.NoMessage()])  # type: ignore[arg-type]
