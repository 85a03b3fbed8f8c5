"""TLS with real daemons on loopback: the client port (server certificates, client
certificates, plain text and strangers refused), mutual TLS between queue managers
(a peer from another CA refused, a peer that claims another queue manager's GUID
refused, a client's certificate refused on either side of the peer port), the
start-up rule for listeners other hosts can reach, and the start-up check of the
queue manager's own certificate (expired, not yet valid, a client's).

A daemon that must present a certificate the start-up check refuses (an expired
one, a client's) is a :class:`~pki.UncheckedDaemon`: it stands for one whose
certificate expired while it ran, or for a modified queue manager."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import re
import socket
import ssl
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio
from click.testing import CliRunner
from helpers import (
    PEER_FAST,
    ROUTER,
    DaemonProcess,
    free_port,
    log_events,
    remote_queue,
    route_args,
    run_qmgr,
    send_in_transaction,
    settings,
    wait_until,
)
from pki import CLIENT_USAGES, DAY, SERVER_USAGES, Pki, UncheckedDaemon

from qmgr.cli import cli
from qmgr.client import ConnectionLost, QueueManager, connect, open_client, tls_context


@contextlib.contextmanager
def clients_of(pki: Pki, *daemons: DaemonProcess) -> Iterator[list[QueueManager]]:
    """A client of each of ``daemons``, over TLS trusting ``pki``'s CA."""
    context = tls_context(pki.ca)
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(connect(d.address, tls=context)) for d in daemons]


@pytest.fixture
def stranger(tmp_path: Path) -> Pki:
    """Another deployment's CA."""
    return Pki(tmp_path / "other-pki")


@pytest.fixture
def unchecked_factory(
    daemon_factory: Callable[..., DaemonProcess],
) -> Callable[..., DaemonProcess]:
    """Start :class:`UncheckedDaemon` processes with ``daemon_factory``."""
    return functools.partial(daemon_factory, kind=UncheckedDaemon)


@pytest.fixture
def tls_peer(
    daemon_factory: Callable[..., DaemonProcess], pki: Pki
) -> Callable[..., DaemonProcess]:
    """``tls_peer(name, *more, cert=None)`` starts queue manager ``name``, quick to peer,
    with mutual TLS: ``pki``'s certificate for ``name`` (or ``cert``), then ``more``."""

    def start(name: str, *more: str, cert: tuple[Path, Path] | None = None) -> DaemonProcess:
        return daemon_factory(
            name=name, extra_args=[*pki.serve_args(name, *more, cert=cert), *PEER_FAST]
        )

    return start


def round_trip(qm: QueueManager) -> None:
    qm.create_queue("orders", transactional=True)
    send_in_transaction(qm, "orders", b"over tls")
    message = qm.receive("orders", timeout=5)
    assert message is not None
    assert message.body == b"over tls"


def refused_client(daemon: DaemonProcess, tls: ssl.SSLContext) -> None:
    """A client with ``tls`` is refused: TLS 1.3, the refusal arrives with the first reply."""
    with pytest.raises(ConnectionLost):
        with connect(daemon.address, tls=tls, timeout=5) as qm:
            qm.list_queues()


def refusals(daemon: DaemonProcess, part: str) -> list[str]:
    """The reasons of ``daemon``'s ``peer_refused`` events that contain ``part``."""
    reasons = [str(event.get("reason")) for event in log_events(daemon, "peer_refused")]
    return [reason for reason in reasons if part in reason]


# --------------------------------------------------------------------------- clients


def test_clients_speak_tls_and_plain_text_is_refused(
    daemon_factory: Callable[..., DaemonProcess], pki: Pki
) -> None:
    daemon = daemon_factory(extra_args=pki.serve_args("qm-a"))
    with connect(daemon.address, tls=tls_context(pki.ca)) as qm:
        round_trip(qm)
    with pytest.raises(ConnectionLost):
        connect(daemon.address, timeout=5)
    wait_until(lambda: len(log_events(daemon, "client_tls_refused")) >= 1, timeout=10)
    # The daemon goes on serving.
    with connect(daemon.address, tls=tls_context(pki.ca)) as qm:
        assert qm.receive("orders", timeout=0) is None


