"""Resolving and listing prepared transactions: checks, requests, replies, old daemons."""

from __future__ import annotations

import dataclasses
import time

import pytest
from client_kit import error, run_call

from qmgr.client import (
    ConnectionLost,
    InvalidArgument,
    NotSupported,
    Resolution,
    TransactionInfo,
    TransactionNotFound,
    TransactionStatus,
)
from qmgr.client.calls import two_phase
from wire import client as cf


def test_transaction_info_from_wire() -> None:
    since = time.time() - 90
    wire = cf.TransactionInfo(xid="x", state=1, since=since, sends=2, receives=3, bytes=40)
    info = TransactionInfo.from_wire(wire)
    assert info == TransactionInfo(
        xid="x", state=TransactionStatus.PREPARED, since=since, sends=2, receives=3, bytes=40
    )
    assert 89 < info.age < 120
    assert info.state == "prepared"
    states = [TransactionInfo.from_wire(dataclasses.replace(wire, state=s)) for s in (2, 3)]
    assert [i.state for i in states] == [TransactionStatus.COMMITTED, TransactionStatus.ABORTED]
    future = TransactionInfo.from_wire(dataclasses.replace(wire, since=1e12))
    assert future.age == 0.0
    with pytest.raises(ConnectionLost, match="unknown transaction state 9"):
        TransactionInfo.from_wire(dataclasses.replace(wire, state=9))


def test_resolve_requests_are_checked() -> None:
    assert two_phase.resolve_request([], commit=True) is None
    assert two_phase.resolve_request(["a", "b"], commit=False) == cf.Resolve(
        commit=False, xids=("a", "b")
    )
    with pytest.raises(InvalidArgument, match="not a single str"):
        two_phase.resolve_request("abc", commit=True)
    with pytest.raises(InvalidArgument, match="at most 10000"):
        two_phase.resolve_request([f"x{i}" for i in range(10_001)], commit=True)
    with pytest.raises(InvalidArgument, match="1 to 200 bytes"):
        two_phase.resolve_request(["a", ""], commit=True)
    with pytest.raises(InvalidArgument, match="limit"):
        two_phase.list_request("", False, -1)


def test_resolving_one_and_many() -> None:
    one = run_call(two_phase.commit_prepared, "a", answers=[cf.Resolutions(outcomes=(1,))])
    assert (one.requests, one.result) == (
        [cf.Resolve(commit=True, xids=("a",))],
        Resolution.COMMITTED,
    )
    again = run_call(two_phase.abort_prepared, "b", answers=[cf.Resolutions(outcomes=(4,))])
    assert again.result is Resolution.ALREADY_ABORTED
    many = run_call(
        two_phase.commit_prepared_all, ["c", "d"], answers=[cf.Resolutions(outcomes=(1, 2))]
    )
    assert many.result == [Resolution.COMMITTED, Resolution.ALREADY_COMMITTED]
    aborted = run_call(
        two_phase.abort_prepared_all, ("e",), answers=[cf.Resolutions(outcomes=(3,))]
    )
    assert aborted.requests == [cf.Resolve(commit=False, xids=("e",))]
    with pytest.raises(TransactionNotFound, match="'zz'"):
        run_call(
            two_phase.commit_prepared,
            "zz",
            answers=[error(cf.ErrorCode.TRANSACTION_NOT_FOUND, "'zz'")],
        )


def test_resolving_none_asks_nothing_even_of_an_old_daemon() -> None:
    assert run_call(two_phase.commit_prepared_all, [], version=2).result == []
    assert run_call(two_phase.abort_prepared_all, (), version=2).requests == []


def test_the_wrong_resolutions_are_protocol_errors() -> None:
    with pytest.raises(ConnectionLost, match="protocol error"):
        run_call(two_phase.commit_prepared_all, ["a", "b"], answers=[cf.Resolutions(outcomes=(1,))])
    with pytest.raises(ConnectionLost, match="protocol error"):
        run_call(two_phase.commit_prepared, "a", answers=[cf.Resolutions(outcomes=(5,))])
    with pytest.raises(ConnectionLost, match="not Resolutions"):
        run_call(two_phase.commit_prepared, "a", answers=[cf.Ok()])


def test_listing_transactions() -> None:
    listed = cf.TransactionList(
        transactions=(
            cf.TransactionInfo(xid="x", state=1, since=2.5, sends=1, receives=2, bytes=3),
        )
    )
    run = run_call(two_phase.transactions, "sp", True, 5, answers=[listed])
    assert run.requests == [cf.ListTransactions(prefix="sp", resolved=True, max_count=5)]
    assert [t.xid for t in run.result] == ["x"]
    with pytest.raises(ConnectionLost, match="not TransactionList"):
        run_call(two_phase.transactions, "", False, 1000, answers=[cf.Ok()])
    with pytest.raises(InvalidArgument, match="limit"):
        run_call(two_phase.transactions, "", False, 2**32)


@pytest.mark.parametrize(
    ("call", "args", "what"),
    [
        (two_phase.commit_prepared, ("x",), "commit_prepared()"),
        (two_phase.abort_prepared, ("x",), "abort_prepared()"),
        (two_phase.commit_prepared_all, (["x"],), "commit_prepared_all()"),
        (two_phase.abort_prepared_all, (["x"],), "abort_prepared_all()"),
        (two_phase.transactions, ("", False, 1000), "transactions()"),
    ],
)
def test_an_older_daemon_is_told_apart(call: object, args: tuple[object, ...], what: str) -> None:
    with pytest.raises(NotSupported, match="speaks version 2") as caught:
        run_call(call, *args, version=2)  # type: ignore[arg-type]
    assert str(caught.value).startswith(
        f"{what} needs a queue manager that speaks protocol version 3"
    )
