"""What every ``qmgr`` client command shares: the connection, error reporting, output helpers.

Connection: :func:`connection_options` puts ``--server``, ``--tls-ca``,
``--tls-cert``, ``--tls-key`` and ``--token`` on the ``qmgr`` group and keeps
what they say in the click context; :func:`client` (or :func:`connect_to`, for
another address) opens a connection with them, without TLS to ``unix:PATH``
(the Unix-domain socket never uses it). Nothing else reads the context's
``obj``.

Errors: :func:`reports_errors` turns a :class:`CliError` or any SDK error
into ``error: <message>`` (and an optional ``hint: ...``) on stderr and exit
status 1. Output: rich tables go to :func:`stdout_console`, which does not
wrap when stdout is a file or a pipe; times are ISO 8601 in UTC.

The SDK and rich are imported where they are used, not with this module:
``qmgr serve`` goes through the ``qmgr`` group (and :func:`fail`) and needs
neither.
"""

from __future__ import annotations

import functools
import json
import math
import pathlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, NoReturn, ParamSpec, TypeVar

import click

from qmgr.texts import age, plural, size

if TYPE_CHECKING:
    import ssl

    from rich.console import Console
    from rich.table import Column, Table
    from rich.text import Text

    from qmgr.client import QueueManager

__all__ = [
    "CLIENT_NAME",
    "DEFAULT_SERVER",
    "PLAIN_ROWS",
    "CliError",
    "Seconds",
    "age",
    "client",
    "configuration_options",
    "confirm",
    "confirmed",
    "connect_to",
    "connection_options",
    "count_option",
    "fail",
    "folded",
    "interactive",
    "json_option",
    "listing_table",
    "plain_table",
    "plural",
    "print_listing",
    "print_table",
    "quoted",
    "reports_errors",
    "right",
    "server_of",
    "size",
    "stderr_console",
    "stdout_console",
    "tls_of",
    "yes_option",
]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_SERVER = "127.0.0.1:1802"
CLIENT_NAME = "qmgr-cli"
_NOT_RUNNING_HINT = (
    "is the queue manager running? Start one with `make run` (from the source tree) "
    "or `qmgr serve --data-dir DIR`."
)
#: How the SDK says that nothing answered at the address (the words that end
#: ``cannot connect to the queue manager at ADDRESS: ...``): no listener on the
#: port or the socket, no socket file, no answer at all.
_NOTHING_ANSWERS: Final = ("connection refused", "no such file or directory")
_NO_ANSWER_WITHIN: Final = "no answer within "
_TLS_HINT = (
    "its client port may require TLS: connect with "
    "`qmgr --tls-ca CA.pem COMMAND ...` (or QMGR_TLS_CA)."
)
#: How OpenSSL reports, on the client, a server that wanted a certificate it
#: was not given (TLS 1.3: after the handshake, with the first read).
_NO_CERTIFICATE_SIGNS = ("certificate required", "eof occurred in violation of protocol")
_CERTIFICATE_HINT = (
    "it may require a client certificate (auth.required): connect "
    "with `qmgr --tls-cert CERT.pem --tls-key KEY.pem COMMAND ...`."
)
#: How OpenSSL reports, on the client, a TLS handshake answered in plain text.
_NOT_TLS_SIGN = "wrong_version_number"
_NOT_TLS_HINT = (
    "the port does not speak TLS: it is not a client port with TLS on (tls.clients), "
    "or not the queue manager's client port at all."
)
#: An address that names the daemon's Unix-domain socket, which never uses TLS.
_UNIX_PREFIX: Final = "unix:"
_TLS_OPTIONS: Final = ("tls_ca", "tls_cert", "tls_key")
#: How the SDK's ConnectionLost begins when a connection was made and then lost
#: before the Hello was answered (``calls.handshake.handshake_error``).
_HANDSHAKE_FAILED = "handshake with the queue manager at "
#: What the SDK says of a certificate given without a key that holds none (``tls_context``).
_NO_PRIVATE_KEY = "holds no private key"
#: What the SDK says of a port that answered in HTTP (``ClientProtocol.receive_data``).
_ANSWERED_IN_HTTP = "answered in HTTP"
_HTTP_PORT_HINT = (
    "give --server the queue manager's client address (`qmgr serve --client-listen`, "
    "port 1802 by default), not its HTTP address."
)

# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


