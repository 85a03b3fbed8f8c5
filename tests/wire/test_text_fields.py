"""What is said of a text that cannot go in a text field (``wire/text_fields.py``)."""

from __future__ import annotations

import pytest

from wire.protocol_errors import LocalProtocolError, TextFieldError
from wire.text_fields import MAX_TEXT_BYTES, text_error


@pytest.mark.parametrize(
    "text", ["", "x" * MAX_TEXT_BYTES, "\u00e9" * (MAX_TEXT_BYTES // 2), "\U0001f600"]
)
def test_a_text_that_fits_is_no_error(text: str) -> None:
    assert text_error("label", text) is None


def test_a_text_too_long_is_counted_in_characters_and_bytes() -> None:
    error = text_error("label", "x" * (MAX_TEXT_BYTES + 1))
    assert isinstance(error, TextFieldError)
    assert isinstance(error, LocalProtocolError)
    assert str(error) == (
        "label is too long to send (65,536 characters): it can carry at most 65,535 bytes of UTF-8"
    )
    wide = text_error("Receive.queue", "\u00e9" * 40_000)
    assert wide is not None
    assert wide.field == "Receive.queue"
    assert str(wide) == (
        "Receive.queue is too long to send (40,000 characters, 80,000 bytes): "
        "it can carry at most 65,535 bytes of UTF-8"
    )


def test_a_lone_surrogate_is_not_valid_unicode() -> None:
    error = text_error("label", "ab\udcff", field="MessageProperties.label")
    assert error is not None
    assert error.field == "MessageProperties.label"
    assert str(error) == (
        "label is not valid Unicode text (position 2: a lone surrogate, "
        "as non-UTF-8 bytes in a command-line argument give)"
    )


def test_what_is_not_text_is_left_to_the_encoder() -> None:
    assert text_error("label", 12) is None
