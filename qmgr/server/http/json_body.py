"""What the JSON API takes as a request's body, and how its errors repeat a value.

Pure functions of the bytes and headers a request brought, for the API's
routes (``api``): each says what is wrong in words meant for the client, and
the route answers ``400`` or ``415`` with them.

* :func:`content_type_problem`: a body must say it is JSON
  (``Content-Type: application/json``; a charset, if named, is UTF-8, the
  one JSON has). A page on another site cannot send that type without its
  browser asking the listener first, which it does not grant;
* :func:`json_object`: the body is one JSON object that gives each key once,
  at every depth. A key given twice is ambiguous (parsers differ on which one
  counts: ``{"lookup_id": 1, "lookup_id": 2}``), so it is refused rather than
  read one way;
* :func:`shown_text`, :func:`shown_number`: a value an error message repeats
  is cut at :data:`SHOWN` characters, whether it came in the query or in the
  body, so that an answer never grows with what the client sent.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = [
    "SHOWN",
    "BodyProblem",
    "content_type_problem",
    "json_object",
    "shown_number",
    "shown_text",
]

#: Characters of a value that an error message repeats; a longer one is named
#: by its length.
SHOWN: Final = 40


class BodyProblem(ValueError):
    """A body the API does not take: ``message`` says why, for the client."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def shown_text(text: str) -> str:
    """``text`` as an error message repeats it: quoted, up to :data:`SHOWN` characters."""
    return repr(text) if len(text) <= SHOWN else f"{text[:SHOWN]!r}... ({len(text)} characters)"


def shown_number(number: int) -> str:
    """``number`` as an error message repeats it: its digits, up to :data:`SHOWN`."""
    text = str(number)
    return text if len(text) <= SHOWN else f"a number of {len(text)} digits"


def content_type_problem(value: str | None) -> str | None:
    """Why a ``Content-Type`` header (None: absent) does not say that a body is
    JSON the API reads, or None if it does: ``application/json``, with no
    charset or ``charset=utf-8``, other parameters ignored."""
    if value is None:
        return "it has none"
    media_type, *parameters = value.split(";")
    if media_type.strip().lower() != "application/json":
        return f"not {shown_text(media_type.strip())}"
    for parameter in parameters:
        name, _, given = parameter.partition("=")
        charset = given.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset not in ("utf-8", "utf8"):
            return f"in UTF-8, not {shown_text(given.strip())}"
    return None


class _RepeatedKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _object_without_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The object of ``pairs`` (``json.loads``'s hook), each key given once.

    Raises:
        _RepeatedKey: a key is given twice.
    """
    found = dict(pairs)
    if len(found) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return found


def json_object(data: bytes) -> dict[str, Any]:
    """The JSON object ``data`` holds.

    Raises:
        BodyProblem: it is not JSON, not an object, gives a key twice in an
            object, or has a number too long to convert.
    """
    try:
        found = json.loads(data, object_pairs_hook=_object_without_repeats)
    except _RepeatedKey as exc:
        msg = f"the body gives the key {shown_text(exc.key)} more than once in an object"
        raise BodyProblem(msg) from None
    except (ValueError, RecursionError) as exc:
        # A number too long to convert is valid JSON, but no field takes one.
        reason = str(exc).lower()
        too_long = "exceeds the limit" in reason and "digits" in reason
        msg = "the body has a number too long" if too_long else "the body is not JSON"
        raise BodyProblem(msg) from None
    if not isinstance(found, dict):
        msg = "the body must be a JSON object"
        raise BodyProblem(msg)
    return found