def test_an_address_that_keeps_failing_is_slowed_down(
    daemon_factory: Callable[..., DaemonProcess], pki: Pki
) -> None:
    limits = ["--set", "auth.failure_limit=2", "--set", "auth.failure_delay=0.2"]
    daemon = daemon_factory(extra_args=pki.serve_args("qm-a", *limits))
    for _ in range(2):
        with pytest.raises(ConnectionLost):
            connect(daemon.address, timeout=5)  # plain text: a failed handshake
    wait_until(lambda: len(log_events(daemon, "client_tls_refused")) >= 2, timeout=10)
    with connect(daemon.address, tls=tls_context(pki.ca)) as qm:
        qm.list_queues()  # served, after the delay
    [delayed] = log_events(daemon, "connection_delayed")
    assert delayed["seconds"] == 0.2


def test_a_client_refuses_a_queue_manager_of_another_ca_or_an_expired_one(
    daemon_factory: Callable[..., DaemonProcess],
    unchecked_factory: Callable[..., DaemonProcess],
    pki: Pki,
    stranger: Pki,
) -> None:
    daemon = daemon_factory(extra_args=pki.serve_args("qm-a"))
    with pytest.raises(ConnectionLost, match="certificate is not trusted"):
        connect(daemon.address, tls=tls_context(stranger.ca), timeout=5)
    expired = unchecked_factory(extra_args=pki.serve_args("old", cert=pki.expired_qm("old")))
    with pytest.raises(ConnectionLost, match=r"not trusted \(certificate has expired\)"):
        connect(expired.address, tls=tls_context(pki.ca), timeout=5)


def test_auth_required_admits_only_clients_with_a_certificate_of_the_ca(
    daemon_factory: Callable[..., DaemonProcess], pki: Pki, stranger: Pki
) -> None:
    daemon = daemon_factory(extra_args=pki.serve_args("qm-a", "--set", "auth.required=true"))
    refused_client(daemon, tls_context(pki.ca))
    # The command line says what is missing, not only that the daemon may be down.
    cli_args = ["--server", daemon.address, "--tls-ca", str(pki.ca), "status"]
    without = CliRunner().invoke(cli, cli_args)
    assert without.exit_code == 1
    assert "it may require a client certificate" in without.stderr.splitlines()[-1], without.stderr
    cert, key = stranger.client("mallory")
    refused_client(daemon, tls_context(pki.ca, certificate=cert, key=key))
    cert, key = pki.client("alice")
    with connect(daemon.address, tls=tls_context(pki.ca, certificate=cert, key=key)) as qm:
        round_trip(qm)
    wait_until(
        lambda: any(e.get("principal") == "alice" for e in log_events(daemon, "queue_created")),
        timeout=10,
    )
    assert len(log_events(daemon, "client_tls_refused")) >= 2


@pytest.mark.parametrize("name", ["peer:qm-b", "group:ops", "everyone"])
def test_a_client_certificate_may_not_pass_for_a_peer_or_a_group(
    daemon_factory: Callable[..., DaemonProcess], pki: Pki, name: str
) -> None:
    """A certificate whose common name is a list entry of peers or groups (which
    ``qmgr certs`` does not issue, but another tool on the same CA could) is
    refused: it would hold the rights of every peer, group or everyone."""
    daemon = daemon_factory(extra_args=pki.serve_args("qm-a", "--set", "auth.required=true"))
    cert, key = pki.leaf(name.replace(":", "-") + "-cert", usages=CLIENT_USAGES, common_name=name)
    refused_client(daemon, tls_context(pki.ca, certificate=cert, key=key))
    wait_until(lambda: bool(log_events(daemon, "client_tls_refused")), timeout=10)
    [refused] = log_events(daemon, "client_tls_refused")
    assert "names a group, a peer or everyone" in str(refused["reason"])


# --------------------------------------------------------------------------- peers


def test_queue_managers_exchange_messages_over_mutual_tls_and_a_stranger_is_refused(
    tls_peer: Callable[..., DaemonProcess],
    daemon_factory: Callable[..., DaemonProcess],
    pki: Pki,
    stranger: Pki,
) -> None:
    a = tls_peer("qm-a")
    b = tls_peer("qm-b")
    c = daemon_factory(name="qm-c", extra_args=[*stranger.serve_args("qm-c"), *PEER_FAST])
    context = tls_context(pki.ca)
    with (
        connect(a.address, tls=context) as qa,
        connect(b.address, tls=context) as qb,
        connect(c.address, tls=tls_context(stranger.ca)) as qc,
    ):
        qb.create_queue("orders", transactional=True)
        for qm, body in ((qa, b"from a"), (qc, b"from c")):
            send_in_transaction(qm, remote_queue(b, "orders"), body)
        message = qb.receive("orders", timeout=20)
        assert message is not None
        assert message.body == b"from a"
        wait_until(lambda: qc.outgoing()[0].last_error != "", timeout=20)
        [outgoing] = qc.outgoing()
        assert outgoing.waiting == 1
        assert "TLS" in outgoing.last_error
        assert qb.receive("orders", timeout=0) is None
    assert log_events(b, "peer_refused")
    [registered] = log_events(b, "peer_identity_registered")
    assert registered["identity"] == "qm-a"