class Seconds(click.FloatRange):
    """A number of seconds from ``min`` up: a float, never NaN."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if math.isnan(seconds):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return seconds


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
        from qmgr.client import QueueError

        try:
            return func(*args, **kwargs)
        except CliError as exc:
            fail(exc.message, hint=exc.hint)
        except QueueError as exc:
            fail(exc.message)

    return wrapper


# --------------------------------------------------------------------------
# The connection
# --------------------------------------------------------------------------


def configuration_options(command: Callable[..., R]) -> Callable[..., R]:
    """``--config``, ``--data-dir`` and ``--set``: the configuration of a queue
    manager, as ``qmgr serve`` and ``qmgr restored`` read it (the command takes
    ``config_path``, ``data_dir`` and ``settings``)."""
    options = (
        click.option(
            "--config",
            "config_path",
            type=click.Path(dir_okay=False, path_type=pathlib.Path),
            help="A TOML file overriding the built-in defaults.",
        ),
        # Text, not a Path: Path("") would be ".", and an empty directory name must
        # be refused as server.data_dir is (load_config checks it).
        click.option("--data-dir", type=click.Path(file_okay=False), help="Where the store lives."),
        click.option(
            "--set",
            "settings",
            metavar="SECTION.KEY=VALUE",
            multiple=True,
            help="Override any configuration key (repeatable), "
            "e.g. --set store.max_map_size=1073741824.",
        ),
    )
    for option in reversed(options):
        command = option(command)
    return command


def connection_options(group: Callable[..., R]) -> Callable[..., R]:
    """Add the connection options to the ``qmgr`` group and keep their values for
    :func:`client`; the group's own callback does not receive them."""

    @functools.wraps(group)
    def wrapper(
        *args: Any,
        server: str,
        tls_ca: str | None,
        tls_cert: str | None,
        tls_key: str | None,
        token: str | None,
        **kwargs: Any,
    ) -> R:
        ctx = click.get_current_context()
        ctx.ensure_object(dict)
        ctx.obj["server"] = server
        ctx.obj["tls"] = (tls_ca, tls_cert, tls_key)
        ctx.obj["token"] = token
        return group(*args, **kwargs)

    options = [
        click.option(
            "--server",
            envvar="QMGR_SERVER",
            default=DEFAULT_SERVER,
            show_default=True,
            metavar="HOST:PORT",
            help="The queue manager's client address (env QMGR_SERVER).",
        ),
        click.option(
            "--tls-ca",
            envvar="QMGR_TLS_CA",
            metavar="PEM",
            help="Connect over TLS, trusting this CA bundle (env QMGR_TLS_CA); never to unix:PATH.",
        ),
        click.option(
            "--tls-cert",
            envvar="QMGR_TLS_CERT",
            metavar="PEM",
            help="Client certificate to authenticate with over TLS (env QMGR_TLS_CERT).",
        ),
        click.option(
            "--tls-key",
            envvar="QMGR_TLS_KEY",
            metavar="PEM",
            help=(
                "The client certificate's private key (env QMGR_TLS_KEY); "
                "not needed when the --tls-cert file holds it."
            ),
        ),
        click.option(
            "--token",
            envvar="QMGR_TOKEN",
            metavar="TOKEN",
            help="Authenticate with this token (env QMGR_TOKEN; see qmgr auth token).",
        ),
    ]
    decorated: Callable[..., R] = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated


def server_of(ctx: click.Context) -> str:
    """The address ``--server`` names."""
    server: str = ctx.obj["server"]
    return server


def connect_to(ctx: click.Context, address: str, *, client_name: str = CLIENT_NAME) -> QueueManager:
    """A connection to ``address`` with the TLS and token options (the SDK's errors as they are)."""
    from qmgr.client import connect

    tls = tls_of(ctx, address)
    return connect(address, client_name=client_name, tls=tls, token=ctx.obj.get("token"))


@contextmanager
def client(ctx: click.Context) -> Iterator[QueueManager]:
    """A connection to the daemon named by ``--server``, closed at the end of the block.

    Raises:
        click.BadParameter: ``--server`` is empty or not an address (a usage
            error: status 2).
        CliError: no daemon there (with a hint).
    """
    from qmgr.client import ConnectionLost

    server = server_of(ctx)
    given = _given_as(ctx, "server")
    if not server.strip():
        msg = "is empty: give the queue manager's client address, HOST:PORT"
        raise click.BadParameter(msg, ctx=ctx.find_root(), param_hint=repr(given))
    _check_token(ctx)
    try:
        qm = connect_to(ctx, server)
    except ValueError as exc:
        said = str(exc)  # an address error quotes the address itself
        shown = said if said.startswith(quoted(server)) else f"{quoted(server)}: {said}"
        raise click.BadParameter(shown, ctx=ctx.find_root(), param_hint=repr(given)) from None
    except ConnectionLost as exc:
        raise CliError(exc.message, hint=_not_reached_hint(ctx, server, exc.message)) from None
    with qm:
        yield qm


def _check_token(ctx: click.Context) -> None:
    """Refuse a ``--token`` that cannot be sent, naming the option (the SDK refuses
    it too, but as an ``InvalidArgument`` of ``connect()``, which :func:`client`
    reports as a bad ``--server``).

    Raises:
        CliError: it is not valid Unicode text, or too long to send.
    """
    from wire.text_fields import text_error

    error = text_error(_given_as(ctx, "token"), ctx.obj.get("token"))
    if error is not None:
        raise CliError(error.message)


