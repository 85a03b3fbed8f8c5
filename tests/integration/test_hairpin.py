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
    ROUTER,
    DaemonProcess,
    auth_required,
    commit_batches,
    drain,
    log_events,
    outgoing_settled,
    wait_until,
)
from pki import Pki

from qmgr.client import AccessDenied, MessageClass, QueueManager, connect


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


def test_a_router_delivers_here_what_another_queue_manager_sends_to_its_port_map(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    """A router judges an arriving message by the host it names, and a port map of
    itself is not among its addresses: it relays such a message to that hop, which
    turns out to be itself. What comes back over that session is for a queue here
    (not relayed round again until its hop count runs out), its OrderAcks go back to
    the source the way its messages came, and the source's queue empties."""
    router = daemon_factory(name="qm-r", extra_args=(*PEER_FAST, *ROUTER))
    source = daemon_factory(name="qm-a", extra_args=PEER_FAST)
    with (
        FaultProxy(router.peer_port) as port_map,
        connect(router.address) as at_router,
        connect(source.address) as client,
    ):
        at_router.create_queue("orders", transactional=True)
        mapped = f"DIRECT=TCP:{port_map.address}\\private$\\orders"
        expected = commit_batches(client, mapped, 0, 12)
        wait_until(lambda: outgoing_settled(client), 60)
        assert [body for _, body in drain(router.address, "orders")] == expected
        assert drain(router.address, "system$;deadxact") == []
        assert log_events(router, "peer_session_reaches_itself")
    assert not log_events(router, "message_rejected")


@pytest.mark.parametrize(
    ("entry", "delivered"),
    [("peer:qm-r", False), ("peer:anonymous", True)],
    ids=["own-rights-not-lent", "anonymous-rights"],
)
def test_what_a_router_forwards_to_itself_has_the_rights_of_an_anonymous_peer(
    daemon_factory: Callable[..., DaemonProcess], pki: Pki, entry: str, delivered: bool
) -> None:
    """Under mutual TLS, a message another queue manager sent to a port map of this
    router comes back over the session with itself, whose peer is this queue manager;
    the one that brought it is not known there, so the queue's permissions judge it
    as an anonymous peer, never with the router's own rights."""
    token = "router-root-token-0123456789"
    secured = [*auth_required({"root": token}, admins=["root"]), *PEER_FAST, *ROUTER]
    plain_clients = ("--set", "tls.clients=false")
    router = daemon_factory(
        name="qm-r", extra_args=pki.serve_args("qm-r", *plain_clients, *secured)
    )
    source = daemon_factory(
        name="qm-a", extra_args=pki.serve_args("qm-a", *plain_clients, *PEER_FAST)
    )
    with (
        FaultProxy(router.peer_port) as port_map,
        connect(router.address, token=token) as at_router,
        connect(source.address) as client,
    ):
        at_router.create_queue("orders", transactional=True)
        at_router.grant("orders", entry, "send")
        send_through_the_port_map(client, port_map, at_router, delivered=delivered)


@pytest.mark.parametrize(
    ("entry", "delivered"),
    [("peer:*", False), ("peer:qm-a", False), ("everyone", True)],
    ids=["peers-rights-not-lent", "own-rights-not-lent", "everyones-rights"],
)
def test_a_client_gains_no_rights_by_sending_to_this_queue_manager_through_a_port_map(
    daemon_factory: Callable[..., DaemonProcess], pki: Pki, entry: str, delivered: bool
) -> None:
    """Under mutual TLS and permissions, a client's message to a port map of this
    queue manager comes back over the session with itself, whose peer is this queue
    manager: the client that sent it is not known there, so it may put there only
    what everyone may, never what the queue lets this queue manager or its peers
    send. A spelling of its own address that needs no port map is a local send,
    judged by the client's own rights at once."""
    tokens = {"root": "hairpin-root-token-0123456789", "bob": "hairpin-bob-token-0123456789"}
    secured = [*auth_required(tokens, admins=["root"]), *PEER_FAST]
    qm = daemon_factory(
        name="qm-a", extra_args=pki.serve_args("qm-a", "--set", "tls.clients=false", *secured)
    )
    with (
        FaultProxy(qm.peer_port) as port_map,
        connect(qm.address, token=tokens["root"]) as root,
        connect(qm.address, token=tokens["bob"]) as bob,
    ):
        root.create_queue("orders", transactional=True)
        root.grant("orders", entry, "send")
        own = (f"0.0.0.0:{qm.peer_port}", f"[::ffff:127.0.0.1]:{qm.peer_port}")
        for spelled in [f"DIRECT={p}:{o}\\private$\\orders" for p in ("TCP", "OS") for o in own]:
            if not delivered:
                with pytest.raises(AccessDenied):
                    bob.send(spelled, b"spelled", transactional=True)
        send_through_the_port_map(bob, port_map, root, delivered=delivered)
        assert log_events(qm, "peer_session_reaches_itself")


def send_through_the_port_map(
    sender: QueueManager, port_map: FaultProxy, at_destination: QueueManager, *, delivered: bool
) -> None:
    """Commit one message to ``orders`` through ``port_map``, wait until the sender's
    outgoing queues settle, and check it is in ``orders`` if ``delivered``, else
    in ``system$;deadxact`` refused with NACK_ACCESS_DENIED."""
    with sender.begin() as tx:
        tx.send(f"DIRECT=TCP:{port_map.address}\\private$\\orders", b"mapped")
        tx.commit()
    wait_until(lambda: outgoing_settled(sender), 60)
    kept = [m.body for m in at_destination.peek_range("orders")]
    refused = at_destination.peek_range("system$;deadxact")
    if delivered:
        assert (kept, refused) == ([b"mapped"], [])
    else:
        assert kept == []
        assert [(m.body, m.message_class) for m in refused] == [
            (b"mapped", MessageClass.NACK_ACCESS_DENIED)
        ]


def test_its_session_with_itself_takes_no_slot_of_the_sessions_peers_open_to_it(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    # peers.max_connections=1: after a send to its own port map, A's session with
    # itself (in the process) is open, and B's session to A still gets in.
    a = daemon_factory(name="qm-a", extra_args=[*PEER_FAST, "--set", "peers.max_connections=1"])
    b = daemon_factory(name="qm-b", extra_args=[*PEER_FAST])
    with FaultProxy(a.peer_port) as port_map, connect(a.address) as to_a:
        to_a.create_queue("orders", transactional=True)
        mapped = f"DIRECT=TCP:{port_map.address}\\private$\\orders"
        mine = commit_batches(to_a, mapped, 0, 3)
        wait_until(lambda: outgoing_settled(to_a), 30)
        with connect(b.address) as to_b:
            theirs = commit_batches(
                to_b, f"DIRECT=TCP:127.0.0.1:{a.peer_port}\\private$\\orders", 100, 3
            )
            wait_until(lambda: outgoing_settled(to_b), 30)
        assert sorted(body for _, body in drain(a.address, "orders")) == sorted([*mine, *theirs])
    for event in ("peer_refused", "peer_session_closed"):
        refused = [e for e in log_events(a, event) if "max_connections" in str(e["reason"])]
        assert refused == [], event
