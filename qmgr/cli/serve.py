"""``qmgr serve``: run a queue manager in the foreground.

The configuration is the built-in defaults, then ``--config``, then the
options (``--set SECTION.KEY=VALUE`` for any key). A configuration error
exits with status 2, a start-up error (a port in use, a certificate that
cannot serve) with the status it carries, both said on standard error as
``error: ...``, or as a ``start_failed`` event when JSON logs are asked for
by name (``--log-format json``, or ``log.format = "json"`` in the file or a
``--set`` for an error found after the file was read); a signal ends the
daemon with 0.
trio, the configuration and the daemon are imported only when ``serve``
runs: the client commands never load them (nor does ``serve`` load the
SDK, rich or, without TLS, cryptography).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from .common import configuration_options, fail

__all__ = ["serve"]


@click.command()
@configuration_options
@click.option("--listen", metavar="HOST:PORT", help="Peer (MSMQ) listener address.")
@click.option("--client-listen", metavar="HOST:PORT", help="Client (SDK and CLI) listener address.")
@click.option(
    "--http-listen",
    metavar="HOST:PORT",
    help='HTTP listener address (/healthz, /metrics, the JSON API, the console); "" for none.',
)
@click.option("--name", help="The queue manager's name (default: the host name).")
@click.option("--log-format", type=click.Choice(["console", "json", "auto"]), help="Log rendering.")
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), help="Log threshold."
)
def serve(config_path: Path | None, settings: tuple[str, ...], **overrides: Any) -> None:
    """Run a queue manager in the foreground until SIGTERM or Ctrl-C."""
    from qmgr.deferred import lean_libraries

    lean_libraries()  # first: structlog and construct without what the daemon never uses

    import trio

    from qmgr.config import ConfigError, load_config
    from qmgr.logs import configure_logging

    try:
        # The other options are named as load_config's overrides (None: not given).
        config = load_config(config_path, settings=settings, **overrides)
    except ConfigError as exc:
        # The flag first; without it, log.format as the file (or a --set) gave
        # it, for an error found once the file was read.
        json_logs = (overrides.get("log_format") or exc.log_format) == "json"
        if json_logs:
            configure_logging(fmt="json")
        _refuse(str(exc), 2, json_logs=json_logs)
    configure_logging(fmt=config.log_format, level=config.log_level)

    from qmgr.server import StartupError
    from qmgr.server import serve as run_daemon

    try:
        trio.run(run_daemon, config)
    except StartupError as exc:
        _refuse(str(exc), exc.status, json_logs=config.log_format == "json")
    except KeyboardInterrupt:
        pass  # Ctrl-C before the signal handlers were installed


def _refuse(message: str, status: int, *, json_logs: bool) -> NoReturn:
    """Stop a start that cannot go on with ``status``: ``error: ...`` on standard
    error, or, with JSON logs asked for by name (``--log-format json`` or
    ``log.format``), a ``start_failed`` event among the daemon's other lines."""
    if not json_logs:
        fail(message, status=status)
    import structlog

    structlog.get_logger("qmgr.daemon").error("start_failed", error=message, status=status)
    sys.exit(status)
