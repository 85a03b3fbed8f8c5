"""Queue permissions with real daemons: every right against every operation (a table),
administrators, the creator's full control, the raw-frame purge and delete that an
unprivileged client could make before, and messages from peers that a queue's list
refuses (NACK_ACCESS_DENIED, never a silent drop)."""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Callable

import pytest
from click.testing import CliRunner
from helpers import (
    PEER_FAST,
    RIGHTS,
    DaemonProcess,
    auth_required,
    log_events,
    remote_queue,
    send_in_transaction,
    wait_until,
)
from pki import Pki

from qmgr.cli import cli
from qmgr.client import (
    AccessDenied,
    Acknowledge,
    Journal,
    MessageClass,
    QueueManager,
    connect,
    tls_context,
)
from wire import client as cf

#: What each operation needs: the rights any one of which allows it (receive includes peek).
NEEDS: dict[str, set[str]] = {
    "send": {"send"},
    "receive": {"receive"},
    "peek": {"peek", "receive"},
    "peek_range": {"peek", "receive"},
    "set_properties": {"set-properties"},
    "set_quota": {"set-properties"},
    "read_permissions": {"get-properties"},
    "change_permissions": {"change-permissions"},
    "purge": {"purge"},
    "delete": {"delete"},  # last: it ends the queue
}
OPERATIONS: dict[str, Callable[[QueueManager, str], object]] = {
    "send": lambda qm, q: qm.send(q, b"x", transactional=True),
    "receive": lambda qm, q: qm.receive(q, timeout=0),
    "peek": lambda qm, q: qm.peek(q),
    "peek_range": lambda qm, q: qm.peek_range(q),
    "set_properties": lambda qm, q: qm.set_queue_properties(q, retry_count=1),
    "set_quota": lambda qm, q: qm.set_queue_properties(q, quota=1 << 20),
    "read_permissions": lambda qm, q: qm.permissions(q),
    "change_permissions": lambda qm, q: qm.grant(q, "carol", "send"),
    "purge": lambda qm, q: qm.purge_queue(q),
    "delete": lambda qm, q: qm.delete_queue(q),
}


def secured(pki: Pki, name: str, *more: str) -> list[str]:
    """Arguments for a queue manager with TLS, authentication, ``root`` as its
    administrator and no rights for anyone by default."""
    return pki.serve_args(name, *auth_required(admins=["root"]), *more)


def as_user(pki: Pki, daemon: DaemonProcess, name: str) -> QueueManager:
    cert, key = pki.client(name)
    return connect(daemon.address, tls=tls_context(pki.ca, certificate=cert, key=key))


def test_every_right_against_every_operation(
    daemon_factory: Callable[..., DaemonProcess], pki: Pki
) -> None:
    daemon = daemon_factory(extra_args=secured(pki, "qm-a"))
    with as_user(pki, daemon, "root") as root, as_user(pki, daemon, "bob") as bob:
        outcomes: dict[tuple[str, str], bool] = {}
        for right in RIGHTS:
            queue = f"q-{right}"
            root.create_queue(queue, transactional=True)
            root.send(queue, b"one", transactional=True)
            root.send(queue, b"two", transactional=True)
            assert root.grant(queue, "bob", right) == {"root": ["full"], "bob": [right]}
            for operation, run in OPERATIONS.items():
                try:
                    run(bob, queue)
                    outcomes[(right, operation)] = True
                except AccessDenied as exc:
                    denial = exc.message
                    outcomes[(right, operation)] = False
                    assert f"'bob' may not {denial.split(' may not ')[1]}" == denial
                    assert queue in denial
        expected = {
            (right, operation): right in NEEDS[operation]
            for right in RIGHTS
            for operation in OPERATIONS
        }
        assert outcomes == expected
    denials = log_events(daemon, "access_denied")
    assert len(denials) == sum(not allowed for allowed in expected.values())
    assert all(event.get("principal") == "bob" for event in denials)


def test_creators_administrators_and_queue_manager_wide_requests(
    daemon_factory: Callable[..., DaemonProcess], pki: Pki
) -> None:
    daemon = daemon_factory(extra_args=secured(pki, "qm-a"))
    with as_user(pki, daemon, "alice") as alice, as_user(pki, daemon, "bob") as bob:
        alice.create_queue("alices", transactional=True)
        assert alice.permissions("alices") == {"alice": ["full"]}
        alice.send("alices", b"mine", transactional=True)
        with pytest.raises(AccessDenied):
            bob.receive("alices", timeout=0)
        alice.grant("alices", "everyone", "peek")
        assert bob.peek("alices") is not None
        with pytest.raises(AccessDenied, match="not an administrator"):
            bob.create_list("fanout", ["alices"])
        alice.revoke("alices", "everyone")
        with pytest.raises(AccessDenied):
            bob.peek("alices")
        with as_user(pki, daemon, "root") as root:
            message = root.receive("alices", timeout=0)  # an administrator may do anything
            assert message is not None
            root.create_list("fanout", ["alices"])
        assert any(e.get("principal") == "alice" for e in log_events(daemon, "permissions_changed"))


