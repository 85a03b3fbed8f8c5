"""What is said of a text that cannot go in a text field, and how a message writes a name
(``wire/text_fields.py``)."""

from __future__ import annotations

import pytest

import wire
from wire.protocol_errors import LocalProtocolError, TextFieldError
from wire.text_fields import MAX_TEXT_BYTES, quoted, text_error


@pytest.mark.parametrize(
    "text", ["", "x" * MAX_TEXT_BYTES, "\u00e9" * (MAX_TEXT_BYTES // 2), "\U0001f600"]
)
def test_a_text_that_fits_is_no_error(text: str) -> None:
    assert text_error("label", text) is None


@pytest.mark.parametrize(
    ("name", "text", "field", "named", "message"),
    [
        pytest.param(
            "label",
            "x" * (MAX_TEXT_BYTES + 1),
            None,
            "label",
            "label is too long to send (65,536 characters): "
            "it can carry at most 65,535 bytes of UTF-8",
            id="too-long-in-characters",
        ),
        pytest.param(
            "Receive.queue",
            "\u00e9" * 40_000,
            None,
            "Receive.queue",
            "Receive.queue is too long to send (40,000 characters, 80,000 bytes): "
            "it can carry at most 65,535 bytes of UTF-8",
            id="too-long-in-bytes",
        ),
        pytest.param(
            "label",
            "ab\udcff",
            "MessageProperties.label",
            "MessageProperties.label",
            "label is not valid Unicode text (position 2: a lone surrogate, "
            "as non-UTF-8 bytes in a command-line argument give)",
            id="lone-surrogate",
        ),
    ],
)
def test_a_text_that_cannot_be_sent_says_why(
    name: str, text: str, field: str | None, named: str, message: str
) -> None:
    error = text_error(name, text, field=field)
    assert isinstance(error, TextFieldError)
    assert isinstance(error, LocalProtocolError)
    assert error.field == named
    assert str(error) == message


def test_what_is_not_text_is_left_to_the_encoder() -> None:
    assert text_error("label", 12) is None


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        pytest.param(".\\private$\\orders", "'.\\private$\\orders'", id="path-name"),
        pytest.param(
            "DIRECT=TCP:10.9.9.9\\private$\\orders",
            "'DIRECT=TCP:10.9.9.9\\private$\\orders'",
            id="format-name",
        ),
        pytest.param("it's", "'it's'", id="a-quote-is-not-escaped"),
        pytest.param("", "''", id="empty"),
        pytest.param("a\tb\\c", "'a\\tb\\\\c'", id="a-control-character-keeps-escapes"),
        pytest.param("q\u202etxt", "'q\\u202etxt'", id="right-to-left-override"),
        pytest.param("ab\udcff", "'ab\\udcff'", id="lone-surrogate"),
    ],
)
def test_a_name_is_quoted_as_it_is_typed(name: str, shown: str) -> None:
    """Backslashes are not doubled (the name can be copied back into a command); a
    name with a character that does not print is written as ``repr`` writes it."""
    assert quoted(name) == shown
    assert wire.quoted is quoted
