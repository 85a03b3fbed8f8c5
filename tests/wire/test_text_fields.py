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