def test_the_raw_frame_purge_and_delete_are_refused(
    daemon_factory: Callable[..., DaemonProcess], pki: Pki
) -> None:
    daemon = daemon_factory(extra_args=secured(pki, "qm-a"))
    with as_user(pki, daemon, "root") as root:
        root.create_queue("precious", transactional=True)
        root.send("precious", b"keep me", transactional=True)
    cert, key = pki.client("mallory")
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.load_cert_chain(cert, key)
    host, port = daemon.address.split(":")
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as sock,
    ):
        decoder = cf.ClientFrameDecoder()

        def call(request_id: int, value: object) -> object:
            sock.sendall(cf.encode_frame(request_id, value))  # type: ignore[arg-type]
            while (frame := decoder.next_frame()) is None:
                decoder.receive_data(sock.recv(65536))
            assert frame.request_id == request_id
            return frame.value

        assert isinstance(call(1, cf.Hello(client_name="raw")), cf.HelloOk)
        for request_id, request in (
            (2, cf.PurgeQueue(name="precious")),
            (3, cf.DeleteQueue(name="precious")),
        ):
            reply = call(request_id, request)
            assert isinstance(reply, cf.ErrorReply)
            assert reply.code == cf.ErrorCode.ACCESS_DENIED
            assert "'mallory' may not" in reply.message
    with as_user(pki, daemon, "root") as root:
        [kept] = root.peek_range("precious")
        assert kept.body == b"keep me"


def test_a_peer_the_list_refuses_gets_nack_access_denied(
    daemon_factory: Callable[..., DaemonProcess], pki: Pki
) -> None:
    b = daemon_factory(name="qm-b", extra_args=[*secured(pki, "qm-b"), *PEER_FAST])
    a = daemon_factory(name="qm-a", extra_args=[*secured(pki, "qm-a"), *PEER_FAST])
    with as_user(pki, a, "root") as qa, as_user(pki, b, "root") as qb:
        qa.create_queue("acks")
        qa.grant("acks", "peer:qm-b", "send")  # B's acknowledgments are let in
        qb.create_queue("orders", transactional=True)  # no right for peers yet
        with qa.begin() as tx:
            tx.send(
                remote_queue(b, "orders"),
                b"refused",
                acknowledge=Acknowledge.NACK_REACH_QUEUE,
                admin_queue="acks",
                journal=Journal.DEADLETTER,
            )
            tx.commit()
        wait_until(lambda: len(qa.peek_range("acks")) == 1, timeout=20)
        [nack] = qa.peek_range("acks")
        assert nack.message_class == MessageClass.NACK_ACCESS_DENIED
        # It asked for MQMSG_DEADLETTER: its source keeps the copy (the FinalAck's NACK).
        wait_until(lambda: len(qa.peek_range("system$;deadxact")) == 1, timeout=20)
        [kept] = qa.peek_range("system$;deadxact")
        assert (kept.body, kept.message_class) == (b"refused", MessageClass.NACK_ACCESS_DENIED)
        assert qb.peek_range("system$;deadxact") == []
        assert qb.peek_range("orders") == []
        # Granted to that peer, the next message is let in.
        qb.grant("orders", "peer:qm-a", "send")
        send_in_transaction(qa, remote_queue(b, "orders"), b"welcome")
        message = qb.receive("orders", timeout=20)
        assert message is not None
        assert message.body == b"welcome"
    rejected = log_events(b, "message_rejected")
    assert rejected
    assert json.dumps(rejected)  # logged with its reason


BOB_TOKEN = "bob-token-0123456789abcdefghijklmnopqrstuvwxyz"
ROOT_TOKEN = "root-token-0123456789abcdefghijklmnopqrstuvwxyz"


def with_tokens(*more: str) -> list[str]:
    """Arguments for a queue manager whose clients use tokens: ``root`` (an
    administrator) and ``bob``, no rights for anyone by default."""
    tokens = {"root": ROOT_TOKEN, "bob": BOB_TOKEN}
    return [*auth_required(tokens, admins=["root"]), *more]


