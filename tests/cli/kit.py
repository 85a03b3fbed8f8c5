"""What the command-line tests share: ``qmgr`` run in-process or as a process of its
own, and a check that it succeeded."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Protocol

from click.testing import CliRunner, Result

from qmgr.cli import cli


class Daemon(Protocol):
    """A queue manager to talk to: the scripted one or a real one."""

    @property
    def address(self) -> str: ...


def run(daemon: Daemon | None, *args: str, input: str | bytes | None = None) -> Result:
    """``qmgr --server <daemon's address> ARGS`` in-process (no ``--server`` without a daemon)."""
    server = [] if daemon is None else ["--server", daemon.address]
    return CliRunner().invoke(cli, [*server, *args], input=input)


def ok(result: Result) -> Result:
    """``result``, once it is sure the command exited with status 0."""
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.output}\n{result.stderr}"
    return result


def sent_id(daemon: Daemon, queue: str, body: str, *options: str) -> str:
    """The id ``qmgr send QUEUE --body BODY OPTIONS`` printed, once it succeeded."""
    return ok(run(daemon, "send", queue, "--body", body, *options)).stdout.strip()


def qmgr_process(daemon: Daemon, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
    """``qmgr --server DAEMON ARGS`` as a process of its own (its standard output as given)."""
    command = [sys.executable, "-m", "qmgr", "--server", daemon.address, *args]
    return subprocess.run(command, stderr=subprocess.PIPE, text=True, timeout=60, **options)
