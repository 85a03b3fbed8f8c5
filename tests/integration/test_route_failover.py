"""A route with two routers: the stream moves to the second when the first is
unreachable, back when it answers, and stays exactly once and in order."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

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
    settings,
    wait_until,
)

from qmgr.client import QueueManager, connect


@contextlib.contextmanager
def two_routers(
    daemon_factory: Callable[..., DaemonProcess], *b_args: str
) -> Iterator[tuple[DaemonProcess, DaemonProcess, FaultProxy, str]]:
    """A whose route to B names two routers, in order: R1 behind a proxy (to make it
    unreachable), then R2; yields A, B, the proxy and R2's ``HOST:PORT``."""
    b = daemon_factory(name="qm-b", extra_args=(*PEER_FAST, *b_args))
    r1 = daemon_factory(name="qm-r1", extra_args=(*PEER_FAST, *ROUTER))
    r2 = daemon_factory(name="qm-r2", extra_args=(*PEER_FAST, *ROUTER))
    with FaultProxy(r1.peer_port) as to_r1:
        second = f"127.0.0.1:{r2.peer_port}"
        route = f'routes."127.0.0.1:{b.peer_port}"=["{to_r1.address}", "{second}"]'
        a = daemon_factory(
            name="qm-a",
            extra_args=(*PEER_FAST, *settings(route, "peers.route_failover_after=0.5")),
        )
        yield a, b, to_r1, second


def test_failover_to_the_second_router_and_back_exactly_once(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    # B holds its OrderAcks for a few seconds, so that what reached it through
    # the first router is still unacknowledged at the source when that router
    # becomes unreachable: the source sends it again through the second, and B
    # must discard every copy.
    late_acks = settings("peers.order_ack_delay=4.0", "peers.order_ack_max_delay=4.0")
    with two_routers(daemon_factory, *late_acks) as (a, b, to_r1, second):
        with connect(a.address) as qa, connect(b.address) as qb:
            qb.create_queue("orders", transactional=True)
            destination = remote_queue(b, "orders")
            expected = commit_batches(qa, destination, 0, 20)
            wait_until(lambda: qb.status().queues and _depth(qb, "orders") == len(expected), 30)
            (outgoing,) = qa.outgoing()
            assert outgoing.next_hop == to_r1.address
            assert outgoing.unacknowledged > 0, "B's OrderAck is held back"

            # The first router becomes unreachable: the stream moves to the second.
            to_r1.refuse(3600)
            to_r1.cut()
            wait_until(lambda: qa.outgoing()[0].next_hop == second, 30)
            routing = qa.routing(destination)
            assert routing.entry == f"127.0.0.1:{b.peer_port}"
            assert [(h.hop, h.in_use) for h in routing.hops] == [
                (to_r1.address, False),
                (second, True),
            ]
            assert routing.hops[0].down_since is not None
            assert qb.routing(destination).local
            expected += commit_batches(qa, destination, 20, 10)
            wait_until(lambda: outgoing_settled(qa), 60)
            (incoming,) = qb.status().incoming
            assert incoming.reject_count > 0, "copies sent again through R2 were discarded"

            # The first answers again: the stream comes back to it.
            expected += _back_to_the_first_router(qa, destination, to_r1, 30, 10)

            assert [body for _, body in drain(b.address, "orders")] == expected
    moves = [(e["from_hop"], e["to_hop"]) for e in log_events(a, "outgoing_route_changed")]
    assert moves == [
        (to_r1.address, second),
        (second, to_r1.address),
    ]


def _back_to_the_first_router(
    qa: QueueManager, destination: str, to_r1: FaultProxy, first: int, count: int
) -> list[bytes]:
    """Let R1 answer again and commit ``count`` transactions from ``first`` on, wait
    for the stream to come back to R1, commit ``count`` more and wait until A's
    outgoing queues settle; return the bodies committed."""
    to_r1.heal()
    bodies = commit_batches(qa, destination, first, count)
    wait_until(lambda: qa.outgoing()[0].next_hop == to_r1.address, 30)
    bodies += commit_batches(qa, destination, first + count, count)
    wait_until(lambda: outgoing_settled(qa), 60)
    return bodies


def _depth(qm: QueueManager, queue: str) -> int:
    return next(info.depth for info in qm.status().queues if info.name == queue)


def test_a_drained_queue_comes_back_to_the_first_router_with_its_next_messages(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    with two_routers(daemon_factory) as (a, b, to_r1, second):
        with connect(a.address) as qa, connect(b.address) as qb:
            qb.create_queue("orders", transactional=True)
            destination = remote_queue(b, "orders")
            to_r1.refuse(3600)
            to_r1.cut()
            expected = commit_batches(qa, destination, 0, 5)
            wait_until(lambda: outgoing_settled(qa) and qa.outgoing()[0].next_hop == second, 60)
            # Drained through R2: R1's link has nothing left to try for.
            wait_until(lambda: qa.routing(destination).hops[0].state == "idle", 30)
            assert qa.routing(destination).hops[0].down_since is None  # no stale verdict
            expected += _back_to_the_first_router(qa, destination, to_r1, 5, 5)
            assert [body for _, body in drain(b.address, "orders")] == expected
