"""A next hop that turns out to be this queue manager (a hairpin NAT, a port map of
its own port, a name of this host not in ``server.aliases``): the session through
the network is closed with ``peer_session_reaches_itself``, and the messages are
delivered here, exactly once and in order, over plain TCP and over mutual TLS."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fault_proxy import FaultProxy
from helpers import (
    PEER_FAST,
    DaemonProcess,
    commit_batches,
    drain,
    log_events,
    outgoing_settled,
    wait_until,
)
from pki import Pki

from qmgr.client import connect


@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
def test_messages_to_a_port_map_of_this_queue_manager_are_delivered_here(
    daemon_factory: Callable[..., DaemonProcess], pki: Pki, tls: bool
) -> None:
    peers_only = pki.serve_args("qm-a", "--set", "tls.clients=false")
    extra = [*peers_only, *PEER_FAST] if tls else [*PEER_FAST]
    qm = daemon_factory(name="qm-a", extra_args=extra)
    with FaultProxy(qm.peer_port) as port_map, connect(qm.address) as client:
        client.create_queue("orders", transactional=True)
        mapped = f"DIRECT=TCP:{port_map.address}\\private$\\orders"
        expected = commit_batches(client, mapped, 0, 12)
        wait_until(lambda: outgoing_settled(client), 30)
        assert [body for _, body in drain(qm.address, "orders")] == expected
        (found,) = log_events(qm, "peer_session_reaches_itself")
        assert found["peer"] == port_map.address
        how = "own certificate" if tls else "the peer's GUID is ours"
        assert how in str(found["reason"])
        # Later messages go the same way, without another attempt through the network.
        attempts = port_map.snapshot().accepted
        with client.begin() as tx:
            tx.send(mapped, b"later")
            tx.commit()
        wait_until(lambda: outgoing_settled(client), 30)
        assert [body for _, body in drain(qm.address, "orders")] == [*expected, b"later"]
        assert port_map.snapshot().accepted == attempts
        routing = client.routing(mapped)
        assert [hop.hop for hop in routing.hops] == [port_map.address]
    assert not log_events(qm, "message_rejected")
    (started,) = log_events(qm, "queue_manager_started")
    assert started["tls_peers"] is tls
