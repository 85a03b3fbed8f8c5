"""A queue manager put back from a backup (``qmgr restored``), with real daemons: its
transactional messages to a peer that took the original's since the backup arrive
instead of being taken for those, and the peer's go on arriving at it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from helpers import (
    PEER_FAST,
    DaemonProcess,
    bodies,
    depth,
    log_events,
    outgoing_settled,
    remote_queue,
    send_in_transaction,
    wait_until,
)

from qmgr.client import connect


def restored(data_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qmgr", "restored", "--data-dir", str(data_dir), *extra],
        capture_output=True,
        text=True,
        check=False,
    )


def put_back(daemon: DaemonProcess, backup: Path) -> None:
    """Stop ``daemon`` and put ``backup`` in place of its data directory."""
    daemon.stop()
    shutil.rmtree(daemon.data_dir)
    shutil.copytree(backup, daemon.data_dir)


def one_delivered(
    daemon_factory: Callable[..., DaemonProcess],
) -> tuple[DaemonProcess, DaemonProcess, str]:
    """A and B, and B's queue ``orders`` (its format name) holding A's "1" for good."""
    a = daemon_factory(name="qm-a", extra_args=PEER_FAST)
    b = daemon_factory(name="qm-b", extra_args=PEER_FAST)
    orders = remote_queue(b, "orders")
    with connect(b.address) as qb:
        qb.create_queue("orders", transactional=True)
    with connect(a.address) as qa:
        send_in_transaction(qa, orders, b"1")
        wait_until(lambda: outgoing_settled(qa), 10)
    return a, b, orders


def backed_up_then_sent(
    daemon: DaemonProcess, sender: DaemonProcess, orders: str, path: Path, *bodies: bytes
) -> Path:
    """Back ``daemon`` up (stopped), start it again, and have ``sender`` send
    ``bodies`` to ``orders`` until they are there for good; the backup's path."""
    daemon.stop()
    shutil.copytree(daemon.data_dir, path)
    daemon.start()
    with connect(sender.address) as qs:
        for body in bodies:
            send_in_transaction(qs, orders, body)
        wait_until(lambda: outgoing_settled(qs), 10)
    return path


def test_a_sender_put_back_from_a_backup_sends_new_streams(
    daemon_factory: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    a, b, orders = one_delivered(daemon_factory)
    backup = backed_up_then_sent(a, a, orders, tmp_path / "backup-a", b"2", b"3")
    # A's disk is lost: the backup takes its place. Started as it is, its next
    # message would carry numbers B took from the original since: dropped.
    put_back(a, backup)
    a.start()
    assert "is running" in restored(a.data_dir).stderr  # refused while it runs
    a.stop()
    done = restored(a.data_dir)
    assert done.returncode == 0, done.stderr
    assert "outgoing queues that go on as new streams: 1" in done.stdout
    again = restored(a.data_dir)  # by mistake: nothing moves before the start
    assert "prepared already, and not started since: nothing changed" in again.stdout
    a.start()
    assert len(log_events(a, "started_after_restore")) == 1
    with connect(a.address) as qa:
        send_in_transaction(qa, orders, b"4")
        send_in_transaction(qa, orders, b"5")
    with connect(b.address) as qb:
        wait_until(lambda: depth(qb, "orders") == 5, 10)
        assert bodies(qb, "orders") == [b"1", b"2", b"3", b"4", b"5"]


def test_a_receiver_put_back_from_a_backup_takes_its_peers_next_messages(
    daemon_factory: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    a, b, orders = one_delivered(daemon_factory)
    # A forgot "2" once B had it for good.
    backup = backed_up_then_sent(b, a, orders, tmp_path / "backup-b", b"2")
    put_back(b, backup)
    done = restored(b.data_dir, "--json")
    assert done.returncode == 0, done.stderr
    assert '"incoming_streams": 1' in done.stdout
    b.start()
    with connect(a.address) as qa:
        send_in_transaction(qa, orders, b"3")
    with connect(b.address) as qb:
        # "2" went with the original's disk; what A sends from now on arrives.
        wait_until(lambda: depth(qb, "orders") == 2, 10)
        assert bodies(qb, "orders") == [b"1", b"3"]