@pytest.mark.parametrize("role", ["admin", "response"])
def test_naming_an_admin_or_response_queue_needs_send_on_it(
    daemon_factory: Callable[..., DaemonProcess], role: str
) -> None:
    daemon = daemon_factory(extra_args=with_tokens())
    with connect(daemon.address, token=ROOT_TOKEN) as root:
        root.create_queue("q1", transactional=True)
        root.create_queue("q3", transactional=True)
        root.create_queue("bobs-acks", transactional=True)
        root.grant("q1", "bob", "send")
        root.grant("bobs-acks", "bob", "send")
    options = {
        f"{role}_queue": "q3",
        **({"acknowledge": Acknowledge.NACK_RECEIVE} if role == "admin" else {}),
    }
    with connect(daemon.address, token=BOB_TOKEN) as bob:
        with pytest.raises(AccessDenied, match=rf"'bob' may not send on queue 'q3'.*{role} queue"):
            bob.send("q1", b"body-from-bob", transactional=True, time_to_be_received=0.3, **options)
        with pytest.raises(AccessDenied, match=f"{role} queue"):
            send_in_transaction(bob, "q1", b"in a transaction", **options)
        # A queue bob may send to may be named.
        allowed = {**options, f"{role}_queue": "bobs-acks"}
        bob.send("q1", b"allowed", transactional=True, **allowed)
    with connect(daemon.address, token=ROOT_TOKEN) as root:
        assert [m.body for m in root.peek_range("q1")] == [b"allowed"]
        assert root.peek_range("q3") == []


def test_a_peer_cannot_have_acknowledgments_written_into_a_queue_its_list_refuses(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    """A message from another queue manager that names a queue here as its admin
    queue: the acknowledgment is written there only if the queue's list lets
    that queue manager send (without mutual TLS, ``peer:anonymous``); otherwise
    it is kept in the dead-letter queue with NACK_ACCESS_DENIED."""
    b = daemon_factory(name="qm-b", extra_args=[*with_tokens(), *PEER_FAST])
    a = daemon_factory(name="qm-a", extra_args=[*with_tokens(), *PEER_FAST])
    with connect(b.address, token=ROOT_TOKEN) as qb, connect(a.address, token=ROOT_TOKEN) as qa:
        qb.create_queue("q1")
        qb.create_queue("q3")
        qb.create_queue("open-acks")
        qb.grant("q1", "peer:*", "send")
        qb.grant("open-acks", "peer:anonymous", "send")
        for admin_queue, body in (("q3", b"to-q3"), ("open-acks", b"to-open-acks")):
            qa.send(
                remote_queue(b, "q1"),
                body,
                acknowledge=Acknowledge.FULL_REACH_QUEUE,
                admin_queue=remote_queue(b, admin_queue),
            )
        wait_until(lambda: len(qb.peek_range("q1")) == 2, timeout=20)
        wait_until(lambda: len(qb.peek_range("open-acks")) == 1, timeout=20)
        assert qb.peek_range("q3") == []
        [refused] = [m for m in qb.peek_range("system$;deadletter") if m.label == ""]
        assert refused.message_class == MessageClass.NACK_ACCESS_DENIED
        [ack] = qb.peek_range("open-acks")
        assert ack.message_class == MessageClass.ACK_REACH_QUEUE


def _cli(daemon: DaemonProcess, token: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--server", daemon.address, "--token", token, *args])
    return result.exit_code, result.output


def test_prepared_transactions_are_their_owners_and_administrators(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(extra_args=with_tokens())
    with connect(daemon.address, token=ROOT_TOKEN) as root:
        root.create_queue("q1", transactional=True, journal=True)
        root.grant("q1", "bob", "send")
        root.send("q1", b"precious", transactional=True)
        first = root.begin(xid="admin-job-1")
        first.send("q1", b"from job 1")
        first.prepare()
        second = root.begin(xid="admin-job-2")
        assert second.receive("q1", timeout=1) is not None
        second.prepare()
    with connect(daemon.address, token=BOB_TOKEN) as bob:
        mine = bob.begin(xid="bob-job")
        mine.send("q1", b"from bob")
        mine.prepare()
    # bob sees his own, and may resolve nothing else.
    code, listed = _cli(daemon, BOB_TOKEN, "tx", "list", "--json")
    assert code == 0, listed
    assert [row["xid"] for row in json.loads(listed)] == ["bob-job"]
    for verb, xid in (("abort", "admin-job-1"), ("commit", "admin-job-2")):
        code, output = _cli(daemon, BOB_TOKEN, "tx", verb, xid)
        assert code == 1
        assert f"'bob' may not resolve transaction '{xid}'" in output
    with connect(daemon.address, token=BOB_TOKEN) as bob:
        with pytest.raises(AccessDenied):
            bob.commit_prepared_all(["bob-job", "admin-job-2"])
        assert bob.commit_prepared("bob-job").name.lower() == "committed"
        assert [t.xid for t in bob.transactions(resolved=True)] == ["bob-job"]
    # Nothing of the administrator's moved; the administrator sees and resolves all.
    with connect(daemon.address, token=ROOT_TOKEN) as root:
        assert [t.xid for t in root.transactions()] == ["admin-job-1", "admin-job-2"]
        assert root.peek_range("q1;journal") == []
        root.commit_prepared("admin-job-2")
        root.abort_prepared("admin-job-1")
        assert [m.body for m in root.peek_range("q1")] == [b"from bob"]
        assert [m.body for m in root.peek_range("q1;journal")] == [b"precious"]
    denials = log_events(daemon, "access_denied")
    assert {event.get("principal") for event in denials} == {"bob"}
