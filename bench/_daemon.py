"""A qmgr daemon run as a subprocess for the benchmarks, its CPU time, and a fresh
work directory for a run's stores and logs.

The daemon is started exactly as an operator would start it
(``python -m qmgr serve``), at the ``info`` log level with JSON lines written
to a file, and stopped with SIGTERM; with TLS on both ports when ``_tls`` is
enabled.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

import _tls

#: Units of ``utime`` and ``stime`` in ``/proc/<pid>/stat``.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def remote(port: int, queue: str) -> str:
    """The format name another queue manager sends to for ``queue`` on the daemon
    whose peer port on loopback is ``port``."""
    return f"DIRECT=TCP:127.0.0.1:{port}\\private$\\{queue}"


def fresh_workdir(data_dir: Path) -> Path:
    """A new directory under ``data_dir`` (made if need be) for one run's stores and logs."""
    data_dir.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=data_dir))


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds used so far by every thread of process ``pid``."""
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    # Field 2, the command name, may hold spaces and parentheses; what follows
    # its closing parenthesis is plain. There, index 0 is field 3 (the state),
    # so utime (field 14) is index 11 and stime (field 15) is index 12.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class Daemon:
    """``qmgr serve`` with its store in ``data_dir``, serving clients on a free port."""

    def __init__(self, data_dir: Path, log_path: Path, extra_args: Sequence[str] = ()) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        #: The HTTP listener's port (/healthz, /metrics).
        self.http_port = free_port()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "qmgr",
                "serve",
                "--data-dir",
                str(data_dir),
                "--client-listen",
                self.address,
                "--listen",
                f"127.0.0.1:{free_port()}",
                "--http-listen",
                f"127.0.0.1:{self.http_port}",
                "--log-format",
                "json",
                "--log-level",
                "info",
                *extra_args,
                *_tls.daemon_args(),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        try:
            self._wait_until_listening(timeout=20.0)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu_seconds(self) -> float:
        """The daemon's user plus system CPU seconds so far."""
        return process_cpu_seconds(self.pid)

    def log_tail(self, lines: int = 20) -> str:
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _wait_until_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self.process.poll() is not None:
                    raise SystemExit(  # noqa: B904 - the daemon's own words say why
                        f"the daemon exited with status {self.process.returncode}:\n"
                        + self.log_tail()
                    )
                time.sleep(0.05)
        raise SystemExit(f"the daemon did not listen on {self.address} within {timeout:g} s")

    def stop(self) -> None:
        """Stop with SIGTERM (as systemd would); kill it if it has not exited in 30 s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
