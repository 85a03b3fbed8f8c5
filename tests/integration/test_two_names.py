"""One sender, one destination queue, two names for it: two outgoing queues at
the sender, two exactly-once streams at the receiver (keyed by the sequence
timestamp), each delivered exactly once and in commit order, and both
outgoing queues emptied."""

from __future__ import annotations

from collections.abc import Callable

from fault_proxy import FaultProxy
from helpers import (
    PEER_FAST,
    DaemonProcess,
    depth,
    drain,
    outgoing_settled,
    remote_queue,
    wait_until,
)

from qmgr.client import connect


def test_one_queue_under_two_names_gets_both_streams_exactly_once_in_order(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    b = daemon_factory(name="qm-b", extra_args=PEER_FAST)
    a = daemon_factory(name="qm-a", extra_args=PEER_FAST)
    with FaultProxy(b.peer_port) as port_map, connect(a.address) as qa, connect(b.address) as qb:
        qb.create_queue("orders", transactional=True)
        names = {
            "direct": remote_queue(b, "orders"),
            "mapped": f"DIRECT=TCP:127.0.0.1:{port_map.port}\\private$\\orders",
        }
        sent: dict[str, list[bytes]] = {name: [] for name in names}
        for t in range(30):
            # Interleaved: transactions under one name, then the other, some with both.
            chosen = ["direct", "mapped"] if t % 3 == 2 else [("direct", "mapped")[t % 2]]
            with qa.begin() as tx:
                for name in chosen:
                    for i in range(1 + t % 3):
                        body = f"{name}-{t}-{i}".encode()
                        tx.send(names[name], body)
                        sent[name].append(body)
        total = sum(len(bodies) for bodies in sent.values())
        wait_until(lambda: depth(qb, "orders") == total, 30.0)
        wait_until(lambda: outgoing_settled(qa), 30.0)
        outgoing = qa.outgoing()
        assert len(outgoing) == 2
        assert all(q.waiting == 0 and q.unacknowledged == 0 for q in outgoing)
        streams = [i for i in qb.status().incoming if i.queue.lower().endswith("orders")]
        assert len(streams) == 2
        assert len({s.sequence_timestamp for s in streams}) == 2
        assert {s.source_qm for s in streams} == {qa.status().qm_guid}
    received = [body for _, body in drain(b.address, "orders")]
    assert sorted(received) == sorted(sent["direct"] + sent["mapped"])  # each exactly once
    for name, bodies in sent.items():
        assert [body for body in received if body.startswith(f"{name}-".encode())] == bodies
