"""The ``qmgr`` group (``qmgr/cli/__init__.py``): every command on it, and how it starts."""

from __future__ import annotations

import subprocess
import sys

import click
from helpers import run_python

from qmgr import __version__
from qmgr.cli import cli, queues

from .kit import ok, run

COMMANDS = {
    "auth", "certs", "dl", "move", "outgoing", "peek", "queue", "receive", "restored", "send",
    "serve", "route", "status", "trace", "tx",
}  # fmt: skip
QUEUE_COMMANDS = {"acl", "create", "delete", "grant", "list", "purge", "revoke", "set", "show"}


def test_every_command_is_on_the_group() -> None:
    context = click.Context(cli)
    assert set(cli.list_commands(context)) == COMMANDS
    assert all(cli.get_command(context, name) is not None for name in COMMANDS)
    assert set(queues.queue.commands) == QUEUE_COMMANDS
    text = ok(run(None, "-h")).stdout
    assert "[OPTIONS] COMMAND [ARGS]..." in text.splitlines()[0]
    for option in ("--server", "--tls-ca", "--tls-cert", "--tls-key", "--token", "--version"):
        assert option in text
    queue_help = ok(run(None, "queue", "--help")).stdout
    assert all(f"  {name} " in queue_help for name in QUEUE_COMMANDS)


def commands(group: click.Group, path: str = "qmgr") -> list[tuple[str, click.Command]]:
    """Every command under ``group``, with how it is typed."""
    context = click.Context(group)
    found: list[tuple[str, click.Command]] = []
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None
        if isinstance(command, click.Group):
            found += commands(command, f"{path} {name}")
        else:
            found.append((f"{path} {name}", command))
    return found


def test_every_option_says_what_it_is_for() -> None:
    undescribed = [
        f"{path} --{param.name}"
        for path, command in commands(cli)
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden and not param.help
    ]
    assert undescribed == []
    serve_help = ok(run(None, "serve", "--help")).stdout
    assert "(/healthz, /metrics, the JSON API, the console)" in " ".join(serve_help.split())


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


def test_serve_loads_neither_the_sdk_nor_rich_nor_cryptography() -> None:
    """What ``qmgr serve`` imports before it serves without TLS, in a fresh interpreter: the
    group, the command, and what it runs (the libraries lean, the configuration, the log
    set-up, the daemon). ``tests/integration/test_idle_footprint.py`` checks a real daemon."""
    code = (
        "import sys, click\n"
        "from qmgr.cli import cli\n"
        "cli.get_command(click.Context(cli), 'serve')\n"
        "from qmgr.deferred import lean_libraries\n"
        "lean_libraries()\n"
        "import qmgr.logs, qmgr.config, qmgr.server\n"
        "heavy = ('rich', 'cryptography', 'qmgr.client', 'qmgr.certs', 'pyspark', 'hypercorn',\n"
        "         'starlette', 'prometheus_client', 'asyncio', 'pdb')\n"
        "print(sorted(name for name in heavy if name in sys.modules))\n"
    )
    loaded = run_python(code)
    assert loaded.stdout == "[]\n", loaded.stderr
