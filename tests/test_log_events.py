"""Every event the daemon logs is in the log table of ``docs/operations.md``:
an operator reads that table to learn what an event means and what to do,
and an event missing from it is one nobody can look up."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: A structlog call with a literal event: ``log.warning("event", ...)``, or a
#: level chosen at run time, ``getattr(log, level)("event", ...)``.
_CALL = re.compile(
    r"(?:\.(?:debug|info|warning|error|exception|critical)|\)|\blog)\(\s*\"([a-z][a-z0-9_]+)\""
)


def _logged() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted((ROOT / "qmgr").rglob("*.py")):
        for match in _CALL.finditer(path.read_text()):
            found.setdefault(match.group(1), str(path.relative_to(ROOT)))
    return found


def _log_table() -> str:
    text = (ROOT / "docs" / "operations.md").read_text()
    start = text.index("\n## Logs\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_every_logged_event_is_in_the_operations_log_table() -> None:
    logged = _logged()
    assert len(logged) > 100  # the scan finds the daemon's events
    table = _log_table()
    missing = {event: where for event, where in logged.items() if f"`{event}`" not in table}
    assert missing == {}, "events logged but not in docs/operations.md's log table"
