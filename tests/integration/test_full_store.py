"""A full store says STORE_FULL, loses nothing, and can always be emptied.

Three ways of being full, each on a real daemon: the store reaches its
configured ``max_map_size``; the file system under it runs out of space (a
small tmpfs, where mounting one is allowed); the daemon reaches its file
size limit (``RLIMIT_FSIZE``, as ``LimitFSIZE=`` in a systemd unit sets it).
Every time: the send that did not fit gets ``StoreFull``, nothing of it is
stored, everything before it is, receives and purges still work, and after
freeing space sends work again.
"""

from __future__ import annotations

import contextlib
import resource
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import DaemonProcess, log_events, settings, wait_until_erased

from qmgr.client import QueueManager, StoreFull, connect

BODY = b"x" * (64 * 1024)


def fill(qm: QueueManager, queue: str, body: bytes = BODY, limit: int = 10_000) -> int:
    """Send until the store is full; returns how many were stored."""
    return fill_and_say_why(qm, queue, body, limit)[0]


def fill_and_say_why(
    qm: QueueManager, queue: str, body: bytes = BODY, limit: int = 10_000
) -> tuple[int, str]:
    """Send until the store is full; how many were stored, and the error's message."""
    stored = 0
    with pytest.raises(StoreFull) as refused:
        for _ in range(limit):
            qm.send(queue, body)
            stored += 1
    return stored, refused.value.message


def send_when_erased(qm: QueueManager, queue: str) -> None:
    """Send once the daemon has erased what a purge or a deletion left (it does so
    in the background, in bounded steps): the space is then free for it."""
    wait_until_erased(qm)
    qm.send(queue, BODY)


def test_a_store_at_its_size_limit_can_be_emptied_again_and_again(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(
        extra_args=settings("store.initial_map_size=1048576", "store.max_map_size=8388608")
    )
    with connect(daemon.address) as qm:
        qm.create_queue("full", transactional=True)
        for _ in range(3):
            stored = fill(qm, "full")
            assert stored > 10
            assert len(qm.peek_range("full", max=100_000)) == stored
            # Removing data works although nothing more fits.
            assert qm.receive("full") is not None
            assert qm.purge_queue("full") == stored - 1
            assert qm.peek_range("full") == []
            send_when_erased(qm, "full")
            qm.purge_queue("full")
            send_when_erased(qm, "full")
            qm.purge_queue("full")


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_real_full_disk_answers_store_full_and_the_store_can_be_emptied(
    tmp_path: Path, daemon_factory: Callable[..., DaemonProcess]
) -> None:
    with small_tmpfs(tmp_path / "disk", "24m") as disk:
        daemon = daemon_factory(
            data_dir=disk,
            extra_args=settings("store.initial_map_size=4194304", "store.reserve_size=2097152"),
        )
        with connect(daemon.address) as qm:
            qm.create_queue("full", transactional=True)
            stored = fill(qm, "full", b"y" * (256 * 1024))
            assert stored > 10
            # A full disk is a full store, not a failed write; the log says so once.
            assert log_events(daemon, "commit_batch_failed") == []
            [full] = log_events(daemon, "store_full")
            assert "free" in str(full["error"])
            messages = qm.peek_range("full", max=1000)
            assert len(messages) == stored
            for _ in range(3):
                assert qm.receive("full") is not None
            assert qm.purge_queue("full") == stored - 3
            send_when_erased(qm, "full")
        daemon.stop()
        daemon.start()
        with connect(daemon.address) as qm:
            assert len(qm.peek_range("full")) == 1


def _file_size_limit(limit: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_the_file_size_limit_answers_store_full(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(
        extra_args=["--set", "store.initial_map_size=33554432", "--set", "store.reserve_size=0"],
        preexec=_file_size_limit(6 << 20),
    )
    with connect(daemon.address) as qm:
        qm.create_queue("full", transactional=True)
        stored, why = fill_and_say_why(qm, "full")
        assert "file size limit" in why
        assert len(qm.peek_range("full", max=1000)) == stored
        assert qm.receive("full") is not None
        qm.send("full", b"small")
