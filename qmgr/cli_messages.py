"""How ``qmgr receive`` and ``qmgr peek`` print a message: one JSON object, or text for people."""

from __future__ import annotations

import base64
import json
from typing import Any

from qmgr.cli_common import iso, plural
from qmgr.client import Message

__all__ = ["message_json", "message_json_line", "message_text"]


def message_json(message: Message) -> dict[str, Any]:
    """A message as one JSON-ready object (``qmgr receive --json``)."""
    try:
        body: str = message.body.decode("utf-8")
        encoding = "utf-8"
    except UnicodeDecodeError:
        body = base64.b64encode(message.body).decode("ascii")
        encoding = "base64"
    return {
        "queue": message.queue,
        "lookup_id": message.lookup_id,
        "id": message.id,
        "label": message.label,
        "body": body,
        "body_encoding": encoding,
        "body_size": len(message.body),
        "correlation_id": None if message.correlation_id is None else message.correlation_id.hex(),
        "app_specific": message.app_specific,
        "priority": message.priority,
        "message_class": message.message_class,
        "class_name": message.class_name,
        "acknowledged_id": message.acknowledged_id,
        "sent_time": iso(message.sent_time),
        "arrived_time": iso(message.arrived_time),
        "source_qm": str(message.source_qm),
        "delivery": message.delivery.name.lower(),
        "acknowledge": message.acknowledge,
        "journal": message.journal,
        "admin_queue": message.admin_queue,
        "response_queue": message.response_queue,
        "time_to_reach_queue": message.time_to_reach_queue,
        "time_to_be_received": message.time_to_be_received,
        "transactional": message.transactional,
        "destination": message.destination,
        "abort_count": message.abort_count,
        "move_count": message.move_count,
        "last_move_time": None if message.last_move_time is None else iso(message.last_move_time),
    }


def message_json_line(message: Message) -> str:
    """A message as one line of JSON."""
    return json.dumps(message_json(message), ensure_ascii=False)


def message_text(message: Message) -> str:
    """A message for people: a header line, a property line, then the body."""
    header = (
        f"--- {message.queue}  lookup id {message.lookup_id}  id {message.id}\n"
        f"    label {message.label!r}  priority {message.priority}  "
        f"sent {iso(message.sent_time)}  {plural(len(message.body), 'byte')}"
    )
    if message.message_class:
        about = message.acknowledged_id
        header += f"\n    class {message.class_name}" + (f"  about {about}" if about else "")
    if message.abort_count or message.move_count:
        header += f"\n    aborted {message.abort_count}  moved {message.move_count}"
        if message.last_move_time is not None:
            header += f" (last {iso(message.last_move_time)})"
    try:
        text = message.body.decode("utf-8")
    except UnicodeDecodeError:
        text = f"<{len(message.body)} bytes of binary data; use --json to see them>"
    return f"{header}\n{text}"
