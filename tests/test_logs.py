"""The log set-up (``qmgr.logs``): JSON lines for collectors (by default when standard
error is not a terminal), text for people, the level filter, bound context, UTC
timestamps and tracebacks. structlog's global configuration is restored after each test."""

from __future__ import annotations

import datetime as dt
import errno
import io
import json
import logging
import sys
from typing import Any

import pytest
import structlog

from qmgr.logs import LOG_STREAM, configure_logging

pytestmark = pytest.mark.usefixtures("restored_logging")


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_json_lines_carry_the_event_its_context_and_a_utc_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(fmt="json")
    log = structlog.get_logger().bind(conn=3)
    with structlog.contextvars.bound_contextvars(peer="qm2"):
        log.info("connection_opened", queue="orders")
    log.warning("connection_closed")
    captured = capsys.readouterr()
    assert captured.out == ""
    opened, closed = json_lines(captured.err)
    timestamp = opened.pop("timestamp")
    assert opened == {
        "event": "connection_opened",
        "level": "info",
        "conn": 3,
        "peer": "qm2",
        "queue": "orders",
    }
    assert timestamp.endswith("Z")
    moment = dt.datetime.fromisoformat(timestamp.removesuffix("Z")).replace(tzinfo=dt.UTC)
    assert abs(dt.datetime.now(dt.UTC) - moment) < dt.timedelta(minutes=1)
    assert (closed["event"], closed["level"], closed["conn"]) == ("connection_closed", "warning", 3)
    assert "peer" not in closed


@pytest.mark.parametrize(
    ("level", "shown"),
    [
        ("debug", ["debug", "info", "warning", "error"]),
        ("info", ["info", "warning", "error"]),
        ("warning", ["warning", "error"]),
        ("error", ["error"]),
    ],
)
def test_the_level_filters_what_is_written(
    capsys: pytest.CaptureFixture[str], level: str, shown: list[str]
) -> None:
    configure_logging(fmt="json", level=level)
    log = structlog.get_logger()
    log.debug("a")
    log.info("b")
    log.warning("c")
    log.error("d")
    assert [line["level"] for line in json_lines(capsys.readouterr().err)] == shown


def test_auto_writes_json_when_standard_error_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging()  # capsys's standard error is no terminal
    structlog.get_logger().info("started", port=1801)
    [line] = json_lines(capsys.readouterr().err)
    assert (line["event"], line["port"]) == ("started", 1801)


def test_console_text_is_for_people(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(fmt="console")
    structlog.get_logger().info("started", port=1801)
    text = capsys.readouterr().err
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    assert "started" in text
    assert "port=1801" in text
    assert "\x1b[" not in text  # no colours: standard error is no terminal


def test_a_traceback_is_written_with_its_event(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(fmt="json")
    try:
        raise RuntimeError("the disk is gone")
    except RuntimeError:
        structlog.get_logger().exception("writer_failed")
    [line] = json_lines(capsys.readouterr().err)
    assert line["event"] == "writer_failed"
    assert line["level"] == "error"
    assert "Traceback" in line["exception"]
    assert "RuntimeError: the disk is gone" in line["exception"]


def test_what_libraries_log_through_logging_is_rendered_alike(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """trio's accept loop logs a failed accept (too many open files) this way:
    a collector reading JSON lines must not meet a plain-text traceback."""
    configure_logging(fmt="json", level="warning")
    library = logging.getLogger("trio.serve_listeners")
    library.info("not shown: below the level")
    try:
        raise OSError(24, "Too many open files")
    except OSError as exc:
        library.error(
            "accept returned %s; retrying in %s seconds", exc.strerror, 0.1, exc_info=True
        )
    [line] = json_lines(capsys.readouterr().err)
    assert line["event"] == "accept returned Too many open files; retrying in 0.1 seconds"
    assert (line["level"], line["logger"]) == ("error", "trio.serve_listeners")
    assert "OSError: [Errno 24] Too many open files" in line["exception"]
    assert line["timestamp"].endswith("Z")


class _Full(io.StringIO):
    """Standard error on a full disk (or a pipe whose reader has gone)."""

    def __init__(self, error: OSError) -> None:
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [OSError(errno.ENOSPC, "No space left on device"), BrokenPipeError(errno.EPIPE, "pipe")],
    ids=["full-disk", "broken-pipe"],
)
def test_a_line_that_cannot_be_written_is_dropped_not_raised(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: OSError
) -> None:
    configure_logging(fmt="json")
    before = LOG_STREAM.dropped
    monkeypatch.setattr(sys, "stderr", _Full(error))
    structlog.get_logger("test").warning("while_the_disk_is_full")
    logging.getLogger("library").error("a library's record")
    assert LOG_STREAM.dropped >= before + 2
    monkeypatch.undo()  # room again: the next line is written
    structlog.get_logger("test").info("written_again")
    assert "written_again" in capsys.readouterr().err
