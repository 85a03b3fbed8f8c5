"""The ``qmgr`` group (``qmgr/cli/__init__.py``): every command on it, and how it starts."""

from __future__ import annotations

import subprocess
import sys

from qmgr import __version__
from qmgr.cli import cli, queues

from .kit import ok, run

COMMANDS = {
    "auth", "certs", "dl", "move", "outgoing", "peek", "queue", "receive", "send", "serve",
    "route", "status", "trace", "tx",
}  # fmt: skip
QUEUE_COMMANDS = {"acl", "create", "delete", "grant", "list", "purge", "revoke", "set", "show"}


def test_every_command_is_on_the_group() -> None:
    assert set(cli.commands) == COMMANDS
    assert set(queues.queue.commands) == QUEUE_COMMANDS
    text = ok(run(None, "-h")).stdout
    assert "[OPTIONS] COMMAND [ARGS]..." in text.splitlines()[0]
    for option in ("--server", "--tls-ca", "--tls-cert", "--tls-key", "--token", "--version"):
        assert option in text
    queue_help = ok(run(None, "queue", "--help")).stdout
    assert all(f"  {name} " in queue_help for name in QUEUE_COMMANDS)


def test_version_and_python_m() -> None:
    assert ok(run(None, "--version")).stdout == f"qmgr, version {__version__}\n"
    for module in ("qmgr", "qmgr.cli"):
        started = subprocess.run(
            [sys.executable, "-m", module, "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (started.returncode, started.stdout) == (0, f"qmgr, version {__version__}\n")


def test_a_missing_or_unknown_command_is_a_usage_error() -> None:
    assert run(None, "nosuch").exit_code == 2
    assert run(None, "queue", "nosuch").exit_code == 2
