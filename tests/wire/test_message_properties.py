"""MessageProperties: the message, kept encoded: round trips, decoding, changed copies, errors."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from wire_samples import PROPERTIES
from wire_strategies import message_fields

from wire import LocalProtocolError, MessageProperties, RemoteProtocolError, format_message_id
from wire import client as cf
from wire.protocol_errors import TextFieldError


def _expected_field(name: str, fields: dict[str, Any]) -> object:
    value = fields[name]
    if name == "source_qm" and value is None:
        return uuid.UUID(int=0)
    return value


@settings(max_examples=300)
@given(fields=message_fields)
def test_message_properties_round_trip_every_field(fields: dict[str, Any]) -> None:
    message = MessageProperties(**fields)
    raw = message.raw
    for source in (raw, memoryview(raw), bytearray(raw)):
        again = MessageProperties.from_bytes(source)
        assert again == message
        assert hash(again) == hash(message)
        assert again.raw == raw
        assert len(again) == len(raw)
        for name, _ in fields.items():
            assert getattr(again, name) == _expected_field(name, fields), name
    assert message.body_size == len(fields["body"])
    assert MessageProperties.size_at(b"xx" + raw + b"yy", 2) == len(raw)
    assert message.message_id == format_message_id(message.source_qm, fields["ordinal"])
    assert message.replace() == message


def test_from_bytes_keeps_immutable_bytes_and_copies_mutable_ones() -> None:
    raw = PROPERTIES.raw
    frame = b"head" + raw
    viewed = MessageProperties.from_bytes(memoryview(frame)[4:])
    assert viewed.view.obj is frame  # a received frame is not copied
    buffer = bytearray(raw)
    copied = MessageProperties.from_bytes(buffer)
    buffer[-1:] = b"y"  # the caller may reuse its buffer
    assert copied.body == b"x" * 100
    assert copied == viewed == PROPERTIES


@pytest.mark.parametrize("cut", [0, 1, 83, 84, 85, -1])
def test_truncated_or_padded_message_bytes_are_remote_protocol_errors(cut: int) -> None:
    raw = MessageProperties(destination="q", body=b"body", label="l").raw
    with pytest.raises(RemoteProtocolError):
        MessageProperties.from_bytes(raw[:cut])
    with pytest.raises(RemoteProtocolError, match="add up"):
        MessageProperties.from_bytes(raw + b"x")
    with pytest.raises(RemoteProtocolError):
        MessageProperties.size_at(raw[:83], 0)


@pytest.mark.parametrize(
    ("offset", "value", "field"),
    [
        (28, 0x04, "MessageProperties.flags"),  # an unknown flag
        (29, 0x01, "MessageProperties.flags"),  # the reserved byte
        (84, 0xFF, "MessageProperties"),  # the label's first byte: not UTF-8
    ],
)
def test_malformed_message_bytes_say_what_is_wrong(offset: int, value: int, field: str) -> None:
    raw = bytearray(MessageProperties(destination="q", body=b"body", label="l").raw)
    raw[offset] = value
    with pytest.raises(RemoteProtocolError) as excinfo:
        MessageProperties.from_bytes(bytes(raw))
    assert excinfo.value.field == field


def test_stamp_sets_the_identity_and_transactional_defaults() -> None:
    guid = uuid.UUID(int=7)
    message = MessageProperties(destination="q", body=b"b", priority=5, delivery=0, message_class=9)
    stamped = message.stamp(source_qm=guid, ordinal=42, sent_time=3.5, transactional=True)
    assert stamped.source_qm == guid
    assert stamped.ordinal == 42
    assert stamped.sent_time == 3.5
    assert stamped.transactional
    assert stamped.message_class == 0
    assert stamped.message_id == f"{{{guid}}}\\42"
    # A transactional message is sent with priority 0 and recoverable delivery.
    assert (stamped.priority, stamped.delivery) == (0, 1)
    assert stamped.body == b"b"
    assert MessageProperties.from_bytes(stamped.raw) == stamped
    plain = stamped.stamp(source_qm=guid, ordinal=43, sent_time=3.5, transactional=False)
    assert (plain.priority, plain.delivery, plain.transactional) == (0, 1, False)
    plain = message.stamp(source_qm=guid, ordinal=43, sent_time=3.5, transactional=False)
    assert (plain.priority, plain.delivery, plain.transactional) == (5, 0, False)
    assert message.source_qm != guid  # the original is unchanged
    with pytest.raises(LocalProtocolError):
        message.stamp(source_qm=guid, ordinal=2**32, sent_time=0.0, transactional=False)


def test_replace_changes_only_what_it_names() -> None:
    changed = PROPERTIES.replace(label="new")
    assert changed.label == "new"
    for name in ("body", "destination", "correlation_id", "app_specific", "source_qm", "extension"):
        assert getattr(changed, name) == getattr(PROPERTIES, name)
    with pytest.raises(TypeError, match="colour"):
        PROPERTIES.replace(colour="red")


def test_message_values_that_cannot_be_encoded_are_local_errors() -> None:
    with pytest.raises(LocalProtocolError, match="priority"):
        MessageProperties(destination="q", priority=300)
    with pytest.raises(LocalProtocolError, match="app_specific"):
        MessageProperties(destination="q", app_specific=-1)
    with pytest.raises(LocalProtocolError, match="correlation"):
        MessageProperties(destination="q", correlation_id=b"x" * 19)
    with pytest.raises(LocalProtocolError, match="label"):
        MessageProperties(destination="q", label="x" * 70_000)
    with pytest.raises(LocalProtocolError, match="destination is not valid Unicode text"):
        MessageProperties(destination="\ud800")


@pytest.mark.parametrize("name", ["label", "admin_queue", "response_queue", "destination"])
def test_a_text_that_cannot_be_sent_is_named_not_the_encoders_words(name: str) -> None:
    with pytest.raises(TextFieldError) as caught:
        MessageProperties(**{name: "\udcff"})
    assert caught.value.field == f"MessageProperties.{name}"
    assert str(caught.value) == (
        f"{name} is not valid Unicode text (position 0: a lone surrogate, "
        "as non-UTF-8 bytes in a command-line argument give)"
    )
    with pytest.raises(TextFieldError) as caught:
        MessageProperties(**{name: "x" * 0x10000})
    assert str(caught.value) == (
        f"{name} is too long to send (65,536 characters): "
        "it can carry at most 65,535 bytes of UTF-8"
    )


def test_label_limit_is_judged_by_the_queue_manager_not_the_format() -> None:
    # The format carries any label up to 65535 bytes of UTF-8; MAX_LABEL_CHARS is
    # for the queue manager to enforce with a typed error, not a broken frame.
    for label in ("x" * (cf.MAX_LABEL_CHARS + 1), "\u00e9" * cf.MAX_LABEL_CHARS, "x" * 0xFFFF):
        message = MessageProperties(label=label)
        assert MessageProperties.from_bytes(message.raw).label == label
    with pytest.raises(LocalProtocolError, match="label"):
        MessageProperties(label="x" * 0x10000)
    with pytest.raises(LocalProtocolError, match="label"):
        MessageProperties(label="\u00e9" * 0x8000)  # 32768 characters, 65536 bytes


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(memoryview(b"abcdef")[::2], id="strided"),
        pytest.param(memoryview(struct.pack("<3H", 1, 2, 3)).cast("H"), id="itemsize-2"),
        pytest.param(bytearray(b"ace"), id="bytearray"),
        pytest.param(
            memoryview(b"abcd").cast("B", shape=[2, 2]),
            id="two-dimensional",
        ),
    ],
)
def test_any_byte_buffer_is_a_body(body: bytes | bytearray | memoryview) -> None:
    expected = memoryview(body).tobytes()
    message = MessageProperties(body=body)
    assert message.body == expected
    assert message.body_size == len(expected)
    assert MessageProperties.from_bytes(message.raw) == message
