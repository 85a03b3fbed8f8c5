"""Dead letters moved out of ``system$;deadletter`` and ``system$;deadxact`` on a real
daemon, keeping their ids: back to the queue they were sent to (one, or all of them),
into a queue named, with the command line, and only where their mover may send."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers import DaemonProcess, auth_required, free_port, qmgr, wait_until

from qmgr.client import (
    AccessDenied,
    Journal,
    Message,
    MessageClass,
    QueueManager,
    connect,
)

DEADLETTER = "system$;deadletter"
DEADXACT = "system$;deadxact"


def dead_copy(qm: QueueManager, queue: str, message_id: str) -> Message:
    """The copy of message ``message_id`` in the dead-letter queue ``queue``, once it is
    there (the shared daemon's dead-letter queues hold other tests' messages too)."""
    found: list[Message] = []

    def kept() -> bool:
        found[:] = [m for m in qm.peek_range(queue, max=10_000) if m.id == message_id]
        return bool(found)

    wait_until(kept, timeout=30)
    [copy] = found
    return copy


def test_an_expired_message_moves_back_to_its_queue_with_its_id(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    q, other = queue_name, f"{queue_name}-other"
    with connect(shared_daemon.address) as qm:
        qm.create_queue(q, transactional=True)
        qm.create_queue(other, transactional=True)
        ids = [
            qm.send(
                q,
                body,
                label=f"late {body.decode()}",
                correlation_id=b"c" * 20,
                app_specific=7,
                time_to_be_received=1,
                journal=Journal.DEADLETTER,
            )
            for body in (b"one", b"two")
        ]
        first, second = (dead_copy(qm, DEADXACT, message_id) for message_id in ids)
        assert first.message_class == MessageClass.NACK_RECEIVE_TIMEOUT
        moved = qm.move(DEADXACT, "", first.lookup_id)
        assert moved.count == 1
        assert moved.lookup_id is not None
        back = qm.receive(q, timeout=5)
        assert back is not None
        assert (back.id, back.lookup_id, back.body, back.label) == (
            ids[0],
            moved.lookup_id,
            b"one",
            "late one",
        )
        assert (back.message_class, back.correlation_id, back.app_specific) == (
            MessageClass.NORMAL,
            b"c" * 20,
            7,
        )
        assert (back.abort_count, back.move_count) == (0, 1)
        assert back.last_move_time is not None
        assert all(m.id != ids[0] for m in qm.peek_range(DEADXACT, max=10_000))
    # The command line, into another queue of its kind, by lookup id.
    cli = qmgr(shared_daemon, "move", DEADXACT, other, "--lookup-id", str(second.lookup_id))
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.startswith(f"moved 1 message from {DEADXACT} to {other} (lookup id ")
    with connect(shared_daemon.address) as qm:
        there = qm.receive(other, timeout=5)
        assert there is not None
        assert (there.id, there.body, there.message_class) == (ids[1], b"two", MessageClass.NORMAL)
    refused = qmgr(shared_daemon, "move", DEADLETTER, q, "--all")
    assert refused.returncode == 1
    assert "holds non-transactional messages, which go only to non-transactional" in (
        refused.stderr
    )


def test_back_moves_every_dead_letter_that_has_a_queue_here(daemon: DaemonProcess) -> None:
    nobody = f"DIRECT=TCP:127.0.0.1:{free_port()}\\private$\\far"  # nothing listens
    with connect(daemon.address) as qm:
        qm.create_queue("plain")
        far = qm.send(nobody, b"far", journal=Journal.DEADLETTER, time_to_reach_queue=1)
        local = qm.send("plain", b"local", journal=Journal.DEADLETTER, time_to_be_received=1)
        remote_copy = dead_copy(qm, DEADLETTER, far)
        dead_copy(qm, DEADLETTER, local)
    one = qmgr(daemon, "move", DEADLETTER, "--back", "--lookup-id", str(remote_copy.lookup_id))
    assert one.returncode == 1
    assert one.stderr == (
        f"error: message {remote_copy.lookup_id} of '{DEADLETTER}' cannot go back: its "
        f"destination '{nobody}' is a queue on another queue manager\n"  # as typed
    )
    every = qmgr(daemon, "move", DEADLETTER, "--back", "--all")
    assert every.returncode == 0, every.stderr
    assert every.stdout.startswith(f"moved 1 message from {DEADLETTER} back to its queue")
    assert every.stderr.startswith(f"note: 1 message stays in {DEADLETTER} (")
    with connect(daemon.address) as qm:
        back = qm.receive("plain", timeout=5)
        assert back is not None
        assert (back.id, back.body, back.message_class) == (local, b"local", MessageClass.NORMAL)
        assert [m.id for m in qm.peek_range(DEADLETTER)] == [far]
    usage = qmgr(daemon, "move", DEADLETTER, "plain", "--back")
    assert usage.returncode == 2
    assert "give no DEST" in usage.stderr


TOKENS = {"root": "root-token-0123456789abcdef", "alice": "alice-token-0123456789abcdef"}


def test_a_dead_letter_goes_back_only_where_its_mover_may_send(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(extra_args=auth_required(TOKENS, admins=["root"]))
    with connect(daemon.address, token=TOKENS["root"]) as root:
        root.create_queue("orders")
        root.grant(DEADLETTER, "alice", "receive")  # alice tends the dead letters
        sent = root.send("orders", b"m", journal=Journal.DEADLETTER, time_to_be_received=1)
        copy = dead_copy(root, DEADLETTER, sent)
    with connect(daemon.address, token=TOKENS["alice"]) as alice:
        with pytest.raises(AccessDenied, match="'alice' may not send on queue 'orders'"):
            alice.move(DEADLETTER, "", copy.lookup_id)
        with pytest.raises(AccessDenied, match="'alice' may not send on queue 'orders'"):
            alice.move(DEADLETTER, "orders", copy.lookup_id)
        assert alice.move(DEADLETTER, "", all=True).count == 0
        assert [m.id for m in alice.peek_range(DEADLETTER)] == [sent]  # it stayed
    with connect(daemon.address, token=TOKENS["root"]) as root:
        root.grant("orders", "alice", "send")
    with connect(daemon.address, token=TOKENS["alice"]) as alice:
        assert alice.move(DEADLETTER, "", all=True).count == 1
        assert alice.peek_range(DEADLETTER) == []
    with connect(daemon.address, token=TOKENS["root"]) as root:
        back = root.receive("orders", timeout=5)
        assert back is not None
        assert (back.id, back.message_class) == (sent, MessageClass.NORMAL)
