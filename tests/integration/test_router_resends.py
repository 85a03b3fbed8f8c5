"""A router whose next hop is down keeps one copy of each message, however often
the source resends it: A -> R -> B, with R's link to B through a fault proxy that
refuses every connection. A resends everything unacknowledged at each OrderAck
wait (every second here); R's outgoing queue stays at one entry per message,
also after R restarts; once the link is back, B has every message exactly once
and in order, and both outgoing queues empty."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator

from click.testing import CliRunner
from fault_proxy import FaultProxy
from helpers import (
    PEER_FAST,
    ROUTER,
    DaemonProcess,
    commit_batches,
    drain,
    log_events,
    outgoing_settled,
    remote_queue,
    route_args,
    settings,
    wait_until,
)

from qmgr.cli import cli
from qmgr.client import connect


def held(daemon: DaemonProcess) -> int:
    """Entries in a queue manager's outgoing queues (waiting or unacknowledged)."""
    with connect(daemon.address) as qm:
        return sum(info.waiting + info.unacknowledged for info in qm.outgoing())


def resends(a: DaemonProcess) -> int:
    """How many times A's OrderAck wait expired (each resends all it holds)."""
    return len(log_events(a, "order_ack_wait_expired"))


def dropped_resends(daemon: DaemonProcess) -> float:
    """``qmgr_relayed_resends_dropped_total`` as the daemon's /metrics says it."""
    status, body = daemon.http_get("/metrics")
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith("qmgr_relayed_resends_dropped_total "):
            return float(line.split()[1])
    raise AssertionError("qmgr_relayed_resends_dropped_total is not exported")


def wait_for_resends(a: DaemonProcess, rounds: int) -> None:
    seen = resends(a)
    wait_until(lambda: resends(a) >= seen + rounds, 60)
    # Each says how many it sends again: those the router holds, never 0.
    assert all(event["unacknowledged"] > 0 for event in log_events(a, "order_ack_wait_expired"))


@contextlib.contextmanager
def next_hop_down(
    daemon_factory: Callable[..., DaemonProcess],
) -> Iterator[tuple[DaemonProcess, DaemonProcess, DaemonProcess, FaultProxy]]:
    """``(a, r, b, to_b)``: A's messages for B go through the router R, whose link
    to B goes through ``to_b``, a proxy that refuses every connection for now."""
    b = daemon_factory(name="qm-b", extra_args=PEER_FAST)
    with FaultProxy(b.peer_port) as to_b:
        through_proxy = settings(f'routes."127.0.0.1:{b.peer_port}"="{to_b.address}"')
        r = daemon_factory(name="qm-r", extra_args=(*PEER_FAST, *ROUTER, *through_proxy))
        a = daemon_factory(
            name="qm-a", extra_args=(*PEER_FAST, *route_args(b.peer_port, r.peer_port))
        )
        to_b.refuse(3600)
        to_b.cut()
        yield a, r, b, to_b


def test_resends_while_the_next_hop_is_down_do_not_grow_the_routers_queue(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    with next_hop_down(daemon_factory) as (a, r, b, to_b):
        with connect(a.address) as qa, connect(b.address) as qb:
            qb.create_queue("orders", transactional=True)
            expected = commit_batches(qa, remote_queue(b, "orders"), 0, 60)
            wait_until(lambda: held(r) == len(expected), 30)

            wait_for_resends(a, 3)
            assert held(r) == len(expected), "R stored the resends again"
            assert dropped_resends(r) >= len(expected)  # each resend counted, none kept
            # What R holds is known from its store: a restart changes nothing.
            r.restart()
            wait_for_resends(a, 3)
            assert held(r) == len(expected), "R stored the resends again after a restart"
            assert held(a) == len(expected)

            to_b.heal()
            wait_until(lambda: outgoing_settled(qa), 60)
            wait_until(lambda: held(r) == 0, 60)
            assert [body for _, body in drain(b.address, "orders")] == expected
            (incoming,) = qb.status().incoming
            assert incoming.last_number == len(expected)


def test_a_trace_finds_the_message_the_router_holds(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    """While the next hop is down, the router's trace shows the message it holds
    for relaying and where it goes next; the source's, its entry not yet
    acknowledged (sent: the router has it); ``qmgr trace`` goes from one to the other."""
    with next_hop_down(daemon_factory) as (a, r, b, to_b):
        with connect(a.address) as qa, connect(r.address) as qr:
            message_id = qa.send(remote_queue(b, "orders"), b"traced", transactional=True)
            wait_until(lambda: held(r) == 1, 30)

            [relaying] = qr.trace(message_id).findings
            assert (relaying.kind, relaying.next_hop) == ("relaying", to_b.address)
            assert relaying.place == f"DIRECT=TCP:127.0.0.1:{b.peer_port}\\private$\\orders"
            assert relaying.detail.startswith("held here for relaying, not yet acknowledged;")
            [outgoing] = qa.trace(message_id).findings
            assert (outgoing.kind, outgoing.next_hop) == ("outgoing", f"127.0.0.1:{r.peer_port}")
            assert "waiting to be sent" not in outgoing.detail
            assert outgoing.detail.startswith("in the outgoing queue, not yet acknowledged;")

            result = CliRunner().invoke(
                cli,
                [
                    *("--server", a.address, "trace", message_id, "--json"),
                    *("--via", f"127.0.0.1:{r.peer_port}={r.address}"),
                ],
            )
            assert result.exit_code == 0, result.output
            visits = json.loads(result.output)
            assert [visit.get("qm") for visit in visits[:2]] == ["qm-a", "qm-r"]
            assert [f["kind"] for f in visits[1]["findings"]] == ["relaying"]
