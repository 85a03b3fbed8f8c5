"""``qmgr auth token NAME``: a new client token and the line that lets the queue manager accept it.

The token is printed once; the queue manager keeps only its hash
(``auth.tokens`` or ``auth.tokens_file``). Nothing here talks to a queue
manager.

A name the queue manager would refuse to load is refused here, with the
queue manager's own check (``qmgr.core.tokens.token_name_problem``), as a
usage error: a line it refused would stop its next start. The
configuration line printed is TOML whatever the name (the key quoted when
it is not a bare key), a line of the ``[auth.tokens]`` table, which the
shipped configuration ends with, so that each line printed can be appended
to it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Final

import click

from qmgr.core.tokens import (
    hash_token,
    load_tokens,
    new_token,
    read_tokens_file,
    token_name_problem,
)

from .common import CliError, quoted, reports_errors

__all__ = ["auth", "toml_key"]

#: A TOML bare key: anything else is written as a quoted (basic string) key.
_BARE_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")


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
    """Make a token for the principal NAME; print it (once) and its hash.

    NAME is a client's name: not empty, without control characters, not
    everyone and not beginning with group: or peer:; in a tokens file
    (--file), also without spaces or '#'.
    """
    problem = token_name_problem(name, in_file=tokens_file is not None)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="'NAME'")
    ends_line = True
    if tokens_file is not None and tokens_file.exists():
        ends_line = _check_not_in(tokens_file, name)
    token = new_token()
    hashed = hash_token(token)
    if tokens_file is not None:
        try:
            fd = os.open(tokens_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as out:
                # A last line without its newline would run into this one.
                out.write(f"{'' if ends_line else chr(10)}{name} {hashed}\n")
        except OSError as exc:
            msg = f"cannot write {tokens_file}: {exc.strerror}"
            raise CliError(msg) from None
        click.echo(f"added {name} to {tokens_file} (restart the queue manager to load it)")
    else:
        click.echo(
            "for the queue manager's configuration, a line of its [auth.tokens] table\n"
            "(the shipped qmgr.toml ends with that table: append the line to the file):\n"
            f'  {toml_key(name)} = "{hashed}"'
        )
    click.echo(f"the token (give it to {name}; it is not kept anywhere):\n  {token}")
    click.echo("clients use it with --token or QMGR_TOKEN, or connect(..., token=...)")


def _check_not_in(tokens_file: Path, name: str) -> bool:
    """Refuse to add a line the queue manager would refuse: to a tokens file it
    refuses (unreadable, malformed, or writable by other users), or for a name
    that has a line there already. Returns whether the file ends a line.

    Raises:
        CliError: either.
    """
    try:
        load_tokens({}, tokens_file)  # as the queue manager loads it: its mode, every line
        named = read_tokens_file(tokens_file)
        data = tokens_file.read_bytes()
    except (ValueError, OSError) as exc:
        raise CliError(str(exc), hint="mend the file first: the queue manager refuses it") from None
    if name in named:
        msg = f"{quoted(name)} has a token in {tokens_file} already"
        raise CliError(msg, hint="remove its line to give it a new one")
    return not data or data.endswith(b"\n")


def toml_key(name: str) -> str:
    """``name`` as a TOML key: bare when it may be, else a basic string."""
    if _BARE_KEY.fullmatch(name):
        return name
    # JSON's escapes are TOML's, but for DEL, which TOML wants escaped too.
    return json.dumps(name, ensure_ascii=False).replace("\x7f", "\\u007f")
