"""The routing call: its request, and the answer it becomes."""

from __future__ import annotations

import datetime as dt

import pytest
from client_kit import run_call
from wire_samples import ROUTING_INFO, hop_info

from qmgr.client import ConnectionLost, NotSupported
from qmgr.client.calls import routing
from qmgr.client.calls.routing import Hop, Route, Routing
from wire import client as cf


def test_the_answer_names_routes_and_hops_with_times_for_people() -> None:
    answer = cf.RoutingInfo(
        router=ROUTING_INFO.router,
        failover_after=ROUTING_INFO.failover_after,
        aliases=ROUTING_INFO.aliases,
        routes=ROUTING_INFO.routes,
        destination="10.0.0.7:1801",
        local=False,
        entry="10.0.0.0/24",
        hops=(
            hop_info("10.0.0.9:1801", "waiting", down_since=1.5),
            hop_info("10.0.0.10:1801", "connected", in_use=True),
        ),
    )
    run = run_call(routing.routing, "DIRECT=TCP:10.0.0.7\\orders", answers=[answer])
    assert run.requests == [cf.GetRouting(destination="DIRECT=TCP:10.0.0.7\\orders")]
    assert run.result == Routing(
        router=True,
        failover_after=30.0,
        aliases=("gw.example.net:11801",),
        routes=(Route("10.0.0.0/24", ("10.0.0.9:1801", "10.0.0.10:1801")),),
        destination="10.0.0.7:1801",
        local=False,
        entry="10.0.0.0/24",
        hops=(
            Hop(
                hop="10.0.0.9:1801",
                state="waiting",
                in_use=False,
                down_since=dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=dt.UTC),
                last_error="connection refused",
            ),
            # A hop that answered last has no time it went down.
            Hop("10.0.0.10:1801", "connected", True, None, ""),
        ),
    )


def test_without_a_destination_it_asks_for_the_routes_alone() -> None:
    run = run_call(routing.routing, answers=[ROUTING_INFO])
    assert run.requests == [cf.GetRouting(destination="")]
    assert run.result.hops == ()
    assert run.result.destination == ""


def test_routing_refuses_another_reply_and_an_old_daemon() -> None:
    with pytest.raises(ConnectionLost, match="not RoutingInfo"):
        run_call(routing.routing, "x", answers=[cf.Ok()])
    with pytest.raises(NotSupported, match=r"routing\(\) needs"):
        run_call(routing.routing, "x", version=cf.ROUTING_VERSION - 1)