def test_a_peer_port_refusing_the_address_points_the_sender_at_its_log(
    tls_peer: Callable[..., DaemonProcess], pki: Pki
) -> None:
    # The peer port closes a connection from outside peers.accept_from before
    # any TLS: the sender sees its handshake cut short, and is told what that
    # usually means, as without TLS.
    b = tls_peer("qm-b", *settings('peers.accept_from=["192.0.2.0/24"]'))
    a = tls_peer("qm-a")
    with clients_of(pki, a, b) as (qa, qb):
        qb.create_queue("orders", transactional=True)
        send_in_transaction(qa, remote_queue(b, "orders"), b"refused")
        wait_until(lambda: qa.outgoing()[0].last_error != "", timeout=20)
        error = qa.outgoing()[0].last_error
    assert error.startswith("TLS handshake failed: the connection was closed before the session")
    assert "the peer may refuse this queue manager (peers.accept_from" in error
    assert log_events(b, "peer_refused")


def test_a_peer_cannot_speak_for_another_queue_manager(
    tls_peer: Callable[..., DaemonProcess],
    pki: Pki,
) -> None:
    b = tls_peer("qm-b")
    identity = pki.qm("qm-a")
    a = tls_peer("qm-a", cert=identity)
    # Another queue manager (another store, another GUID) with qm-a's certificate.
    impostor = tls_peer("qm-x", cert=identity)
    with clients_of(pki, a, b, impostor) as (qa, qb, qx):
        qb.create_queue("orders", transactional=True)
        send_in_transaction(qa, remote_queue(b, "orders"), b"genuine")
        message = qb.receive("orders", timeout=20)
        assert message is not None
        send_in_transaction(qx, remote_queue(b, "orders"), b"impostor")
        wait_until(
            lambda: any(
                "speaks for" in str(e.get("reason")) for e in log_events(b, "peer_session_closed")
            ),
            timeout=20,
        )
        assert qb.receive("orders", timeout=0) is None
        assert qx.outgoing()[0].waiting == 1


def test_a_client_certificate_cannot_speak_for_a_queue_manager(
    tls_peer: Callable[..., DaemonProcess],
    unchecked_factory: Callable[..., DaemonProcess],
    pki: Pki,
) -> None:
    open_to_peers = settings("auth.required=true", 'auth.default_acl={"peer:*"=["send"]}')
    b = tls_peer("qm-b", *open_to_peers)
    a = tls_peer("qm-a")
    # alice, a user, runs a queue manager with her client certificate (its clients use plain TCP).
    as_alice = pki.serve_args("", "--set", "tls.clients=false", cert=pki.client("alice"))
    rogue = unchecked_factory(name="qm-alice", extra_args=[*as_alice, *PEER_FAST])
    bob_cert, bob_key = pki.client("bob")
    with (
        connect(b.address, tls=tls_context(pki.ca, certificate=bob_cert, key=bob_key)) as qb,
        connect(a.address, tls=tls_context(pki.ca)) as qa,
        connect(rogue.address) as qx,
    ):
        qb.create_queue("orders", transactional=True)
        assert qb.permissions("orders")["peer:*"] == ["send"]
        send_in_transaction(qx, remote_queue(b, "orders"), b"from alice")
        wait_until(lambda: len(refusals(b, "(CN alice) is not a queue manager's")) >= 2, timeout=20)
        wait_until(lambda: qx.outgoing()[0].last_error != "", timeout=20)
        assert qx.outgoing()[0].waiting == 1
        # A queue manager's certificate is still let in, and its message is the only one.
        send_in_transaction(qa, remote_queue(b, "orders"), b"from qm-a")
        message = qb.receive("orders", timeout=20)
        assert message is not None
        assert message.body == b"from qm-a"
        assert qb.receive("orders", timeout=0) is None
    reason = refusals(b, "(CN alice)")[0]
    assert "extended key usage is clientAuth only" in reason
    assert "qmgr certs issue NAME --host" in reason
    opened = {event.get("identity") for event in log_events(b, "peer_session_opened")}
    assert "qm-a" in opened
    assert "alice" not in opened
    assert [e["identity"] for e in log_events(b, "peer_identity_registered")] == ["qm-a"]


