"""Poison handling calls: retry settings, moves between a queue and its subqueues."""

from __future__ import annotations

import datetime as dt

import pytest
from client_kit import NOT_FOUND, run_call

from qmgr.client import ConnectionLost, InvalidArgument, MoveResult, NotSupported, QueueNotFound
from qmgr.client._transaction import TransactionState
from qmgr.client.calls import poison
from wire import client as cf


def test_seconds() -> None:
    assert poison.seconds(None) is None
    assert poison.seconds(3) == 3.0
    assert poison.seconds(dt.timedelta(seconds=1.5)) == 1.5
    for bad in ("1", float("nan"), False, [1]):
        with pytest.raises(InvalidArgument, match="retry_delay must be seconds"):
            poison.seconds(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("handling", "sent"),
    [
        (None, cf.PoisonHandling.UNCHANGED),
        (True, cf.PoisonHandling.ON),
        (False, cf.PoisonHandling.OFF),
    ],
)
def test_set_queue_properties(handling: bool | None, sent: cf.PoisonHandling) -> None:
    retry = (2, None, dt.timedelta(minutes=1))
    run = run_call(poison.set_queue_properties, "q", retry, handling, answers=[cf.Ok()])
    assert run.requests == [
        cf.SetQueueProperties(name="q", poison=sent, retry_count=2, retry_delay=60.0)
    ]


@pytest.mark.parametrize(
    ("quota", "no_quota", "sent"),
    [
        (2**40, False, {"quota": 2**40}),
        (0, False, {"quota": 0}),
        (None, True, {"no_quota": True}),
    ],
)
def test_set_queue_properties_changes_the_quota(
    quota: int | None, no_quota: bool, sent: dict[str, object]
) -> None:
    run = run_call(
        poison.set_queue_properties,
        "q",
        (None, None, None),
        None,
        quota,
        no_quota,
        answers=[cf.Ok()],
    )
    assert run.requests == [cf.SetQueueProperties(name="q", **sent)]  # type: ignore[arg-type]
    # With poison settings, in the same request.
    both = run_call(
        poison.set_queue_properties, "q", (3, None, None), True, quota, no_quota, answers=[cf.Ok()]
    )
    assert both.requests == [
        cf.SetQueueProperties(name="q", poison=cf.PoisonHandling.ON, retry_count=3, **sent)  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize(
    ("quota", "no_quota", "why"),
    [
        (5, True, "give quota or no_quota=True, not both"),
        (-1, False, "quota must be 0..18446744073709551615 bytes or None"),
        (2**64, False, "quota must be"),
    ],
)
def test_a_quota_change_is_checked_before_it_is_sent(
    quota: object, no_quota: object, why: str
) -> None:
    with pytest.raises(InvalidArgument, match=why):
        run_call(poison.set_queue_properties, "q", (None, None, None), None, quota, no_quota)


@pytest.mark.parametrize("quota", [(1, False), (None, True)], ids=["quota", "no_quota"])
def test_a_daemon_before_version_10_cannot_change_a_quota(quota: tuple[int | None, bool]) -> None:
    with pytest.raises(NotSupported) as caught:
        run_call(
            poison.set_queue_properties,
            "q",
            (None, None, None),
            None,
            *quota,
            version=cf.QUOTA_VERSION - 1,
        )
    assert str(caught.value) == (
        "set_queue_properties(quota=) needs a queue manager that speaks protocol version 10; "
        "the one at 127.0.0.1:1802 speaks version 9: upgrade it to use quota changes in place"
    )
    # Poison settings alone still go to it.
    run = run_call(
        poison.set_queue_properties,
        "q",
        (1, None, None),
        None,
        answers=[cf.Ok()],
        version=cf.QUOTA_VERSION - 1,
    )
    assert run.requests == [cf.SetQueueProperties(name="q", retry_count=1)]


def test_poison_handling_is_none_true_or_false() -> None:
    with pytest.raises(InvalidArgument, match="poison_handling must be None, True or False"):
        run_call(poison.set_queue_properties, "q", (None, None, None), "on")  # type: ignore[arg-type]


def test_move() -> None:
    one = run_call(
        poison.move, "q;poison", "q", 7, False, answers=[cf.Moved(count=1, lookup_id=40)]
    )
    assert one.requests == [cf.MoveMessages(source="q;poison", target="q", lookup_id=7)]
    assert one.result == MoveResult(1, 40)
    every = run_call(
        poison.move, "q;poison", "q", None, True, answers=[cf.Moved(count=0, lookup_id=0)]
    )
    assert every.requests == [cf.MoveMessages(source="q;poison", target="q", all=True)]
    assert every.result == MoveResult(0, None)
    with pytest.raises(InvalidArgument, match="lookup_id or all=True, not both"):
        run_call(poison.move, "a", "b", 1, True)
    with pytest.raises(ConnectionLost, match="not Moved"):
        run_call(poison.move, "a", "b", None, False, answers=[cf.Ok()])


def test_a_move_in_a_transaction() -> None:
    state = TransactionState(5)
    run = run_call(
        poison.transaction_move,
        state,
        "q",
        "q;retry",
        None,
        answers=[cf.Moved(count=1, lookup_id=0)],
    )
    assert run.requests == [cf.MoveMessages(tx_id=5, source="q", target="q;retry")]
    assert run.result is True
    none = run_call(
        poison.transaction_move,
        state,
        "q",
        "q;retry",
        None,
        answers=[cf.Moved(count=0, lookup_id=0)],
    )
    assert none.result is False


def test_a_move_checks_its_transaction_before_and_after() -> None:
    failed = TransactionState(5)
    failed.fail(NOT_FOUND, "queue 'q' does not exist")
    with pytest.raises(QueueNotFound, match="cannot commit"):
        run_call(poison.transaction_move, failed, "q", "q;retry", None)  # nothing sent
    late = TransactionState(6)
    answer = cf.Moved(count=1, lookup_id=0)

    def failing_meanwhile(proto: object, *args: object) -> object:
        late.fail(NOT_FOUND, "a send failed meanwhile")
        return (yield from poison.transaction_move(proto, *args))  # type: ignore[arg-type]

    with pytest.raises(QueueNotFound, match="failed meanwhile"):
        run_call(failing_meanwhile, late, "q", "q;retry", None, answers=[answer])


@pytest.mark.parametrize(
    ("call", "args", "what"),
    [
        (poison.set_queue_properties, ("q", (1, None, None), None), "set_queue_properties()"),
        (poison.move, ("q;poison", "q", None, False), "move()"),
        (
            poison.transaction_move,
            (TransactionState(1), "q", "q;retry", None),
            "Transaction.move()",
        ),
    ],
)
def test_an_older_daemon_is_told_apart(call: object, args: tuple[object, ...], what: str) -> None:
    with pytest.raises(NotSupported, match="poison handling and subqueues") as caught:
        run_call(call, *args, version=cf.POISON_VERSION - 1)  # type: ignore[arg-type]
    assert str(caught.value).startswith(f"{what} needs")
