"""``qmgr auth token NAME``: a new client token and the line that lets the queue manager accept it.

The token is printed once; the queue manager keeps only its hash
(``auth.tokens`` or ``auth.tokens_file``). Nothing here talks to a queue
manager.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from qmgr.core.tokens import hash_token, new_token

from .common import CliError, reports_errors

__all__ = ["auth"]


@click.group()
def auth() -> None:
    """Client authentication: tokens."""


@auth.command("token")
@click.argument("name")
@click.option(
    "--file",
    "tokens_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append the NAME HASH line to this tokens file (auth.tokens_file; created 0600).",
)
@reports_errors
def auth_token(name: str, tokens_file: Path | None) -> None:
    """Make a token for the principal NAME; print it (once) and its hash."""
    if not name or any(ch.isspace() for ch in name) or len(name) > 256:
        msg = f"a principal name has no spaces and at most 256 characters, not {name!r}"
        raise CliError(msg)
    token = new_token()
    hashed = hash_token(token)
    if tokens_file is not None:
        try:
            fd = os.open(tokens_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as out:
                out.write(f"{name} {hashed}\n")
        except OSError as exc:
            msg = f"cannot write {tokens_file}: {exc.strerror}"
            raise CliError(msg) from None
        click.echo(f"added {name} to {tokens_file} (restart the queue manager to load it)")
    else:
        click.echo(
            f'for the queue manager\'s configuration:\n  [auth.tokens]\n  {name} = "{hashed}"'
        )
    click.echo(f"the token (give it to {name}; it is not kept anywhere):\n  {token}")
    click.echo("clients use it with --token or QMGR_TOKEN, or connect(..., token=...)")