def _given_as(ctx: click.Context, param: str) -> str:
    """How a connection option was given, for an error: ``--tls-key``, or
    ``QMGR_TLS_KEY (--tls-key)`` when it came from the environment."""
    root = ctx.find_root()
    option = f"--{param.replace('_', '-')}"
    if root.get_parameter_source(param) is not click.core.ParameterSource.ENVIRONMENT:
        return option
    envvar = next(p.envvar for p in root.command.params if p.name == param)
    return f"{envvar} ({option})"


def _not_reached_hint(ctx: click.Context, address: str, reason: str) -> str | None:
    """What to check when the daemon at ``address`` cannot be reached, if
    anything: that it runs, when nothing answered there (a port or socket with
    no listener, no socket file, no answer); over plain TCP to a port that took
    the connection and then reset or closed it in the handshake (as a TLS port
    does to plain text), that it wants no TLS; with a CA and no certificate,
    that it wants none; over TLS to a port that answered in plain text, that it
    speaks no TLS. A port that answered in HTTP is not the client port: the
    hint names the one to give. Other failures (a name that does not resolve,
    a certificate not trusted) say all there is in the error itself."""
    if _ANSWERED_IN_HTTP in reason:
        return _HTTP_PORT_HINT
    why = reason.rpartition(": ")[2]
    if why in _NOTHING_ANSWERS or why.startswith(_NO_ANSWER_WITHIN):
        return _NOT_RUNNING_HINT
    ca, certificate, _ = _tls_options(ctx, address)
    plain = ca is None and certificate is None and not _is_unix(address)
    if plain and reason.startswith(_HANDSHAKE_FAILED):
        return _TLS_HINT
    said = reason.lower()
    refused_by_tls = any(sign in said for sign in _NO_CERTIFICATE_SIGNS)
    if certificate is None and ca is not None and refused_by_tls:
        return _CERTIFICATE_HINT
    if not plain and _NOT_TLS_SIGN in said:
        return _NOT_TLS_HINT
    return None


def _is_unix(address: str) -> bool:
    """True if ``address`` is ``unix:PATH``, the daemon's Unix-domain socket."""
    return address.strip().startswith(_UNIX_PREFIX)


def _tls_options(ctx: click.Context, address: str) -> tuple[str | None, str | None, str | None]:
    """``--tls-ca``, ``--tls-cert`` and ``--tls-key`` as they apply to ``address``:
    not at all to ``unix:PATH`` (see :func:`tls_of`)."""
    if _is_unix(address):
        return None, None, None
    ca, certificate, key = ctx.obj.get("tls", (None, None, None))
    return ca, certificate, key


def quoted(name: str) -> str:
    """``name`` (a queue, format name, destination or transaction id) as
    :func:`wire.quoted` writes it, the one rule of every layer: in single quotes, as
    it is typed (backslashes not doubled, so that it can be copied back into a
    command); a name with a character that does not print keeps Python's escapes.

    ``wire`` is imported on first use, not with this module: ``qmgr serve`` imports
    it only after :func:`qmgr.deferred.lean_libraries`."""
    from wire.text_fields import quoted as quoted_name

    return quoted_name(name)


def tls_of(ctx: click.Context, address: str) -> ssl.SSLContext | None:
    """The TLS context ``--tls-ca/--tls-cert/--tls-key`` ask for to connect to
    ``address`` (None: plain TCP, or the Unix-domain socket).

    ``--tls-cert`` alone is a file that holds the key too (as the SDK takes it).
    The Unix-domain socket (``unix:PATH``) never uses TLS: the options do not
    apply to it. Set in the environment (``QMGR_TLS_*``, kept for the TCP
    ports), they are passed over in silence; given on the command line, with
    a note on stderr (``qmgr trace`` may still use them for the queue managers
    it follows, over TCP).

    Raises:
        click.UsageError: ``--tls-key`` without ``--tls-cert``.
        CliError: a file cannot be loaded, or ``--tls-cert`` alone holds no private key.
    """
    from qmgr.client import tls_context

    if _is_unix(address):
        root = ctx.find_root()
        values = ctx.obj.get("tls", (None, None, None))
        given = [
            f"--{name.replace('_', '-')}"
            for name, value in zip(_TLS_OPTIONS, values, strict=True)
            if value is not None
            and root.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
        ]
        if given:
            note = f"note: {address.strip()} is a Unix-domain socket, which never uses TLS: "
            click.echo(note + f"{', '.join(given)} not applied", err=True)
        return None
    ca, certificate, key = _tls_options(ctx, address)
    if key is not None and certificate is None:
        msg = f"{_given_as(ctx, 'tls_key')} needs --tls-cert"
        raise click.UsageError(msg, ctx=ctx.find_root())
    if ca is None and certificate is None:
        return None
    try:
        return tls_context(ca, certificate=certificate, key=key)
    except ValueError as exc:
        if key is None and _NO_PRIVATE_KEY in str(exc):
            msg = f"{_given_as(ctx, 'tls_cert')} {certificate} holds no private key: give --tls-key"
            raise CliError(msg) from None
        raise CliError(str(exc)) from None


