"""The ``qmgr`` command: run a queue manager, and administer and use one.

``qmgr serve`` runs the daemon in the foreground. Every other command is a
client of a running daemon (``--server HOST:PORT``, default
``127.0.0.1:1802``, or ``QMGR_SERVER``). Machine-readable output is available
with ``--json``; tables and progress bars are for people and appear only
where they belong (progress on a terminal, on stderr).

Exit status: 0 on success, 1 on an error (printed as ``error: <message>`` on
stderr), 2 for a usage or configuration error.

The modules, by concern:

* :mod:`.common`: the connection options and the connection, error
  reporting, and the output helpers every command shares
* :mod:`.serve`: ``serve``
* :mod:`.messages`: ``send``, ``receive``, ``peek``, ``move``, and how a
  message is printed; :mod:`.reports`: the options of ``send`` that ask for
  acknowledgments and journal copies
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
imports this package back.
"""

from __future__ import annotations

import click

from qmgr import __version__

from . import (
    auth,
    certs,
    lists,
    messages,
    outgoing,
    permissions,
    poison,
    queues,
    routes,
    serve,
    status,
    trace,
    transactions,
)
from .common import connection_options

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@connection_options
@click.version_option(__version__, prog_name="qmgr")
def cli() -> None:
    """qmgr: a transactional queue manager (MSMQ semantics) for Linux."""


# Commands are reached through their modules, so that the package's attributes
# stay its modules (``qmgr.cli.trace`` is the module, ``trace.trace`` the command).
for _command in (
    serve.serve,
    messages.send,
    messages.receive,
    messages.peek,
    messages.move,
    status.status,
    queues.queue,
    outgoing.outgoing,
    routes.route,
    transactions.tx,
    trace.trace,
    lists.dl,
    auth.auth,
    certs.certs,
):
    cli.add_command(_command)
for _command in (
    poison.queue_set,
    permissions.queue_grant,
    permissions.queue_revoke,
    permissions.queue_acl,
):
    queues.queue.add_command(_command)


def main() -> None:
    """Entry point of the ``qmgr`` console script."""
    cli(prog_name="qmgr")
