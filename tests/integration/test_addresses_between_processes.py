"""Queue managers reached at addresses that are not the ones they listen on: a
port map or a forwarder in front of the peer port (as ``docker run -p``, a NAT
or a load balancer would be), taken as their own by a queue manager that is
not a router and, through ``server.aliases``, by one that is; and local sends
to an alias."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from fault_proxy import FaultProxy
from helpers import (
    PEER_FAST,
    ROUTER,
    DaemonProcess,
    depth,
    drain,
    free_port,
    log_events,
    outgoing_settled,
    run_qmgr,
    settings,
    wait_until,
)

from qmgr.client import InvalidName, connect


@pytest.fixture(params=["not-a-router", "router-with-alias"])
def port_map(
    request: pytest.FixtureRequest, daemon_factory: Callable[..., DaemonProcess]
) -> Iterator[tuple[FaultProxy, DaemonProcess]]:
    """Queue manager ``qm-b`` behind a forwarder on another port: not a router, or
    a router that knows the forwarder's address as one of its aliases."""
    b = daemon_factory(name="qm-b", extra_args=PEER_FAST)
    with FaultProxy(b.peer_port) as proxy:
        if request.param == "router-with-alias":
            alias = f'server.aliases=["127.0.0.1:{proxy.port}"]'
            b.extra_args += [*ROUTER, *settings(alias)]
            b.restart()
        yield proxy, b


def test_messages_through_a_port_map_reach_the_queue_exactly_once_in_order(
    daemon_factory: Callable[..., DaemonProcess], port_map: tuple[FaultProxy, DaemonProcess]
) -> None:
    proxy, b = port_map
    a = daemon_factory(name="qm-a", extra_args=PEER_FAST)
    mapped = f"DIRECT=TCP:127.0.0.1:{proxy.port}\\private$"
    with connect(a.address) as qa, connect(b.address) as qb:
        qb.create_queue("eod", transactional=True)
        qb.create_queue("plain")
        expected = []
        for t in range(40):
            with qa.begin() as tx:
                for i in range(1 + t % 4):
                    body = f"{t}-{i}".encode()
                    tx.send(f"{mapped}\\eod", body)
                    expected.append(body)
        qa.send(f"{mapped}\\plain", b"express")
        with qa.begin() as tx:
            tx.send(f"{mapped}\\missing", b"nowhere")
        wait_until(lambda: depth(qb, "eod") == len(expected), 30.0)
        wait_until(lambda: outgoing_settled(qa), 15.0)
        assert [body for _, body in drain(b.address, "eod")] == expected
        wait_until(lambda: depth(qb, "plain") == 1, 10.0)
        # A queue that does not exist is refused with MSMQ's class, not passed on.
        wait_until(lambda: depth(qb, "system$;deadxact") == 1, 10.0)
        (refused,) = qb.peek_range("system$;deadxact")
        assert refused.body == b"nowhere"
        assert refused.class_name == "NACK_BAD_DST_Q"
        assert qb.outgoing() == []  # B relayed nothing (a router: by its alias)
    assert [e["message_class"] for e in log_events(b, "message_rejected")] == ["NACK_BAD_DST_Q"]


def test_a_send_to_an_alias_is_local(daemon_factory: Callable[..., DaemonProcess]) -> None:
    qm = daemon_factory(
        name="qm-a",
        extra_args=settings('server.aliases=["203.0.113.5:11801", "qm-a.example.net"]'),
    )
    with connect(qm.address) as client:
        client.create_queue("orders")
        client.send("DIRECT=TCP:203.0.113.5:11801\\private$\\orders", b"mapped")
        client.send("DIRECT=OS:qm-a.example.net\\private$\\orders", b"named")
        assert [m.body for m in client.peek_range("orders")] == [b"mapped", b"named"]
        assert client.outgoing() == []
        routing = client.routing()
        assert (routing.router, routing.aliases) == (
            False,
            ("203.0.113.5:11801", "qm-a.example.net"),
        )
        assert client.routing("203.0.113.5:11801").local
        assert not client.routing("203.0.113.5:1801").local
    status = run_qmgr("--server", qm.address, "status")
    assert "aliases            203.0.113.5:11801, qm-a.example.net" in status.stdout
    (started,) = log_events(qm, "queue_manager_started")
    assert started["aliases"] == ["203.0.113.5:11801", "qm-a.example.net"]
    assert started["router"] is False


def test_each_alias_is_checked_at_start_up(daemon_factory: Callable[..., DaemonProcess]) -> None:
    b = daemon_factory(name="qm-b")
    own_port, nowhere = free_port(), free_port()
    with FaultProxy(own_port) as port_map:
        aliases = [port_map.address, f"127.0.0.1:{b.peer_port}", f"127.0.0.1:{nowhere}"]
        a = daemon_factory(
            name="qm-a",
            extra_args=(
                "--listen",
                f"127.0.0.1:{own_port}",
                *settings(f"server.aliases={json.dumps(aliases)}"),
            ),
        )

        def checked() -> dict[str, tuple[str, dict[str, object]]]:
            return {
                str(e["alias"]): (event, e)
                for event in ("alias_confirmed", "alias_names_another_queue_manager")
                for e in log_events(a, event)
            } | {
                str(e["alias"]): ("alias_not_checked", e)
                for e in log_events(a, "alias_not_checked")
            }

        wait_until(lambda: len(checked()) == 3, 30)
    found = checked()
    assert found[port_map.address][0] == "alias_confirmed"
    event, wrong = found[f"127.0.0.1:{b.peer_port}"]
    assert event == "alias_names_another_queue_manager"
    with connect(b.address) as qb:
        assert wrong["remote_qm"] == str(qb.qm_guid)
    assert wrong["level"] == "error"
    assert found[f"127.0.0.1:{nowhere}"][0] == "alias_not_checked"


def test_a_host_name_the_resolver_refuses_is_a_failed_connection(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    qm = daemon_factory(name="qm-a", extra_args=PEER_FAST)
    with connect(qm.address) as client:
        # One no resolver could take is refused at the send.
        with pytest.raises(InvalidName, match="is not a host name"):
            client.send("DIRECT=OS:a..b\\private$\\orders", b"nowhere")
        # One that looks like a host name but that IDNA cannot encode (a label
        # over 63 bytes once encoded) fails as a connection.
        client.send(f"DIRECT=OS:{'ü' * 60}\\private$\\orders", b"nowhere")
        wait_until(lambda: "cannot connect" in client.outgoing()[0].last_error, 30)
        client.create_queue("still-serving")
    assert qm.running
