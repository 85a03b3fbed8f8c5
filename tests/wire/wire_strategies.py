"""Hypothesis strategies shared by the tests of both formats: integers of each
width, and messages (``wire.MessageProperties``) with every field.

Everything generated here can be encoded, and decodes back to an equal value:
numbers fit their widths, strings have no lone surrogates, times are finite
(a NaN would not compare equal to itself).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from wire import MessageProperties

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 0xFFFFFFFFFFFFFFFF)
text = st.text(max_size=40)
blob = st.binary(max_size=300)
times = st.floats(allow_nan=False, allow_infinity=False)
correlation_ids = st.just(b"") | st.binary(min_size=20, max_size=20)

#: Keyword arguments of ``MessageProperties`` (every field, any encodable value).
message_fields: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {
        "body": blob,
        "label": text,
        "destination": text,
        "correlation_id": correlation_ids,
        "app_specific": u32,
        "priority": u8,
        "delivery": u8,
        "acknowledge": u8,
        "journal": u8,
        "admin_queue": text,
        "response_queue": text,
        "time_to_reach_queue": u32,
        "time_to_be_received": u32,
        "message_class": u16,
        "sent_time": times,
        "source_qm": st.none() | st.uuids(),
        "ordinal": u32,
        "transactional": st.booleans(),
        "extension": st.binary(max_size=30),
    }
)
properties: st.SearchStrategy[MessageProperties] = message_fields.map(
    lambda fields: MessageProperties(**fields)
)
