"""What every ``qmgr`` client command shares: the connection, error reporting, output helpers.

Errors: :func:`reports_errors` turns a :class:`CliError` or any SDK error
into ``error: <message>`` (and an optional ``hint: ...``) on stderr and exit
status 1. Output: rich tables go to :func:`stdout_console`, which does not
wrap when stdout is a file or a pipe; times are ISO 8601 in UTC.
"""

from __future__ import annotations

import datetime as dt
import functools
import ssl
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn, ParamSpec, TypeVar

import click
from rich.console import Console

from qmgr.client import ConnectionLost, QueueError, QueueManager, connect, tls_context

__all__ = [
    "CLIENT_NAME",
    "DEFAULT_SERVER",
    "CliError",
    "client",
    "confirm",
    "fail",
    "interactive",
    "iso",
    "plural",
    "reports_errors",
    "size",
    "stderr_console",
    "stdout_console",
    "tls_of",
]

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_SERVER = "127.0.0.1:1802"
CLIENT_NAME = "qmgr-cli"
_NOT_RUNNING_HINT = (
    "is the queue manager running? Start one with `make run` (from the source tree) "
    "or `qmgr serve --data-dir DIR`."
)


class CliError(Exception):
    """An error to report as ``error: <message>`` (and an optional hint), exit status 1."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def fail(message: str, *, hint: str | None = None, status: int = 1) -> NoReturn:
    """Print ``error: <message>`` (and the hint) on stderr and exit with ``status``."""
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    sys.exit(status)


def reports_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn SDK and CLI errors into ``error: ...`` on stderr and exit status 1."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except CliError as exc:
            fail(exc.message, hint=exc.hint)
        except QueueError as exc:
            fail(exc.message)

    return wrapper


@contextmanager
def client(ctx: click.Context) -> Iterator[QueueManager]:
    """A connection to the daemon named by ``--server``, closed at the end of the block.

    Raises:
        CliError: a bad address, or no daemon there (with a hint).
    """
    server: str = ctx.obj["server"]
    try:
        qm = connect(server, client_name=CLIENT_NAME, tls=tls_of(ctx), token=ctx.obj.get("token"))
    except ValueError as exc:
        msg = f"--server {server!r}: {exc}"
        raise CliError(msg) from None
    except ConnectionLost as exc:
        raise CliError(exc.message, hint=_NOT_RUNNING_HINT) from None
    with qm:
        yield qm


def tls_of(ctx: click.Context) -> ssl.SSLContext | None:
    """The TLS context ``--tls-ca/--tls-cert/--tls-key`` ask for (None: plain TCP).

    Raises:
        CliError: a file cannot be loaded.
    """
    ca, certificate, key = ctx.obj.get("tls", (None, None, None))
    if ca is None and certificate is None:
        if key is not None:
            msg = "--tls-key needs --tls-cert"
            raise CliError(msg)
        return None
    try:
        return tls_context(ca, certificate=certificate, key=key)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def interactive() -> bool:
    """True when standard input is a terminal (someone can answer a question)."""
    return sys.stdin.isatty()


def confirm(question: str, yes: bool) -> None:
    """Ask ``question`` on a terminal unless ``--yes``; exit 1 if the answer is no."""
    if yes or not interactive():
        return
    if not click.confirm(question, default=False, err=True):
        click.echo("nothing done", err=True)
        sys.exit(1)


def stderr_console() -> Console:
    """Rich output on stderr (progress bars)."""
    return Console(stderr=True)


def stdout_console() -> Console:
    """Rich output on stdout; unwrapped when it goes to a file or a pipe."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=1000)
    return console


def iso(value: dt.datetime) -> str:
    """A time for JSON: ISO 8601 with microseconds and the zone."""
    return value.isoformat(timespec="microseconds")


def size(value: int) -> str:
    """A byte count for people: ``512 B``, ``1.5 KiB``, ``10.0 MiB``."""
    if value < 1024:
        return f"{value} B"
    scaled = float(value)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        scaled /= 1024
        if scaled < 1024 or unit == "TiB":
            break
    return f"{scaled:.1f} {unit}"


def plural(count: int, noun: str) -> str:
    """``1 message``, ``2 messages``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
