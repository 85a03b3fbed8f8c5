"""Test helpers shared by the integration and crash tests.

:class:`DaemonProcess` runs the real queue manager (``python -m qmgr serve``)
as a subprocess on free loopback ports, with its JSON log in a file next to
the data directory, and stops, kills or restarts it on request.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from qmgr.client import QueueManager

#: How long a daemon may take to start accepting connections.
START_TIMEOUT = 20.0
#: How long a daemon may take to exit after SIGTERM.
STOP_TIMEOUT = 20.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class DaemonProcess:
    """A queue-manager daemon in a subprocess.

    Attributes:
        data_dir: the store's directory (kept across restarts).
        address: ``127.0.0.1:PORT`` of the client listener (kept across restarts).
        log_path: the daemon's stderr (JSON log lines), appended to on restart.
        process: the running ``subprocess.Popen``, or None before start.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        extra_args: Sequence[str] = (),
        name: str = "qmgr-test",
        preexec: Callable[[], None] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.client_port = free_port()
        self.peer_port = free_port()
        self.address = f"127.0.0.1:{self.client_port}"
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        self.extra_args = list(extra_args)
        self.name = name
        #: Run in the child before the daemon starts (to set resource limits).
        self.preexec = preexec
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        """The command line that starts the daemon."""
        return [
            sys.executable,
            "-m",
            "qmgr",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--client-listen",
            self.address,
            "--listen",
            f"127.0.0.1:{self.peer_port}",
            "--name",
            self.name,
            "--log-format",
            "json",
            *self.extra_args,
        ]

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start the daemon and wait until it accepts a connection.

        Raises:
            AssertionError: it exited, or did not listen within ``timeout``
                (the message holds its log).
        """
        assert self.process is None or self.process.poll() is not None, "already running"
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                preexec_fn=self.preexec,
            )
        deadline = time.monotonic() + timeout
        while True:
            code = self.process.poll()
            if code is not None:
                raise AssertionError(f"the daemon exited with status {code}:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.client_port), timeout=1.0):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"the daemon did not listen within {timeout} s:\n{self.log()}")
            time.sleep(0.02)

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        """Send a signal to the daemon."""
        assert self.process is not None
        self.process.send_signal(signum)

    def wait(self, timeout: float = STOP_TIMEOUT) -> int:
        """Wait for the daemon to exit; return its status."""
        assert self.process is not None
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"the daemon did not exit within {timeout} s:\n{self.log()}"
            ) from None

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM, wait, and check that the daemon exited with status 0."""
        if not self.running:
            return
        self.signal(signal.SIGTERM)
        code = self.wait(timeout)
        assert code == 0, f"the daemon exited with status {code} after SIGTERM:\n{self.log()}"

    def kill(self) -> None:
        """SIGKILL (a crash: nothing is flushed or closed) and reap the process."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self) -> None:
        """Stop (cleanly, if still running) and start again on the same ports and data."""
        self.stop()
        self.start()

    def log(self) -> str:
        """Everything the daemon wrote to stderr so far."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def close(self) -> None:
        """Make sure no process is left behind (kill if a clean stop fails)."""
        try:
            self.stop()
        finally:
            self.kill()


def wait_until_erased(qm: QueueManager, timeout: float = 120.0) -> float:
    """Poll ``qmgr status`` until no deleted or purged queue is left to erase;
    return how long it took."""
    started = time.monotonic()
    while qm.status().erasing:
        assert time.monotonic() - started < timeout, "erasing did not finish"
        time.sleep(0.01)
    return time.monotonic() - started


def drain(address: str, queue: str) -> list[tuple[int, bytes]]:
    """Every visible message of ``queue`` as ``(lookup_id, body)``, in LookupId order
    (peeked page by page: nothing is removed)."""
    from qmgr.client import connect

    found: list[tuple[int, bytes]] = []
    with connect(address) as qm:
        after = 0
        while True:
            page = qm.peek_range(queue, after=after, max=1000)
            if not page:
                return found
            found.extend((m.lookup_id, m.body) for m in page)
            after = page[-1].lookup_id


def wait_until(predicate: Callable[[], bool], timeout: float) -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


#: ``qmgr serve`` arguments that make peering quick to reconnect and acknowledge.
PEER_FAST: Final = (
    "--set",
    "peers.retry_initial=0.05",
    "--set",
    "peers.retry_max=0.5",
    "--set",
    "peers.order_ack_delay=0.02",
    "--set",
    "peers.resend_intervals=[1.0]",
)


def remote_queue(daemon: DaemonProcess, queue: str) -> str:
    """The direct format name of ``queue`` on ``daemon``, as another queue manager sends to it."""
    return f"DIRECT=TCP:127.0.0.1:{daemon.peer_port}\\private$\\{queue}"
