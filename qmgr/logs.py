"""structlog set-up for the daemon and the CLI.

Events are named (``connection_opened``, ``transaction_aborted``, ...) and
carry bound context (``conn``, ``peer``, ``queue``, ``tx``). On a terminal
they render for people; otherwise, or with ``--log-format json``, one JSON
object per line for log collectors.

What libraries log through the standard ``logging`` module (trio's accept
loop on a failed ``accept``, say) is rendered the same way, at the same
level, with the ``logger`` it came from.

Exceptions are formatted by ``format_exc_info`` before any renderer sees
them, so structlog's rich tracebacks are never used: ``qmgr serve`` imports
structlog without rich, and without asyncio (``qmgr.deferred``), before it
imports this module.
"""

from __future__ import annotations

import logging
import sys

import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def configure_logging(*, fmt: str = "auto", level: str = "info") -> None:
    """Configure structlog, and the standard ``logging`` root, globally.
    ``fmt`` is auto, console or json."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: structlog.typing.Processor
    if use_json:
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    # What every event gets, the daemon's and the libraries' alike.
    context: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    render: list[structlog.typing.Processor] = [structlog.processors.format_exc_info, renderer]
    structlog.configure(
        processors=[*context, *render],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*context, structlog.stdlib.add_logger_name],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *render],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_LEVELS[level])