# --------------------------------------------------------------------------
# Options more than one command takes
# --------------------------------------------------------------------------


def json_option(help: str) -> Callable[[F], F]:
    """``--json`` (the parameter ``as_json``), with the command's own help text."""
    return click.option("--json", "as_json", is_flag=True, help=help)


#: ``--yes``/``-y``: do not ask before deleting.
yes_option = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")


def count_option(help: str) -> Callable[[F], F]:
    """``--count N`` (at least 1, default 1: how many messages) with the command's own help."""
    return click.option(
        "--count", type=click.IntRange(min=1), default=1, show_default=True, help=help
    )


# --------------------------------------------------------------------------
# Questions and output
# --------------------------------------------------------------------------


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


def confirmed(ctx: click.Context, question: str, yes: bool, act: Callable[[QueueManager], R]) -> R:
    """Connect to the daemon, ask ``question`` (see :func:`confirm`), then ``act`` on it."""
    with client(ctx) as qm:
        confirm(question, yes)
        return act(qm)


def print_listing(
    items: Sequence[T],
    as_json: bool,
    to_json: Callable[[T], Any],
    table: Callable[[Sequence[T]], Table],
    *,
    empty: str | None = None,
) -> None:
    """Print ``items`` as a JSON array (``--json``), or as a table for people, or
    the line ``empty`` instead of a table without rows (if ``empty`` is given)."""
    if as_json:
        click.echo(json.dumps([to_json(item) for item in items], indent=2))
    elif not items and empty is not None:
        click.echo(empty)
    else:
        print_table(table(items))


def print_table(table: Table, console: Console | None = None) -> None:
    """``table`` for people: laid out by rich (on ``console``, else standard
    output), or as plain aligned text past :data:`PLAIN_ROWS` rows."""
    if table.row_count > PLAIN_ROWS:
        click.echo(plain_table(table))
    else:
        (console or stdout_console()).print(table)


#: Rows past which a listing is printed as plain aligned text: rich lays a table
#: out cell by cell (about half a millisecond a row), which for 40,000 queues is
#: 24 s of the command's time.
PLAIN_ROWS: Final = 2000


def plain_table(table: Table) -> str:
    """``table`` as plain text: its columns aligned (numbers to the right), the
    header underlined, cells whole (never folded or cut)."""
    columns = table.columns
    cells = [[str(cell) for cell in column._cells] for column in columns]
    headers = [str(column.header) for column in columns]
    widths = [
        max([len(header), *(len(cell) for cell in column)])
        for header, column in zip(headers, cells, strict=True)
    ]
    right = [column.justify == "right" for column in columns]

    def line(values: Sequence[str]) -> str:
        parts = [
            value.rjust(width) if flush else value.ljust(width)
            for value, width, flush in zip(values, widths, right, strict=True)
        ]
        return "  ".join(parts).rstrip()

    lines = []
    if table.show_header:
        lines += [line(headers), "  ".join("-" * width for width in widths)]
    lines += [line(row) for row in zip(*cells, strict=True)]
    return "\n".join(lines)


def shown(text: str) -> Text:
    """Someone else's text (a name, a destination, an error) for a table cell: never
    console markup, and, when it holds a character that does not print (a control,
    a right-to-left override, a zero-width space), escaped in quotes as
    :func:`quoted` does, so that it cannot hide or reorder what the operator reads."""
    from rich.text import Text

    return Text(text if text.isprintable() else repr(text))


def listing_table(*columns: str | Column, show_header: bool = True) -> Table:
    """A table for people, without an outer edge; each column is its header, or
    a :class:`~rich.table.Column` such as :func:`folded` and :func:`right` make."""
    from rich.table import Table

    return Table(*columns, title=None, show_header=show_header, show_edge=False, pad_edge=False)


def folded(header: str) -> Column:
    """A column whose long cells (names, format names) fold onto more lines, uncut."""
    from rich.table import Column

    return Column(header, overflow="fold")


def right(header: str) -> Column:
    """A right-justified column (of numbers)."""
    from rich.table import Column

    return Column(header, justify="right")


def stderr_console() -> Console:
    """Rich output on stderr (progress bars)."""
    from rich.console import Console

    return Console(stderr=True)


def stdout_console() -> Console:
    """Rich output on stdout; unwrapped when it goes to a file or a pipe."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=1000)
    return console
