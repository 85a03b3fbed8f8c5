"""The ``qmgr`` command: run a queue manager, and administer and use one.

``qmgr serve`` runs the daemon in the foreground, and ``qmgr restored``
prepares its stopped data directory after a restore from a backup. Every other
command is a client of a running daemon (``--server HOST:PORT``, default
``127.0.0.1:1802``, or ``QMGR_SERVER``). Machine-readable output is available
with ``--json``; tables and progress bars are for people and appear only
where they belong (progress on a terminal, on stderr).

Exit status: 0 on success, 1 on an error (printed as ``error: <message>`` on
stderr), 2 for a usage or configuration error.

The modules, by concern:

* :mod:`.common`: the connection options and the connection, error
  reporting, and the output helpers every command shares
* :mod:`.serve`: ``serve``; :mod:`.restored`: ``restored``
* :mod:`.messages`: ``send``, ``receive``, ``peek``, ``move``, and how a
  message is printed; :mod:`.receiving`: a message received only once its
  output took it (a pipe: read); :mod:`.reports`: the options of ``send``
  that ask for acknowledgments and journal copies
* :mod:`.status`: ``status``
* :mod:`.queues`: ``queue create|list|show|delete|purge`` and how a queue is
  shown; :mod:`.poison`: ``queue set`` and ``move`` between a queue and its
  subqueues; :mod:`.permissions`: ``queue grant|revoke|acl``
* :mod:`.outgoing`: ``outgoing ...``; :mod:`.routes`: ``route``;
  :mod:`.lists`: ``dl ...`` (distribution lists); :mod:`.transactions`:
  ``tx ...``; :mod:`.trace`: ``trace``
* :mod:`.auth`: ``auth token``; :mod:`.certs`: ``certs ...``

Every command module makes its commands (or its group) and nothing more;
they are put on the ``qmgr`` group here, in one place, so no command module
imports this package back. The group imports a command's module only when
that command runs (or help lists it): ``qmgr serve`` loads neither the SDK
nor rich, and a client command loads neither trio nor the daemon.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
from typing import Final

import click

from qmgr import __version__

from .common import connection_options, fail

__all__ = ["cli", "main"]

#: Each command of the ``qmgr`` group: its name -> (its module, the command's name there).
#: Commands are reached through their modules, so that the package's attributes stay its
#: modules (``qmgr.cli.trace`` is the module, ``trace.trace`` the command).
COMMANDS: Final = {
    "serve": ("serve", "serve"),
    "restored": ("restored", "restored"),
    "send": ("messages", "send"),
    "receive": ("messages", "receive"),
    "peek": ("messages", "peek"),
    "move": ("messages", "move"),
    "status": ("status", "status"),
    "queue": ("queues", "queue"),
    "outgoing": ("outgoing", "outgoing"),
    "route": ("routes", "route"),
    "tx": ("transactions", "tx"),
    "trace": ("trace", "trace"),
    "dl": ("lists", "dl"),
    "auth": ("auth", "auth"),
    "certs": ("certs", "certs"),
}
#: Commands other modules put on the ``queue`` group, as (module, command).
QUEUE_COMMANDS: Final = (
    ("poison", "queue_set"),
    ("permissions", "queue_grant"),
    ("permissions", "queue_revoke"),
    ("permissions", "queue_acl"),
)


def _attribute(module: str, name: str) -> click.Command:
    command = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    assert isinstance(command, click.Command)
    return command


def _load(name: str) -> click.Command:
    """The command ``name`` of :data:`COMMANDS`, its module imported now."""
    command = _attribute(*COMMANDS[name])
    if name == "queue":
        assert isinstance(command, click.Group)
        for module, attribute in QUEUE_COMMANDS:
            command.add_command(_attribute(module, attribute))
    return command


class _Commands(click.Group):
    """The ``qmgr`` group: each command is loaded from its module when first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in COMMANDS:
            command = _load(cmd_name)
            self.add_command(command, cmd_name)
        return command


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@connection_options
@click.version_option(__version__, prog_name="qmgr")
def cli() -> None:
    """qmgr: a transactional queue manager (MSMQ semantics) for Linux.

    Exit status: 0 on success; 1 on an error, said on stderr as "error: ..."
    (the queue manager unreachable, a queue that does not exist, a refusal);
    2 for a usage or configuration error.
    """


def main() -> None:
    """Entry point of the ``qmgr`` console script.

    A write to standard output that fails for want of room or with an I/O
    error ends the command with ``error: cannot write the output: ...`` and
    status 1, not a traceback (click ends a closed pipe quietly with status
    1). The commands that write files say so themselves.
    """
    try:
        cli(prog_name="qmgr")
    except OSError as exc:
        if exc.errno not in _WRITE_FAILURES:
            raise
        _quiet_output()
        fail(f"cannot write the output: {exc.strerror or exc}")


#: The errors of a write that failed for want of room or of a device.
_WRITE_FAILURES: Final = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO})


def _quiet_output() -> None:
    """Point standard output at the null device, so that what is still buffered
    for it does not fail again at exit."""
    if sys.stdout is not None:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
