"""structlog set-up for the daemon and the CLI.

Events are named (``connection_opened``, ``transaction_aborted``, ...) and
carry bound context (``conn``, ``peer``, ``queue``, ``tx``). On a terminal
they render for people; otherwise, or with ``--log-format json``, one JSON
object per line for log collectors.

What libraries log through the standard ``logging`` module (trio's accept
loop on a failed ``accept``, say) is rendered the same way, at the same
level, with the ``logger`` it came from.

A line that cannot be written (standard error on a full disk, a pipe whose
reader has gone, ``/dev/full``) is dropped and counted
(:data:`LOG_STREAM`), never raised into the daemon: a queue manager goes on
serving while its log cannot be written, as it does while its store is full.

Exceptions are formatted by ``format_exc_info`` before any renderer sees
them, so structlog's rich tracebacks are never used: ``qmgr serve`` imports
structlog without rich, and without asyncio (``qmgr.deferred``), before it
imports this module.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

__all__ = ["LOG_STREAM", "LogStream", "configure_logging"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class LogStream:
    """Standard error as the logs write to it: what cannot be written is dropped
    and counted, and the next line is tried again."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        #: Writes and flushes of log lines that failed since the start (their
        #: lines are dropped; ``qmgr_log_write_failures_total``).
        self.dropped = 0

    @property
    def stream(self) -> TextIO:
        """Where the lines go: the stream given, else ``sys.stderr`` as it is now."""
        return self._stream if self._stream is not None else sys.stderr

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except (OSError, ValueError):  # ValueError: the stream was closed
            self.dropped += 1
            return 0

    def flush(self) -> None:
        try:
            self.stream.flush()
        except (OSError, ValueError):
            self.dropped += 1


#: Where the daemon's and the CLI's log lines go.
LOG_STREAM = LogStream()


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
        logger_factory=structlog.WriteLoggerFactory(file=LOG_STREAM),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(LOG_STREAM)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*context, structlog.stdlib.add_logger_name],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *render],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_LEVELS[level])