def test_a_queue_manager_refuses_to_deliver_to_a_server_only_certificate(
    tls_peer: Callable[..., DaemonProcess],
    unchecked_factory: Callable[..., DaemonProcess],
    pki: Pki,
) -> None:
    # A server's certificate (serverAuth only) cannot connect as a peer (ssl refuses it
    # as a client) but could accept: the connecting queue manager refuses it.
    server_only = pki.leaf("web", usages=SERVER_USAGES)
    web = unchecked_factory(name="qm-web", extra_args=[*pki.serve_args("", cert=server_only)])
    a = tls_peer("qm-a")
    with connect(a.address, tls=tls_context(pki.ca)) as qa:
        send_in_transaction(qa, remote_queue(web, "orders"), b"to a web server")
        wait_until(lambda: "(CN web) is not a queue manager's" in qa.outgoing()[0].last_error, 20)
        assert qa.outgoing()[0].waiting == 1
        assert "serverAuth only" in qa.outgoing()[0].last_error
    failed = [str(e.get("reason")) for e in log_events(a, "peer_connect_failed")]
    assert any("(CN web) is not a queue manager's" in reason for reason in failed)
    assert not log_events(web, "peer_session_opened")


# --------------------------------------------------------------------------- start-up


def serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``qmgr serve`` run to its end (these configurations stop its start-up)."""
    return run_qmgr(
        "serve",
        "--data-dir",
        str(tmp_path / "exposed"),
        "--client-listen",
        f"127.0.0.1:{free_port()}",
        "--http-listen",
        "",
        "--log-format",
        "json",
        *args,
    )


def test_a_listener_other_hosts_reach_needs_tls_or_insecure(tmp_path: Path, pki: Pki) -> None:
    exposed = serve(tmp_path, "--listen", f"0.0.0.0:{free_port()}")
    assert exposed.returncode != 0
    assert "needs mutual TLS" in exposed.stderr
    assert "server.insecure" in exposed.stderr
    clients = serve(
        tmp_path,
        "--listen",
        f"127.0.0.1:{free_port()}",
        "--client-listen",
        f"0.0.0.0:{free_port()}",
        *pki.serve_args("qm-a"),
    )
    assert clients.returncode != 0
    assert "auth] required" in clients.stderr


#: What ``qmgr serve`` says of each certificate it refuses to start with.
START_UP_REFUSALS = {
    "expired": r"tls\.certificate .*/old\.crt expired on \d{4}-\d\d-\d\d \d\d:\d\d UTC",
    "future": r"tls\.certificate .*/future\.crt is not valid before .* UTC",
    "client": r"tls\.certificate .*/alice\.crt is a client certificate \(extended key usage "
    r"clientAuth only\): the queue manager needs one issued with `qmgr certs issue NAME --host",
    "server": r"tls\.certificate .*/web\.crt cannot be used between queue managers "
    r"\(extended key usage serverAuth only\): tls\.peers needs serverAuth and clientAuth",
}


@pytest.mark.parametrize("certificate", sorted(START_UP_REFUSALS))
def test_a_certificate_that_cannot_serve_stops_the_start_up(
    tmp_path: Path, pki: Pki, certificate: str
) -> None:
    now = dt.datetime.now(dt.UTC)
    made = {
        "expired": lambda: pki.expired_qm("old"),
        "future": lambda: pki.leaf("future", not_before=now + DAY, not_after=now + DAY * 30),
        "client": lambda: pki.client("alice"),
        "server": lambda: pki.leaf("web", usages=SERVER_USAGES),
    }
    refused = serve(
        tmp_path,
        "--listen",
        f"127.0.0.1:{free_port()}",
        *pki.serve_args("", cert=made[certificate]()),
    )
    assert refused.returncode == 2, refused.stderr  # a configuration that cannot be served
    assert re.search(START_UP_REFUSALS[certificate], refused.stderr), refused.stderr
    assert "Traceback" not in refused.stderr


def test_the_trio_client_and_the_cli_speak_tls(
    daemon_factory: Callable[..., DaemonProcess], pki: Pki
) -> None:
    cert, key = pki.client("alice")
    daemon = daemon_factory(extra_args=pki.serve_args("qm-a", "--set", "auth.required=true"))
    context = tls_context(pki.ca, certificate=cert, key=key)

    async def use() -> list[str]:
        async with open_client(daemon.address, tls=context) as qm:
            await qm.create_queue("trio-queue")
            return [info.name for info in await qm.list_queues()]

    assert "trio-queue" in trio.run(use)
    runner = CliRunner()
    tls = ["--tls-ca", str(pki.ca), "--tls-cert", str(cert), "--tls-key", str(key)]
    listed = runner.invoke(cli, ["--server", daemon.address, *tls, "queue", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert "trio-queue" in [q["name"] for q in json.loads(listed.output)]
    refused = runner.invoke(cli, ["--server", daemon.address, "--tls-ca", str(pki.ca), "status"])
    assert refused.exit_code == 1
    assert "error:" in refused.output


def test_a_router_relays_for_others_only_where_it_is_listed_as_one(
    tls_peer: Callable[..., DaemonProcess],
    pki: Pki,
) -> None:
    relays = settings('tls.relays=["qm-r"]')
    c = tls_peer("qm-c", *relays)
    d = tls_peer("qm-d")
    r = tls_peer("qm-r", *ROUTER)
    routes = [arg for hop in (c, d) for arg in route_args(hop.peer_port, r.peer_port)]
    a = tls_peer("qm-a", *relays, *routes)
    with clients_of(pki, a, c, d) as (qa, qc, qd):
        qc.create_queue("orders", transactional=True)
        qd.create_queue("orders", transactional=True)
        with qa.begin() as tx:
            tx.send(remote_queue(c, "orders"), b"through the router")
            tx.send(remote_queue(d, "orders"), b"refused by d")
            tx.commit()
        message = qc.receive("orders", timeout=20)
        assert message is not None
        assert message.body == b"through the router"
        # The OrderAck came back through R to A, which lists R as a router too.
        wait_until(
            lambda: any(
                o.destination == remote_queue(c, "orders") and o.unacknowledged + o.waiting == 0
                for o in qa.outgoing()
            ),
            timeout=20,
        )
        wait_until(
            lambda: any(
                "not a router" in str(e.get("reason")) for e in log_events(d, "peer_session_closed")
            ),
            timeout=20,
        )
        [refused, *_] = log_events(d, "peer_relay_refused")
        assert refused["level"] == "warning"
        assert "is not a router (tls.relays)" in str(refused["reason"])
        assert qd.receive("orders", timeout=0) is None


def test_the_peer_port_refuses_plain_text_and_expired_certificates(
    tls_peer: Callable[..., DaemonProcess],
    unchecked_factory: Callable[..., DaemonProcess],
    pki: Pki,
) -> None:
    b = tls_peer("qm-b")
    # A peer that speaks MSMQ's packets in plain text (as Windows MSMQ would).
    with socket.create_connection(("127.0.0.1", b.peer_port), timeout=10) as raw:
        raw.sendall(b"\x10\xc0\x0b\x00LIOR" + bytes(64))
        raw.settimeout(10)
        assert raw.recv(4096) == b""  # closed without a word of the protocol
    wait_until(lambda: len(log_events(b, "peer_refused")) >= 1, timeout=10)
    # A queue manager whose certificate expired (its own clients use plain TCP here).
    expired = pki.serve_args("", "--set", "tls.clients=false", cert=pki.expired_qm("qm-old"))
    old = unchecked_factory(name="qm-old", extra_args=[*expired, *PEER_FAST])
    with connect(b.address, tls=tls_context(pki.ca)) as qb, connect(old.address) as qo:
        qb.create_queue("orders", transactional=True)
        send_in_transaction(qo, remote_queue(b, "orders"), b"from an expired certificate")
        # TLS 1.3 finishes the client's side first: the refusal reaches the sender as an
        # alert or as a reset, whichever comes first; the receiver's log says why.
        wait_until(lambda: qo.outgoing()[0].last_error != "", timeout=20)
        assert qo.outgoing()[0].waiting == 1
        assert qb.receive("orders", timeout=0) is None
    wait_until(
        lambda: any("expired" in str(e.get("reason")) for e in log_events(b, "peer_refused")),
        timeout=10,
    )
